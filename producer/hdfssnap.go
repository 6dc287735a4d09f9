package producer

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hivedr/hivedr/internal/acid"
	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/hmsevent"
	"github.com/hivedr/hivedr/internal/hmslog"
	"github.com/hivedr/hivedr/internal/location"
	"github.com/hivedr/hivedr/schemas"
)

// HDFS snapshots of a bootstrap's source directories: its files are
// listed and copied from a snapshot taken at the cut, so a file changed
// or removed after the cut is still copied with the cut's bytes.
//
// At the cut. The first page of a bootstrap (before its BEGIN) finds the
// snapshottable directories inside the source roots and, of the database's
// and its tables' locations, picks for each the deepest snapshottable
// directory holding it (planSnapshots). The plan is committed first (the
// names in BootstrapState.hdfs_snapshots and a SnapshotRelease), then the
// snapshots are created, named hivedr-bootstrap.<source>.<bootstrap id>,
// after a read of the log's head (snapshot_event_id): their data holds
// every event up to it. A crash between the plan and the BEGIN's commit
// creates them again (a leftover of the same name is deleted first: no
// record names it yet).
//
// Which records read from them. A record's files come from a snapshot
// only when no event after snapshot_event_id, up to the head read after
// the record's object was read, touches its table (touchIndex: the log
// scanned once per bootstrap, a set of table names). Then the table's data
// in the snapshot is its data as of that head, the state the record's
// metadata and stamp describe. A table changed since the snapshot (an
// insert, an overwrite, a partition added, dropped and added again, a
// rename) is listed from the live tree instead, as without snapshots, and
// its record is stamped as always: copying the snapshot's older files
// under a newer metadata would leave on DR files the source dropped (a DR
// drop keeps its data), which the events after the stamp could not
// remove. So the snapshot protects every file from the time its record is
// listed to the time it is copied, and the live tree keeps today's rules
// (checksums verified, SOURCE_GONE, never a torn file) for what changed
// before its record was read. The copy task's source is the file inside
// the snapshot (dir/.snapshot/<name>/...); the record's file list keeps
// the live names, which the applier maps and prunes by.
//
// Release. A snapshot must outlive every copy task that reads it: a task
// published in a committed page is consumed by copyd until its completion
// commits with copyd's offset (exactly once), and may be retried,
// revoked and redelivered to another daemon before then. So the tailer,
// which took the snapshots and alone may delete them on the source
// cluster, counts the completions of the bootstrap's tasks
// (<bootstrap_id>-s<seq>-<i>, the completions' keys) from
// <prefix>.completions, from offsets noted before its first task was
// published, and deletes the snapshots once the count reaches the tasks
// the bootstrap published in all (known at its END, or when it is dropped).
// Counts and read offsets are committed with the checkpoint, so a restart
// counts on where it stopped. Not the applier: it works on the DR
// cluster, and it may pass over a record whose object a later event
// removes before copyd is done with its files. A bootstrap the tailer no
// longer knows (a checkpoint lost, a tailer started afresh) leaves its
// snapshots to sweepSnapshots, which deletes at start every snapshot of
// this source's prefix that no bootstrap or release of the checkpoint
// names.

// DirSnapshots takes, lists and deletes HDFS snapshots of source
// directories (*fs.Router). Locations are as the lister takes them.
type DirSnapshots interface {
	// SnapshottableDirs lists the snapshottable directories at or under
	// root; a root on a store without snapshots is an error wrapping
	// fs.ErrNoSnapshots.
	SnapshottableDirs(ctx context.Context, root string) ([]string, error)
	// CreateSnapshot snapshots dir under name.
	CreateSnapshot(ctx context.Context, dir, name string) error
	// DeleteSnapshot deletes dir's snapshot name; one already gone is not
	// an error.
	DeleteSnapshot(ctx context.Context, dir, name string) error
	// SnapshotNames lists the names of dir's snapshots.
	SnapshotNames(ctx context.Context, dir string) ([]string, error)
}

