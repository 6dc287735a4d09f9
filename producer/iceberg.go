package producer

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/iceberg"
	"github.com/hivedr/hivedr/schemas"
)

// FileReader reads whole source files. A Lister that is also a
// FileReader (*fs.Router) lets the tailer read Iceberg tables' metadata;
// without one, an Iceberg commit is published with LISTING_FAILED.
type FileReader interface {
	ReadFile(ctx context.Context, loc string, limit int64) ([]byte, error)
}

// IsIceberg says whether a table is an Iceberg table (its table_type
// parameter; the metastore's table type says EXTERNAL_TABLE).
func IsIceberg(t *schemas.Table) bool {
	return t != nil && iceberg.IsTable(t.Parameters)
}

// icebergCommit says whether ev is a commit of an Iceberg table, and the
// metadata locations before ("" for a new table) and after it. A change
// that keeps the pointer (a rename, a parameter) is one too, with before
// equal to after: it brings no files.
func icebergCommit(ev *schemas.Event) (before, after string, ok bool) {
	c, isTable := ev.Payload.(*schemas.TableChange)
	if !isTable || !IsIceberg(c.After) {
		return "", "", false
	}
	switch ev.EventType {
	case schemas.EventCreateTable:
		return "", c.After.Parameters[iceberg.ParamMetadataLocation], true
	case schemas.EventAlterTable:
		if c.Before == nil {
			return "", "", false
		}
		b := c.Before.Parameters[iceberg.ParamMetadataLocation]
		if !IsIceberg(c.Before) {
			b = "" // made an Iceberg table (a migration): everything is new
		}
		return b, c.After.Parameters[iceberg.ParamMetadataLocation], true
	}
	return "", "", false
}

// listIceberg is list for an Iceberg commit: the files the new metadata's
// snapshots reach that the previous metadata's did not
// (iceberg.Added), then the new metadata file, each marked with how a
// copy rewrites it for DR's paths. The previous metadata is read when it
// can be; when it cannot (removed), everything the new one reaches is
// listed, and copies of what DR has are found identical. A file outside
// the source roots is PATH_OUTSIDE_ROOTS; metadata that cannot be read
// (after retries for retryFor) is LISTING_FAILED: the applier halts the
// database at the commit, naming the file.
func (l *lister) listIceberg(ctx context.Context, what, before, after string) ([]schemas.FileRef, int64, []schemas.EventError, error) {
	if after == "" || (before != "" && !moved(before, after)) {
		return nil, 0, nil, nil
	}
	fr, ok := l.l.(FileReader)
	if !ok {
		return nil, 0, []schemas.EventError{{Kind: schemas.ErrListingFailed, Path: after,
			Message: "an Iceberg table's metadata cannot be read: the tailer's source stores do not read files"}}, nil
	}
	read := func(ctx context.Context, p string) ([]byte, error) {
		if _, err := l.pol.CheckSourceRoot(p); err != nil {
			return nil, &outsideError{p, err}
		}
		b, err := fr.ReadFile(ctx, p, iceberg.MaxFile)
		if err != nil {
			return nil, &storeError{err}
		}
		return b, nil
	}
	var files []iceberg.File
	err := l.retry(ctx, fmt.Sprintf("read the Iceberg metadata %s (%s)", after, what), "reading an Iceberg table's metadata failed; retrying",
		func(err error) bool {
			var out *outsideError
			return errors.As(err, &out) || errors.Is(err, fs.ErrNoStore) || errors.Is(err, errIcebergFormat)
		},
		func() (err error) {
			files, err = l.icebergFiles(ctx, read, before, after)
			return err
		}, "metadata", after, "for", what)
	var out *outsideError
	switch {
	case errors.As(err, &out):
		return nil, 0, []schemas.EventError{{Kind: schemas.ErrPathOutsideRoots, Path: out.path,
			Message: fmt.Sprintf("Iceberg file not read: %v", out.err)}}, nil
	case err != nil && ctx.Err() != nil:
		return nil, 0, nil, ctx.Err()
	case err != nil:
		l.log.Error("cannot read an Iceberg table's metadata: publishing the record with LISTING_FAILED; the applier halts its database on it",
			"metadata", after, "for", what, "err", err)
		return nil, 0, []schemas.EventError{{Kind: schemas.ErrListingFailed, Path: after, Message: err.Error()}}, nil
	}
	refs := make([]schemas.FileRef, 0, len(files)+1)
	var size int64
	for _, f := range files {
		if _, err := l.pol.CheckSourceRoot(f.Path); err != nil {
			return nil, 0, []schemas.EventError{{Kind: schemas.ErrPathOutsideRoots, Path: f.Path,
				Message: fmt.Sprintf("Iceberg %s file not copied: %v", f.Kind, err)}}, nil
		}
		refs = append(refs, schemas.FileRef{URI: f.Path, Rewrite: rewriteOf(f.Kind)})
		size += max(f.Size, 0)
	}
	return append(refs, schemas.FileRef{URI: after, Rewrite: schemas.RewriteIcebergMetadata}), size, nil, nil
}

