package producer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hivedr/hivedr/internal/acid"
	"github.com/hivedr/hivedr/internal/location"
	"github.com/hivedr/hivedr/schemas"
)

// Compactions of transactional tables.
//
// Hive's compactor rewrites a table's or partition's deltas as one base
// (major) or one delta (minor) in a transaction of its own, T, naming what
// it writes base_N_vT or delta_A_B_vT: a reader sees the new directory
// once T is committed in its view, and the cleaner later removes the
// directories it made obsolete. The commit is logged as COMMIT_COMPACTION,
// naming the table and partition only. To replicate it the tailer reads
// where that is (the source metastore's table or partition location) and
// lists there the directories whose visibility suffix is T: those are the
// compaction's output, whole, since the compactor writes them before it
// commits. Their files become the event's files, copied to DR under the
// directory's hidden staging name (acid.StagingName); the applier renames
// the directory into place in one step once all are copied, then removes
// what it made obsolete, so a DR reader sees the old directories or the
// new one, never a part of it and never neither.
//
// A compaction's files are read from the live tree like any other: if the
// source's cleaner of a later compaction removed them before copyd reads
// them, copyd falls back to change management, and failing that the copy
// ends SOURCE_GONE and the applier forgives it only when a later
// compaction of the same object replaces what it wrote.

// completeCompactions adds to each COMMIT_COMPACTION of a replicated table
// the source directory it compacted, read from the source metastore. A
// table or partition gone since has none (a later event drops it); no
// source metastore to read from is an error on the event (the applier
// halts its database rather than lose the compaction silently). An error
// is a failure to read the source: the batch is retried.
func (t *Tailer) completeCompactions(ctx context.Context, evs []schemas.Event) error {
	for i := range evs {
		ev := &evs[i]
		c, ok := ev.Payload.(*schemas.Compaction)
		if !ok || len(ev.Errors) > 0 || Route(*ev, &t.conf.Replication).Filtered != "" {
			continue
		}
		if t.cfg.Snapshots == nil {
			ev.Errors = append(ev.Errors, schemas.EventError{Kind: schemas.ErrListingFailed,
				Message: fmt.Sprintf("COMMIT_COMPACTION of %s.%s: no source metastore is configured (source.metastore) to read where the compaction wrote",
					c.Database, c.Table)})
			continue
		}
		loc, err := t.compactedLocation(ctx, c)
		if errors.Is(err, ErrNoSuchObject) {
			t.log.Info("a compacted table or partition is gone from the source; its compaction is published without files",
				"event_id", ev.EventID, "db", c.Database, "table", c.Table, "partition", c.Partition)
			continue
		}
		if err != nil {
			return fmt.Errorf("read where compaction %d of %s.%s wrote (COMMIT_COMPACTION event %d): %w",
				c.CompactionID, c.Database, c.Table, ev.EventID, err)
		}
		out := *c
		out.Location = loc
		ev.Payload = &out
	}
	return nil
}

// compactedLocation is the source directory a compaction rewrote.
func (t *Tailer) compactedLocation(ctx context.Context, c *schemas.Compaction) (string, error) {
	if c.Partition == "" {
		tb, err := t.cfg.Snapshots.Table(ctx, c.Database, c.Table)
		if err != nil {
			return "", err
		}
		return tb.Location, nil
	}
	parts, err := t.cfg.Snapshots.Partitions(ctx, c.Database, c.Table, []string{c.Partition})
	if err != nil {
		return "", err
	}
	if len(parts) == 0 {
		return "", fmt.Errorf("partition %s of %s.%s: %w", c.Partition, c.Database, c.Table, ErrNoSuchObject)
	}
	return parts[0].Location, nil
}

// listCompaction lists, under the directory a compaction rewrote, the
// files of the directories it wrote (those named with its transaction as
// their visibility suffix), keeping the compactor's metadata files beside
// the data (a DR reader needs _metadata_acid to read a compacted base as
// one) but not other hidden names; it records the directories' names on
// the payload and each file's directory as its Subdir. Listing errors are
// listDir's.
func (l *lister) listCompaction(ctx context.Context, ev *schemas.Event, c *schemas.Compaction) ([]schemas.FileRef, []schemas.EventError, error) {
	if c.Location == "" {
		return nil, nil, nil
	}
	dirs := map[string]bool{}
	keep := func(rel string) bool {
		top, rest, nested := strings.Cut(rel, "/")
		d, ok := acid.ParseDir(top)
		if !nested || !ok || d.Visibility != c.TxnID || strings.HasPrefix(rest, ".") || strings.Contains(rest, "/") {
			return false
		}
		dirs[top] = true
		return true
	}
	found, _, e, err := l.listDirKeep(ctx, c.Location, fmt.Sprintf("event %d %s", ev.EventID, ev.EventType), keep,
		"databases", ev.Databases)
	if err != nil || e != nil {
		var errs []schemas.EventError
		if e != nil {
			errs = append(errs, *e)
		}
		return nil, errs, err
	}
	base := strings.TrimSuffix(c.Location, "/")
	for i := range found {
		if rel, ok := location.Below(base, found[i].URI); ok {
			found[i].Subdir, _, _ = strings.Cut(rel, "/")
		}
	}
	out := *c
	for d := range dirs {
		out.Dirs = append(out.Dirs, d)
	}
	slices.Sort(out.Dirs)
	ev.Payload = &out
	return found, nil, nil
}