// snapshotPrefix begins the names of this source's bootstrap snapshots:
// hivedr-bootstrap.<source>., the source name's characters other than
// letters, digits, - and _ written _ (the dot ends it, so one source's
// prefix is never another's).
func snapshotPrefix(source string) string {
	return "hivedr-bootstrap." + strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return '_'
	}, source) + "."
}

// hdfsSnap is one snapshot of a directory.
type hdfsSnap struct {
	dir  location.Location
	name string
}

// String is the snapshot's root: dir/.snapshot/name, the form
// BootstrapState.hdfs_snapshots keeps.
func (s hdfsSnap) String() string { return s.root().String() }

func (s hdfsSnap) root() location.Location {
	r := s.dir
	r.Path = path.Join(r.Path, ".snapshot", s.name)
	return r
}

// parseSnap reads a snapshot's root (dir/.snapshot/name).
func parseSnap(s string) (hdfsSnap, error) {
	l, err := location.Parse(s)
	if err != nil {
		return hdfsSnap{}, err
	}
	dir, name := path.Split(l.Path)
	if path.Base(dir) != ".snapshot" || name == "" {
		return hdfsSnap{}, fmt.Errorf("%s is not a snapshot's root (dir/.snapshot/name)", s)
	}
	l.Path = path.Dir(path.Clean(dir))
	return hdfsSnap{dir: l, name: name}, nil
}

// inSnapshot is where the snapshot holds live location l; ok is false
// when l is not under the snapshot's directory.
func (s hdfsSnap) inSnapshot(l location.Location) (location.Location, bool) {
	rel, ok := l.Rel(s.dir)
	if !ok {
		return location.Location{}, false
	}
	r := s.root()
	r.Path = path.Join(r.Path, rel)
	return r, true
}

// live is the live location of sl, a location inside the snapshot.
func (s hdfsSnap) live(sl location.Location) (location.Location, bool) {
	rel, ok := sl.Rel(s.root())
	if !ok {
		return location.Location{}, false
	}
	l := s.dir
	l.Path = path.Join(l.Path, rel)
	return l, true
}

// snapsOf reads b's snapshots (those that do not parse are logged once
// and left out: their directories are read live).
func (t *Tailer) snapsOf(b *schemas.BootstrapState) []hdfsSnap {
	var out []hdfsSnap
	for _, s := range b.HDFSSnapshots {
		sn, err := parseSnap(s)
		if err != nil {
			if key := "snap/" + s; !t.warned[key] {
				t.warned[key] = true
				t.log.Warn("a bootstrap's HDFS snapshot does not parse; its directory is read live", "bootstrap_id", b.BootstrapID, "err", err)
			}
			continue
		}
		out = append(out, sn)
	}
	return out
}

// holding returns the deepest of snaps whose directory holds l.
func holding(snaps []hdfsSnap, l location.Location) (hdfsSnap, bool) {
	var best hdfsSnap
	found := false
	for _, s := range snaps {
		if _, ok := l.Rel(s.dir); ok && (!found || len(s.dir.Path) > len(best.dir.Path)) {
			best, found = s, true
		}
	}
	return best, found
}