// errIcebergFormat marks metadata that does not parse: no retry mends it.
var errIcebergFormat = errors.New("not Iceberg metadata hivedr reads")

// storeError is a failure of the source store to read a file: retried.
type storeError struct{ err error }

func (s *storeError) Error() string { return s.err.Error() }
func (s *storeError) Unwrap() error { return s.err }

// outsideError is a file the metadata names outside the source roots.
type outsideError struct {
	path string
	err  error
}

func (o *outsideError) Error() string { return fmt.Sprintf("%s: %v", o.path, o.err) }

// icebergFiles reads the metadata after (and before, when it can) and
// returns what after adds.
func (l *lister) icebergFiles(ctx context.Context, read iceberg.ReadFile, before, after string) ([]iceberg.File, error) {
	next, err := l.icebergMetadata(ctx, read, after)
	if err != nil {
		return nil, err
	}
	var prev *iceberg.Metadata
	if before != "" {
		prev, err = l.icebergMetadata(ctx, read, before)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			l.log.Warn("an Iceberg table's previous metadata is gone: listing everything its new metadata reaches", "previous", before, "metadata", after)
		case err != nil:
			return nil, err
		}
	}
	files, err := iceberg.Added(ctx, prev, next, read)
	var out *outsideError
	var se *storeError
	if err != nil && !errors.As(err, &out) && !errors.As(err, &se) {
		return nil, fmt.Errorf("%w: %w", errIcebergFormat, err)
	}
	return files, err
}

// icebergMetadata reads and parses the metadata file at loc, or takes it
// from the lister's cache: a commit's previous metadata is, in the
// common case, the one the table's last commit listed.
func (l *lister) icebergMetadata(ctx context.Context, read iceberg.ReadFile, loc string) (*iceberg.Metadata, error) {
	if m := l.meta.get(loc); m != nil {
		return m, nil
	}
	b, err := read(ctx, loc)
	if err != nil {
		return nil, err
	}
	m, err := iceberg.ParseMetadata(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", errIcebergFormat, loc, err)
	}
	l.meta.put(loc, m)
	return m, nil
}

// metadataCache holds the last parsed Iceberg metadata files by location,
// up to max (the oldest put leaves first). Metadata files are written
// once and never changed, so an entry cannot go stale. Safe for
// concurrent use; a nil cache holds nothing.
type metadataCache struct {
	mu    sync.Mutex
	max   int
	byLoc map[string]*iceberg.Metadata
	order []string // locations, oldest first
}

// metadataCached is how many parsed metadata files a tailer keeps: a few
// per Iceberg table committing at once.
const metadataCached = 64

func newMetadataCache(max int) *metadataCache {
	return &metadataCache{max: max, byLoc: map[string]*iceberg.Metadata{}}
}

func (c *metadataCache) get(loc string) *iceberg.Metadata {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byLoc[loc]
}

func (c *metadataCache) put(loc string, m *iceberg.Metadata) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byLoc[loc]; ok {
		return
	}
	if len(c.order) >= c.max {
		delete(c.byLoc, c.order[0])
		c.order = c.order[1:]
	}
	c.byLoc[loc] = m
	c.order = append(c.order, loc)
}

// rewriteOf is the FileRef.Rewrite of a kind of Iceberg file.
func rewriteOf(k iceberg.Kind) string {
	switch k {
	case iceberg.KindMetadata:
		return schemas.RewriteIcebergMetadata
	case iceberg.KindManifestList:
		return schemas.RewriteIcebergManifestList
	case iceberg.KindManifest:
		return schemas.RewriteIcebergManifest
	case iceberg.KindPositionDeletes:
		return schemas.RewriteIcebergPositionDeletes
	}
	return ""
}
