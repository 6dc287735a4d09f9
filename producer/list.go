package producer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/location"
	"github.com/hivedr/hivedr/schemas"
)

// Lister lists the data files under a directory of the source filesystem,
// recursively (*fs.Router). A missing directory is an error wrapping
// fs.ErrNotExist.
type Lister interface {
	Walk(ctx context.Context, dir string, fn func(location string, size int64) error) error
}

// listDirs returns the directories whose files an event brings into the
// replica but whose message does not list: the metastore lists the files
// of new partitions and tables only for managed tables, so for an external
// table's CREATE_TABLE and ADD_PARTITION (and an ALTER that moves it to
// another location) the tailer lists them itself.
func listDirs(ev *schemas.Event) []string {
	if len(ev.Files) > 0 {
		return nil
	}
	switch p := ev.Payload.(type) {
	case *schemas.TableChange:
		if !p.After.External() || len(p.After.PartitionKeys) > 0 || p.After.Location == "" || p.IsTruncate {
			return nil
		}
		if ev.EventType == schemas.EventCreateTable || (ev.EventType == schemas.EventAlterTable && p.Before != nil && moved(p.Before.Location, p.After.Location)) {
			return []string{p.After.Location}
		}
	case *schemas.PartitionChange:
		if !p.Table.External() || p.IsTruncate {
			return nil
		}
		var dirs []string
		for i, part := range p.After {
			switch {
			case part.Location == "":
			case ev.EventType == schemas.EventAddPartition:
				dirs = append(dirs, part.Location)
			case (ev.EventType == schemas.EventAlterPartition || ev.EventType == schemas.EventAlterPartitions) && i < len(p.Before) && moved(p.Before[i].Location, part.Location):
				dirs = append(dirs, part.Location)
			}
		}
		return dirs
	}
	return nil
}

// moved reports whether an object's location changed: the two differ in
// canonical form (package location). Another spelling of the same place is
// no move; a location that does not parse is compared as written.
func moved(before, after string) bool {
	b, errB := location.Parse(before)
	a, errA := location.Parse(after)
	if errB != nil || errA != nil {
		return before != after
	}
	return a != b
}

// lister lists an event's directories for the tailer: root checks first,
// then the store, retrying what may pass, so that one database's
// unlistable directory costs that database a halt in the applier, not
// every database the tailer serves.
type lister struct {
	l   Lister
	pol *config.Replication
	// retryFor bounds how long a failing listing is retried.
	retryFor time.Duration
	// now and sleep are the clock: sleep waits between attempts and
	// returns false when ctx ended.
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) bool
	log   *slog.Logger
	// meta caches parsed Iceberg metadata (nil: none).
	meta *metadataCache
}

// Backoff of listing retries: doubled from the first, up to the last.
const (
	listBackoffFirst = 500 * time.Millisecond
	listBackoffMax   = 8 * time.Second
)

// list returns the data files under the event's directories (listDirs),
// as the metastore would have listed them for a managed table, and an
// error entry for each directory that cannot be listed:
//
//   - a directory outside the source roots (or unparseable, e.g. with a
//     ".." segment) is never listed: PATH_OUTSIDE_ROOTS, naming it;
//   - one no configured store holds (an unknown cluster or bucket, local
//     files not enabled): LISTING_FAILED at once, since retrying cannot
//     help;
//   - one whose store keeps failing: retried with backoff for retryFor,
//     then LISTING_FAILED with the last error, logged.
//
// A directory that does not exist (any more) has no files: a later event
// drops it. Hidden files (names starting with . or _ below the directory)
// are not data, as for Hive. The lister answers in canonical form
// (package location), the metastore in its own spelling, so the path
// below the directory is taken in canonical form. list returns an error
// only when ctx ends.
func (l *lister) list(ctx context.Context, ev *schemas.Event) ([]schemas.FileRef, []schemas.EventError, error) {
	var (
		files []schemas.FileRef
		errs  []schemas.EventError
	)
	if c, ok := ev.Payload.(*schemas.Compaction); ok {
		return l.listCompaction(ctx, ev, c)
	}
	if before, after, ok := icebergCommit(ev); ok {
		files, _, errs, err := l.listIceberg(ctx, fmt.Sprintf("event %d %s", ev.EventID, ev.EventType), before, after)
		return files, errs, err
	}
	for _, dir := range listDirs(ev) {
		found, _, e, err := l.listDir(ctx, dir, fmt.Sprintf("event %d %s", ev.EventID, ev.EventType), "databases", ev.Databases)
		if err != nil {
			return nil, nil, err
		}
		if e != nil {
			errs = append(errs, *e)
			continue
		}
		files = append(files, found...)
	}
	return files, errs, nil
}

// listDir lists one directory under list's rules for what (an event, a
// bootstrap's record; logged with the attributes attrs): its data files
// and their total size, or the error entry the record carries instead.
// The error is ctx's only.
func (l *lister) listDir(ctx context.Context, dir, what string, attrs ...any) ([]schemas.FileRef, int64, *schemas.EventError, error) {
	found, sizes, e, err := l.listDirKeepSizes(ctx, dir, what, dataFile, attrs...)
	return found, total(sizes), e, err
}