// planSnapshots picks the directories to snapshot for bootstrap b of
// database d with tables: for the database's location and each table's
// whose files it copies, the deepest snapshottable directory inside the
// source roots that holds it. It returns their snapshots' roots, sorted;
// none without DirSnapshots or snapshottable directories. A store that
// cannot list them is logged and read live.
func (t *Tailer) planSnapshots(ctx context.Context, b *schemas.BootstrapState, d *schemas.Database, tables []string) ([]string, error) {
	ds := t.cfg.DirSnapshots
	if ds == nil {
		return nil, nil
	}
	var dirs []hdfsSnap
	name := snapshotPrefix(t.conf.Source.Name) + b.BootstrapID
	for _, root := range t.conf.Replication.SourceRoots {
		list, err := ds.SnapshottableDirs(ctx, root)
		switch {
		case errors.Is(err, fs.ErrNoSnapshots) || errors.Is(err, fs.ErrNoStore):
			continue
		case err != nil:
			t.log.Warn("cannot list the snapshottable directories of a source root; the bootstrap reads it live", "root", root,
				"bootstrap_id", b.BootstrapID, "err", err)
			continue
		}
		for _, s := range list {
			if l, err := location.Parse(s); err == nil && !slices.ContainsFunc(dirs, func(h hdfsSnap) bool { return h.dir == l }) {
				dirs = append(dirs, hdfsSnap{dir: l, name: name})
			}
		}
	}
	if len(dirs) == 0 {
		return nil, nil
	}
	locs := []string{d.Location}
	for _, n := range tables {
		tb, err := t.cfg.Snapshots.Table(ctx, b.Database, n)
		if errors.Is(err, ErrNoSuchObject) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if tb.TableType != "VIRTUAL_VIEW" && (b.WithData || !tb.External()) {
			locs = append(locs, tb.Location)
		}
	}
	var out []string
	for _, s := range locs {
		l, err := location.Parse(s)
		if err != nil || s == "" {
			continue
		}
		if _, err := t.conf.Replication.CheckSourceRoot(s); err != nil {
			continue
		}
		if h, ok := holding(dirs, l); ok && !slices.Contains(out, h.String()) {
			out = append(out, h.String())
		}
	}
	slices.Sort(out)
	return out, nil
}

// takeSnapshots creates b's planned snapshots after reading the log's
// head, which becomes b's snapshot_event_id. A leftover of the same name
// (a crash after creating it, before the BEGIN's commit) is deleted
// first. A directory that refuses a snapshot is logged and read live.
func (t *Tailer) takeSnapshots(ctx context.Context, b *schemas.BootstrapState) error {
	head, err := t.cfg.Source.Head(ctx)
	if err != nil {
		return err
	}
	ds := t.cfg.DirSnapshots
	var taken []string
	for _, s := range t.snapsOf(b) {
		dir := s.dir.String()
		err := ds.DeleteSnapshot(ctx, dir, s.name)
		if err == nil {
			err = ds.CreateSnapshot(ctx, dir, s.name)
		}
		if err != nil {
			t.log.Warn("cannot take an HDFS snapshot for a bootstrap; its directory is read live", "dir", dir, "snapshot", s.name,
				"bootstrap_id", b.BootstrapID, "err", err)
			continue
		}
		taken = append(taken, s.String())
	}
	t.log.Info("bootstrap: HDFS snapshots taken at the cut", "db", b.Database, "bootstrap_id", b.BootstrapID, "snapshots", taken,
		"snapshot_event_id", head)
	b.HDFSSnapshots, b.SnapshotEventID = taken, max(head, 1)
	return nil
}

// touchIndex is what of a bootstrap's database changed after its
// snapshots: the log scanned from snapshot_event_id.
type touchIndex struct {
	scanned int64           // events up to here are in
	tables  map[string]bool // lower-case names of tables touched
	all     bool            // the database was dropped, or the log has a hole
}

// changedSince reports whether an event after b's snapshots, up to upTo,
// touches table (touchedTables; a hole in the log counts as touching
// everything).
func (t *Tailer) changedSince(ctx context.Context, b *schemas.BootstrapState, table string, upTo int64) (bool, error) {
	ix := t.touch[b.BootstrapID]
	if ix == nil {
		ix = &touchIndex{scanned: b.SnapshotEventID, tables: map[string]bool{}}
		t.touch[b.BootstrapID] = ix
	}
	for ix.scanned < upTo && !ix.all {
		evs, err := t.cfg.Source.Next(ctx, ix.scanned, t.conf.Tailer.BatchSize)
		if err != nil {
			return false, err
		}
		if n := contiguous(ix.scanned, evs); n < len(evs) || len(evs) == 0 {
			ix.all = true
			break
		}
		for _, e := range evs {
			if e.EventID > upTo {
				ix.scanned = upTo
				break
			}
			names, all := touchedTables(e, b.Database)
			ix.all = ix.all || all
			for _, n := range names {
				ix.tables[n] = true
			}
			ix.scanned = e.EventID
		}
	}
	return ix.all || ix.tables[strings.ToLower(table)], nil
}

