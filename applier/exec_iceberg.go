package applier

import (
	"context"
	"errors"
	"fmt"

	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/iceberg"
	"github.com/hivedr/hivedr/internal/location"
)

// FileReader reads whole DR files (fs.Router): the applier reads DR's
// Iceberg metadata with it to find what an expiry left unreachable.
type FileReader interface {
	ReadFile(ctx context.Context, loc string, limit int64) ([]byte, error)
}

// expireIceberg removes what only the snapshots the commit expired
// reached (iceberg.Expired of the DR metadata before and after it). It
// runs before the pointer moves (a re-run after a crash finds the same
// two metadata files and what is left to remove); readers of DR's current
// snapshot lose nothing, since an expiry never expires the current
// snapshot. A file outside the table's DR location is never removed, nor
// one a later event's copy wrote. When the metadata before the commit is
// gone from DR there is nothing to compare: nothing is removed.
func (x *executor) expireIceberg(ctx context.Context, a ExpireIceberg) error {
	refuse := func(err error) error { return &RefusedError{Op: a.String(), Err: err} }
	fr, ok := x.files.(FileReader)
	if x.files == nil || !ok {
		return refuse(errors.New("no filesystem that reads files is configured for DR data"))
	}
	root, err := location.Parse(a.Root)
	if err != nil {
		return refuse(fmt.Errorf("table location: %w", err))
	}
	read := func(ctx context.Context, p string) ([]byte, error) { return fr.ReadFile(ctx, p, iceberg.MaxFile) }
	gone := func(err error) bool { return errors.Is(err, fs.ErrNotExist) }
	meta := func(p string) (*iceberg.Metadata, error) {
		b, err := read(ctx, p)
		if err != nil {
			return nil, err
		}
		m, err := iceberg.ParseMetadata(b)
		if err != nil {
			return nil, refuse(fmt.Errorf("%s: %w", p, err))
		}
		return m, nil
	}
	prev, err := meta(a.Prev)
	if gone(err) {
		x.warn("Iceberg metadata before the commit is gone from DR: files of expired snapshots, if any, stay",
			"table", a.DB+"."+a.Table, "metadata", a.Prev, "event", a.EventID)
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", a, err)
	}
	next, err := meta(a.Next)
	if err != nil {
		return fmt.Errorf("%s: %w", a, err)
	}
	files, err := iceberg.Expired(ctx, prev, next, read, gone)
	if err != nil {
		return fmt.Errorf("%s: %w", a, err)
	}
	removed := 0
	for _, f := range files {
		l, err := location.Parse(f.Path)
		if err != nil {
			return refuse(fmt.Errorf("expired file: %w", err))
		}
		rel, ok := l.Rel(root)
		if !ok || rel == "" {
			x.warn("an expired Iceberg snapshot's file is outside the table's DR location: kept",
				"table", a.DB+"."+a.Table, "file", f.Path, "location", a.Root)
			continue
		}
		later, err := x.copiedLater(ctx, l.String(), f.Path, a.EventID)
		if err != nil {
			return fmt.Errorf("%s: %w", a, err)
		}
		if later {
			continue
		}
		if err := x.files.Remove(ctx, f.Path); err != nil && !gone(err) {
			return fmt.Errorf("%s: remove %s: %w", a, f.Path, err)
		}
		removed++
	}
	if removed > 0 {
		x.info("removed the DR files only expired Iceberg snapshots reached",
			"table", a.DB+"."+a.Table, "files", removed, "event", a.EventID)
	}
	return nil
}

func (x *executor) warn(msg string, args ...any) {
	if x.log != nil {
		x.log.Warn(msg, args...)
	}
}

func (x *executor) info(msg string, args ...any) {
	if x.log != nil {
		x.log.Info(msg, args...)
	}
}