// dataFile keeps what is not hidden (a name below the directory starting
// with . or _): the files a reader of the directory reads.
func dataFile(rel string) bool { return !location.Hidden(rel) }

func total(sizes []int64) int64 {
	var n int64
	for _, s := range sizes {
		n += s
	}
	return n
}

// listDirSizes is listDir with each file's size (sizes[i] is found[i]'s).
func (l *lister) listDirSizes(ctx context.Context, dir, what string, attrs ...any) ([]schemas.FileRef, []int64, *schemas.EventError, error) {
	return l.listDirKeepSizes(ctx, dir, what, dataFile, attrs...)
}

// listDirKeep is listDir keeping the files whose path below dir keep
// accepts.
func (l *lister) listDirKeep(ctx context.Context, dir, what string, keep func(rel string) bool, attrs ...any) ([]schemas.FileRef, int64, *schemas.EventError, error) {
	found, sizes, e, err := l.listDirKeepSizes(ctx, dir, what, keep, attrs...)
	return found, total(sizes), e, err
}

// listDirKeepSizes is listDirKeep with each file's size.
func (l *lister) listDirKeepSizes(ctx context.Context, dir, what string, keep func(rel string) bool, attrs ...any) ([]schemas.FileRef, []int64, *schemas.EventError, error) {
	d, err := l.pol.CheckSourceRoot(dir)
	if err != nil {
		return nil, nil, &schemas.EventError{Kind: schemas.ErrPathOutsideRoots, Path: dir,
			Message: fmt.Sprintf("directory not listed: %v", err)}, nil
	}
	var (
		found []schemas.FileRef
		sizes []int64
	)
	err = l.retry(ctx, fmt.Sprintf("list the files of %s (%s)", dir, what), "listing a directory failed; retrying",
		func(err error) bool { return errors.Is(err, fs.ErrNoStore) || errors.Is(err, errStrayed) },
		func() error {
			found, sizes, err = l.walk(ctx, dir, d, keep)
			if errors.Is(err, fs.ErrNotExist) {
				return nil // nothing there: no files
			}
			return err
		}, append([]any{"dir", dir, "for", what}, attrs...)...)
	if err == nil {
		return found, sizes, nil, nil
	}
	if ctx.Err() != nil {
		return nil, nil, nil, ctx.Err()
	}
	l.log.Error("cannot list a directory: publishing the record with LISTING_FAILED; the applier halts its database on it",
		append([]any{"dir", dir, "for", what, "err", err}, attrs...)...)
	return nil, nil, &schemas.EventError{Kind: schemas.ErrListingFailed, Path: dir, Message: err.Error()}, nil
}

// retry runs op until it succeeds, fails in a way permanent says no retry
// mends, or the next wait would take it past retryFor, backing off
// between attempts (logged as warn, with attrs). It returns nil once op
// succeeded, ctx's error when ctx ended, and otherwise op's last error
// wrapped as "<what> failed after N attempts in D".
func (l *lister) retry(ctx context.Context, what, warn string, permanent func(error) bool, op func() error, attrs ...any) error {
	start := l.now()
	for attempt, wait := 1, listBackoffFirst; ; attempt, wait = attempt+1, min(2*wait, listBackoffMax) {
		err := op()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if elapsed := l.now().Sub(start); permanent(err) || elapsed+wait > l.retryFor {
			return fmt.Errorf("%s failed after %d attempts in %s: %w", what, attempt, elapsed.Round(time.Millisecond), err)
		}
		l.log.Warn(warn, append(slices.Clip(attrs), "attempt", attempt, "err", err, "retry_in", wait)...)
		if !l.sleep(ctx, wait) {
			return ctx.Err()
		}
	}
}

// errStrayed marks a listing that answered with a location outside the
// directory asked for: a store fault no retry mends.
var errStrayed = errors.New("the listing strayed outside the directory")

// walk lists the files under dir (d: its canonical form) that keep
// accepts once, and their sizes.
func (l *lister) walk(ctx context.Context, dir string, d location.Location, keep func(rel string) bool) ([]schemas.FileRef, []int64, error) {
	var (
		files []schemas.FileRef
		sizes []int64
	)
	err := l.l.Walk(ctx, dir, func(loc string, size int64) error {
		f, err := location.Parse(loc)
		if err != nil {
			return fmt.Errorf("%w: listed file: %w", errStrayed, err)
		}
		rel, ok := f.Rel(d)
		if !ok || rel == "" {
			return fmt.Errorf("%w: listed file %s is not under %s", errStrayed, loc, dir)
		}
		if !keep(rel) {
			return nil
		}
		files = append(files, schemas.FileRef{URI: loc})
		sizes = append(sizes, size)
		return nil
	})
	return files, sizes, err
}