// touchedTables returns the tables of db (lower case) a log event may
// change: its own table, both names of a rename; all when it drops db.
func touchedTables(raw hmslog.RawEvent, db string) (names []string, all bool) {
	sameDB := strings.EqualFold(raw.Database, db)
	switch raw.EventType.Canonical() {
	case schemas.EventDropDatabase:
		return nil, sameDB
	case schemas.EventAlterTable:
		for d, ns := range namedTables(hmsevent.Decode(raw)) {
			if strings.EqualFold(d, db) {
				for _, n := range ns {
					names = append(names, strings.ToLower(n))
				}
			}
		}
	}
	if sameDB && raw.Table != "" {
		names = append(names, strings.ToLower(raw.Table))
	}
	return names, false
}

// readFrom returns the snapshot a record's files under dir, an object of
// tb, are listed and copied from: one of b's snapshots holds dir and no
// event after them up to head (read after the record's object) touched
// the table. nil: the live tree, always for a transactional table
// (bootstrap_acid.go).
func (pg *snapPage) readFrom(ctx context.Context, tb *schemas.Table, dir string, head int64) (*hdfsSnap, error) {
	t, b := pg.t, pg.b
	if b.SnapshotEventID == 0 || len(b.HDFSSnapshots) == 0 || dir == "" || acid.Transactional(tb.Parameters) {
		return nil, nil
	}
	table := strings.ToLower(tb.Name)
	l, err := location.Parse(dir)
	if err != nil {
		return nil, nil
	}
	s, ok := holding(t.snapsOf(b), l)
	if !ok {
		return nil, nil
	}
	changed, err := t.changedSince(ctx, b, table, head)
	if err != nil || changed {
		return nil, err
	}
	return &s, nil
}

// fromSnapshot turns files listed inside snapshot s back into their live
// locations (what the record lists and the applier maps).
func fromSnapshot(s *hdfsSnap, files []schemas.FileRef) error {
	for i := range files {
		l, err := location.Parse(files[i].URI)
		if err != nil {
			return err
		}
		live, ok := s.live(l)
		if !ok {
			return fmt.Errorf("listed %s, which is not inside snapshot %s", files[i].URI, s)
		}
		files[i].URI = live.String()
	}
	return nil
}

// readTasksFrom points the copy tasks of files under snapshot s at their
// copies inside it.
func readTasksFrom(s *hdfsSnap, tasks []schemas.CopyTask) {
	for i := range tasks {
		if l, err := location.Parse(tasks[i].SourceURI); err == nil {
			if in, ok := s.inSnapshot(l); ok {
				tasks[i].SourceURI = in.String()
			}
		}
	}
}

// addRelease records that b's snapshots are to be released once its copy
// tasks are done; the first release notes where the completions topic
// ends, from where they are counted.
func (t *Tailer) addRelease(ctx context.Context, st *txState, b *schemas.BootstrapState) error {
	if len(st.releases) == 0 || len(st.compOffs) == 0 {
		ends, err := t.completionEnds(ctx)
		if err != nil {
			return err
		}
		st.compOffs = ends
	}
	st.releases = append(slices.Clone(st.releases), schemas.SnapshotRelease{BootstrapID: b.BootstrapID,
		HDFSSnapshots: slices.Clone(b.HDFSSnapshots), Tasks: -1})
	return nil
}

// finishRelease records that b publishes no more copy tasks (its END, or
// it is dropped): its snapshots go once b.Files tasks have completed.
func finishRelease(st *txState, b *schemas.BootstrapState) {
	i := slices.IndexFunc(st.releases, func(r schemas.SnapshotRelease) bool { return r.BootstrapID == b.BootstrapID })
	if i < 0 || st.releases[i].Tasks >= 0 {
		return
	}
	st.releases = slices.Clone(st.releases)
	st.releases[i].Tasks = b.Files
	// The snapshots actually taken (a directory may have refused one).
	if b.SnapshotEventID > 0 {
		st.releases[i].HDFSSnapshots = slices.Clone(b.HDFSSnapshots)
	}
}

// completionEnds returns the last stable offset of each partition of the
// completions topic, by partition number.
func (t *Tailer) completionEnds(ctx context.Context) ([]int64, error) {
	topic := t.topics.Completions()
	ends, err := t.adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("list end offsets of %s: %w", topic, err)
	}
	var out []int64
	for p, o := range ends[topic] {
		if o.Err != nil {
			return nil, fmt.Errorf("end offset of %s/%d: %w", topic, p, o.Err)
		}
		for int(p) >= len(out) {
			out = append(out, 0)
		}
		out[p] = o.Offset
	}
	return out, nil
}

// releaseEvery is how often the completions of bootstraps holding
// snapshots are counted.
const releaseEvery = 2 * time.Second

// releaseSnapshots counts the completions written since the last count
// for the bootstraps holding snapshots and deletes the snapshots of those
// whose copy tasks have all completed, committing the counts, the read
// offsets and what is left in one checkpoint. A deletion that fails is
// tried again at the next count.
func (t *Tailer) releaseSnapshots(ctx context.Context) error {
	if len(t.releases) == 0 || t.cfg.DirSnapshots == nil || time.Since(t.lastRelease) < releaseEvery {
		return nil
	}
	t.lastRelease = time.Now()
	st := t.state()
	ends, err := t.completionEnds(ctx)
	if err != nil {
		t.log.Warn("cannot count the completions of bootstraps holding HDFS snapshots; trying again", "err", err)
		return nil
	}
	from := slices.Clone(st.compOffs)
	for len(from) < len(ends) {
		from = append(from, 0) // (partitions added since)
	}
	counted := false
	if err := t.eachCompletionKey(ctx, from, ends, func(key string) {
		for i := range st.releases {
			if strings.HasPrefix(key, st.releases[i].BootstrapID+"-s") {
				st.releases[i].Completed++
				counted = true
			}
		}
	}); err != nil {
		t.log.Warn("cannot count the completions of bootstraps holding HDFS snapshots; trying again", "err", err)
		return nil
	}
	moved := !slices.Equal(from, st.compOffs)
	st.compOffs = ends
	var keep []schemas.SnapshotRelease
	for _, r := range st.releases {
		if r.Tasks < 0 || r.Completed < r.Tasks || !t.deleteSnapshots(ctx, r) {
			keep = append(keep, r)
		}
	}
	released := len(keep) < len(st.releases)
	st.releases = keep
	if len(keep) == 0 {
		st.compOffs = nil
	}
	t.m.snapshotsHeld.Set(float64(heldSnapshots(st.releases)))
	if !counted && !released && !moved {
		return nil
	}
	return t.commit(ctx, nil, st, schemas.StateRunning)
}

// heldSnapshots counts the snapshots releases hold.
func heldSnapshots(rs []schemas.SnapshotRelease) int {
	n := 0
	for _, r := range rs {
		n += len(r.HDFSSnapshots)
	}
	return n
}

// deleteSnapshots deletes a release's snapshots and reports whether all
// are gone.
func (t *Tailer) deleteSnapshots(ctx context.Context, r schemas.SnapshotRelease) bool {
	ok := true
	for _, s := range r.HDFSSnapshots {
		sn, err := parseSnap(s)
		if err != nil {
			continue
		}
		if err := t.cfg.DirSnapshots.DeleteSnapshot(ctx, sn.dir.String(), sn.name); err != nil {
			t.log.Warn("cannot release a bootstrap's HDFS snapshot; trying again", "snapshot", s, "bootstrap_id", r.BootstrapID, "err", err)
			ok = false
			continue
		}
		t.m.snapshotsReleased.Inc()
	}
	if ok {
		t.log.Info("bootstrap: every copy task done; HDFS snapshots released", "bootstrap_id", r.BootstrapID,
			"snapshots", r.HDFSSnapshots, "tasks", r.Tasks)
	}
	return ok
}

// eachCompletionKey calls fn with the key (the task ID) of every
// committed completion in [from[p], ends[p]) of each partition p of the
// completions topic. The ends are last stable offsets, so the read knows
// it is done at each partition's end-1 (control records kept, as
// kafka.ReadCommitted does); nothing is held but the current fetch.
func (t *Tailer) eachCompletionKey(ctx context.Context, from, ends []int64, fn func(key string)) error {
	topic := t.topics.Completions()
	parts := map[int32]kgo.Offset{}
	reached := map[int32]int64{}
	for p, end := range ends {
		if from[p] < end {
			parts[int32(p)] = kgo.NewOffset().At(from[p])
			reached[int32(p)] = from[p] - 1
		}
	}
	if len(parts) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(append(t.consumeOpts(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords())...)
	if err != nil {
		return err
	}
	defer cl.Close()
	for len(reached) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fs.Err(); err != nil {
			return fmt.Errorf("read %s: %w", topic, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			end := ends[r.Partition]
			if !r.Attrs.IsControl() && r.Offset < end {
				fn(string(r.Key))
			}
			if r.Offset >= end-1 {
				delete(reached, r.Partition)
			}
		})
	}
	return nil
}

// sweepSnapshots deletes, at start, the snapshots of this source's prefix
// that no bootstrap or release of the checkpoint names: those of a
// bootstrap a lost or fresh checkpoint no longer knows. Failures are
// logged; the tailer goes on.
func (t *Tailer) sweepSnapshots(ctx context.Context) {
	ds := t.cfg.DirSnapshots
	if ds == nil {
		return
	}
	known := map[string]bool{}
	for _, b := range t.boots {
		for _, s := range b.HDFSSnapshots {
			known[s] = true
		}
	}
	for _, r := range t.releases {
		for _, s := range r.HDFSSnapshots {
			known[s] = true
		}
	}
	prefix := snapshotPrefix(t.conf.Source.Name)
	seen := map[string]bool{}
	for _, root := range t.conf.Replication.SourceRoots {
		dirs, err := ds.SnapshottableDirs(ctx, root)
		if err != nil {
			if !errors.Is(err, fs.ErrNoSnapshots) && !errors.Is(err, fs.ErrNoStore) {
				t.log.Warn("cannot look for bootstrap snapshots to release under a source root", "root", root, "err", err)
			}
			continue
		}
		for _, dir := range dirs {
			if seen[dir] {
				continue
			}
			seen[dir] = true
			names, err := ds.SnapshotNames(ctx, dir)
			if err != nil {
				t.log.Warn("cannot list the snapshots of a directory", "dir", dir, "err", err)
				continue
			}
			for _, n := range names {
				l, err := location.Parse(dir)
				if err != nil || !strings.HasPrefix(n, prefix) {
					continue
				}
				s := hdfsSnap{dir: l, name: n}.String()
				if known[s] {
					continue
				}
				if err := ds.DeleteSnapshot(ctx, dir, n); err != nil {
					t.log.Warn("cannot release the HDFS snapshot of a bootstrap the checkpoint does not know", "snapshot", s, "err", err)
					continue
				}
				t.m.snapshotsReleased.Inc()
				t.log.Warn("released the HDFS snapshot of a bootstrap the checkpoint does not know (killed, or its tailer state lost)", "snapshot", s)
			}
		}
	}
	t.m.snapshotsHeld.Set(float64(heldSnapshots(t.releases)))
}
