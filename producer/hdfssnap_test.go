package producer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/hmslog"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/internal/location"
	"github.com/hivedr/hivedr/schemas"
)

// memDirSnaps is an HDFS cluster's snapshots in memory (DirSnapshots).
type memDirSnaps struct {
	mu      sync.Mutex
	dirs    []string            // snapshottable, canonical
	snaps   map[string][]string // dir -> snapshot names
	created []string            // dir/.snapshot/name, in order
	deleted []string
}

func newMemDirSnaps(dirs ...string) *memDirSnaps {
	m := &memDirSnaps{snaps: map[string][]string{}}
	for _, d := range dirs {
		l, err := location.Parse(d)
		if err != nil {
			panic(err)
		}
		m.dirs = append(m.dirs, l.String())
	}
	return m
}

func (m *memDirSnaps) SnapshottableDirs(_ context.Context, root string) ([]string, error) {
	r, err := location.Parse(root)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, d := range m.dirs {
		if l, _ := location.Parse(d); l.Within(r) {
			out = append(out, d)
		}
	}
	return out, nil
}

func (m *memDirSnaps) canon(dir string) string {
	l, err := location.Parse(dir)
	if err != nil {
		panic(err)
	}
	return l.String()
}

func (m *memDirSnaps) CreateSnapshot(_ context.Context, dir, name string) error {
	dir = m.canon(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	if !slices.Contains(m.dirs, dir) {
		return fmt.Errorf("%s is not snapshottable", dir)
	}
	if slices.Contains(m.snaps[dir], name) {
		return fmt.Errorf("snapshot %s of %s exists", name, dir)
	}
	m.snaps[dir] = append(m.snaps[dir], name)
	m.created = append(m.created, dir+"/.snapshot/"+name)
	return nil
}

func (m *memDirSnaps) DeleteSnapshot(_ context.Context, dir, name string) error {
	dir = m.canon(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	if i := slices.Index(m.snaps[dir], name); i >= 0 {
		m.snaps[dir] = slices.Delete(m.snaps[dir], i, i+1)
		m.deleted = append(m.deleted, dir+"/.snapshot/"+name)
	}
	return nil
}

func (m *memDirSnaps) SnapshotNames(_ context.Context, dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.snaps[m.canon(dir)]), nil
}

func (m *memDirSnaps) held(dir string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.snaps[m.canon(dir)])
}

// tasks returns the committed copy tasks of the manifests topic.
func (f *bootFixture) tasks(t *testing.T) []schemas.CopyTask {
	t.Helper()
	topic := kafka.Topics{Prefix: f.conf.Kafka.TopicPrefix}.Manifests()
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.conf.Kafka.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []schemas.CopyTask
	for p := range int32(f.conf.Kafka.ManifestPartitions) {
		end, err := kafka.CommittedEnd(context.Background(), cl, topic, p)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := kafka.ReadCommitted(context.Background(), []kgo.Opt{kgo.SeedBrokers(f.conf.Kafka.Brokers...)}, topic, p, 0, end)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			v, err := f.serde.Decode(context.Background(), r.Value)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, *v.(*schemas.CopyTask))
		}
	}
	return out
}

// complete writes a completion (keyed by task ID, as copyd writes them)
// for each task.
func (f *bootFixture) complete(t *testing.T, tasks ...schemas.CopyTask) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.conf.Kafka.Brokers...), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	topic := kafka.Topics{Prefix: f.conf.Kafka.TopicPrefix}.Completions()
	for _, task := range tasks {
		v, err := f.serde.Encode(&schemas.CopyCompletion{TaskID: task.TaskID, Status: schemas.StatusCopied, SourceURI: task.SourceURI, TargetURI: task.TargetURI})
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Key: []byte(task.TaskID), Value: v}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBootstrapHDFSSnapshots: the database's directory is snapshottable,
// so the bootstrap snapshots it at the cut; the records of tables not
// changed since list and copy their files from the snapshot (the record
// keeps the live names), a table changed after the snapshot (e, altered)
// is read live; the snapshot is released only once every copy task of
// the bootstrap has completed. At start the tailer released a snapshot
// of its own prefix its checkpoint did not know, and left another
// source's.
func TestBootstrapHDFSSnapshots(t *testing.T) {
	f := newBootFixture(t)
	dbDir := "hdfs://src/warehouse/sales.db"
	ds := newMemDirSnaps(dbDir, "hdfs://src/elsewhere")
	f.dirSnaps = ds
	orphan, foreign := snapshotPrefix(f.conf.Source.Name)+"sales-0-1", "hivedr-bootstrap.other.sales-0-1"
	ds.snaps[ds.canon(dbDir)] = []string{orphan, foreign}
	f.snaps.addTable(thriftTable("sales", "a"), 0)
	f.snaps.addTable(thriftTable("sales", "d", "ds"), 12)
	f.snaps.addTable(thriftTable("sales", "e"), 0)
	f.src.add("sales", schemas.EventCreateDatabase)
	tl := f.tailer(t)
	if got := ds.held(dbDir); !slices.Equal(got, []string{foreign}) {
		t.Fatalf("snapshots of %s after the start's sweep: %v, want only another source's", dbDir, got)
	}
	f.request(t, schemas.BootstrapRequest{RequestID: "r1"})
	if err := drive(t, tl, func() bool { return len(tl.boots) == 1 && tl.boots[0].SnapshotEventID > 0 }); err != nil {
		t.Fatal(err)
	}
	b := tl.boots[0]
	name := snapshotPrefix(f.conf.Source.Name) + b.BootstrapID
	snapRoot := ds.canon(dbDir) + "/.snapshot/" + name
	if !slices.Equal(b.HDFSSnapshots, []string{snapRoot}) || !slices.Equal(ds.held(dbDir), []string{foreign, name}) {
		t.Fatalf("bootstrap's snapshots %v, held %v; want %s", b.HDFSSnapshots, ds.held(dbDir), snapRoot)
	}
	if len(tl.releases) != 1 || tl.releases[0].Tasks != -1 || len(tl.compOffs) != int(f.conf.Kafka.ManifestPartitions) {
		t.Fatalf("releases %+v, completions offsets %v", tl.releases, tl.compOffs)
	}
	// e changes after the snapshot (an ALTER_TABLE of it).
	e := f.snaps.tables["sales.e"]
	e2 := *e
	e2.Parameters = map[string]string{"k": "v"}
	f.src.addRaw(hmslog.RawEvent{EventType: schemas.EventAlterTable, Database: "sales", Table: "e", Message: renameMsg(t, e, &e2)})
	if err := drive(t, tl, func() bool { return len(tl.boots) == 0 }); err != nil {
		t.Fatal(err)
	}
	tasks := f.tasks(t)
	if len(tasks) != 14 {
		t.Fatalf("%d copy tasks, want 14 (a, d's 12 partitions, e)", len(tasks))
	}
	for _, task := range tasks {
		inSnap := strings.HasPrefix(task.SourceURI, snapRoot+"/")
		if isE := task.Table == "e"; inSnap == isE {
			t.Errorf("task %s of %s reads %s: want the snapshot for a and d, the live tree for e (changed after the snapshot)", task.TaskID, task.Table, task.SourceURI)
		}
		if strings.Contains(task.TargetURI, ".snapshot") {
			t.Errorf("task %s writes %s", task.TaskID, task.TargetURI)
		}
	}
	for _, r := range f.topic(t, "sales") {
		for _, file := range r.ev.Files {
			if strings.Contains(file.URI, ".snapshot") {
				t.Errorf("record %s lists %s; want the live name", r.key, file.URI)
			}
		}
	}
	if len(tl.releases) != 1 || tl.releases[0].Tasks != 14 {
		t.Fatalf("releases %+v, want one of 14 tasks", tl.releases)
	}

	// Every task but one completed: the snapshot is held.
	ctx := context.Background()
	f.complete(t, tasks[1:]...)
	tl.lastRelease = time.Time{}
	if err := tl.releaseSnapshots(ctx); err != nil {
		t.Fatal(err)
	}
	if r := tl.releases; len(r) != 1 || r[0].Completed != 13 || !slices.Contains(ds.held(dbDir), name) {
		t.Fatalf("releases %+v, held %v: want 13 completions counted and the snapshot held", r, ds.held(dbDir))
	}
	// The count survives a restart.
	tl = f.tailer(t)
	if r := tl.releases; len(r) != 1 || r[0].Completed != 13 {
		t.Fatalf("restarted with releases %+v", r)
	}
	f.complete(t, tasks[0])
	tl.lastRelease = time.Time{}
	if err := tl.releaseSnapshots(ctx); err != nil {
		t.Fatal(err)
	}
	if len(tl.releases) != 0 || tl.compOffs != nil || !slices.Equal(ds.held(dbDir), []string{foreign}) {
		t.Fatalf("after the last completion: releases %+v, offsets %v, held %v", tl.releases, tl.compOffs, ds.held(dbDir))
	}
	if want := []string{ds.canon(dbDir) + "/.snapshot/" + orphan, snapRoot}; !slices.Equal(ds.deleted, want) {
		t.Errorf("deleted %v, want the orphan at start and the bootstrap's after its copies", ds.deleted)
	}
	if v := testutil.ToFloat64(tl.m.snapshotsReleased); v != 1 {
		t.Errorf("the restarted tailer released %v snapshots, want 1", v)
	}
	if cps := f.checkpoints(t); len(cps[len(cps)-1].SnapshotReleases) != 0 {
		t.Errorf("the last checkpoint still holds releases %+v", cps[len(cps)-1].SnapshotReleases)
	}
}

// TestBootstrapHDFSSnapshotsCrash: a tailer that stops after committing
// the plan of its snapshots (one of them already created) is replaced:
// the new one does not sweep the planned snapshot, takes it again and
// finishes the bootstrap reading from it.
func TestBootstrapHDFSSnapshotsCrash(t *testing.T) {
	f := newBootFixture(t)
	dbDir := "hdfs://src/warehouse/sales.db"
	ds := newMemDirSnaps(dbDir)
	f.dirSnaps = ds
	f.snaps.addTable(thriftTable("sales", "a"), 0)
	f.src.add("sales", schemas.EventCreateDatabase)
	tl := f.tailer(t)
	f.request(t, schemas.BootstrapRequest{RequestID: "r1"})
	if err := drive(t, tl, func() bool { return len(tl.boots) == 1 && len(tl.boots[0].HDFSSnapshots) > 0 }); err != nil {
		t.Fatal(err)
	}
	b := tl.boots[0]
	if b.SnapshotEventID != 0 || b.Seq != 0 {
		t.Fatalf("after the plan's commit: %+v", b)
	}
	name := snapshotPrefix(f.conf.Source.Name) + b.BootstrapID
	// The crash: the snapshot created, its taking not committed.
	if err := ds.CreateSnapshot(context.Background(), dbDir, name); err != nil {
		t.Fatal(err)
	}
	tl = f.tailer(t)
	if got := ds.held(dbDir); !slices.Equal(got, []string{name}) {
		t.Fatalf("the restart swept the planned snapshot: held %v", got)
	}
	if err := drive(t, tl, func() bool { return len(tl.boots) == 0 }); err != nil {
		t.Fatal(err)
	}
	tasks := f.tasks(t)
	if len(tasks) != 1 || !strings.Contains(tasks[0].SourceURI, "/.snapshot/"+name+"/") {
		t.Fatalf("tasks %+v, want a's file read from the snapshot", tasks)
	}
	if got := ds.held(dbDir); !slices.Equal(got, []string{name}) {
		t.Errorf("held %v", got)
	}
}

func TestSnapshotNames(t *testing.T) {
	for src, want := range map[string]string{"primary": "hivedr-bootstrap.primary.", "dc-1/hms.a": "hivedr-bootstrap.dc-1_hms_a."} {
		if got := snapshotPrefix(src); got != want {
			t.Errorf("prefix of %q: %q, want %q", src, got, want)
		}
	}
	s, err := parseSnap("hdfs://nn:8020/warehouse/sales.db/.snapshot/hivedr-bootstrap.primary.sales-1-2")
	if err != nil || s.dir.String() != "hdfs://nn:8020/warehouse/sales.db" || s.name != "hivedr-bootstrap.primary.sales-1-2" {
		t.Fatalf("%+v %v", s, err)
	}
	live, _ := location.Parse("hdfs://nn:8020/warehouse/sales.db/t/ds=1/000000_0")
	in, ok := s.inSnapshot(live)
	if !ok || in.String() != "hdfs://nn:8020/warehouse/sales.db/.snapshot/hivedr-bootstrap.primary.sales-1-2/t/ds=1/000000_0" {
		t.Fatalf("in the snapshot: %s %v", in, ok)
	}
	if back, ok := s.live(in); !ok || back != live {
		t.Errorf("back: %s %v", back, ok)
	}
	for _, bad := range []string{"hdfs://nn/warehouse/x", "hdfs://nn/.snapshot/"} {
		if _, err := parseSnap(bad); err == nil {
			t.Errorf("%s parsed", bad)
		}
	}
}

// policyWith returns f's replication policy with databases dbs.
func policyWith(t *testing.T, f *bootFixture, dbs ...config.DatabasePolicy) config.Replication {
	t.Helper()
	r := f.conf.Replication
	r.Databases = dbs
	r.EnsureDefaults()
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestApplyScope: a database the scope gains while the tailer runs is
// bootstrapped at once with policy bootstrap: auto, before any event of
// it is published; one that comes back into the scope (its topic has
// records) gets a discontinuity marker chained to its last record, so
// the applier halts it needs_bootstrap instead of going on over the
// events it missed.
func TestApplyScope(t *testing.T) {
	ctx := context.Background()
	// salesOnly: a tailer at its first checkpoint (sales created) with
	// sales in its scope, and hr's table people on the source.
	salesOnly := func(t *testing.T) (*bootFixture, *Tailer) {
		t.Helper()
		f := newBootFixture(t)
		f.snaps.addTable(thriftTable("hr", "people"), 0)
		f.src.add("sales", schemas.EventCreateDatabase)
		tl := f.tailer(t)
		if err := drive(t, tl, func() bool { return tl.checkpoint == 1 }); err != nil {
			t.Fatal(err)
		}
		return f, tl
	}
	t.Run("new database, auto", func(t *testing.T) {
		f, tl := salesOnly(t)
		if err := applyScope(t, tl, policyWith(t, f, config.DatabasePolicy{Name: "sales"}, config.DatabasePolicy{Name: "hr", Bootstrap: config.BootstrapAuto})); err != nil {
			t.Fatal(err)
		}
		if b := tl.boots; len(b) != 1 || b[0].Database != "hr" || b[0].Reason != ReasonNewDatabase || b[0].CutEventID != 1 {
			t.Fatalf("bootstraps after hr entered the scope: %+v", b)
		}
		f.src.add("hr", schemas.EventCreateDatabase) // waits for the bootstrap's catch-up
		if err := drive(t, tl, func() bool { return len(tl.boots) == 0 && tl.checkpoint == 2 }); err != nil {
			t.Fatal(err)
		}
		if got := describe(f.topic(t, "hr")); got != "B T:people E 2" {
			t.Errorf("hr topic: %s", got)
		}
	})
	t.Run("new database, auto, after a failed change", func(t *testing.T) {
		f, tl := salesOnly(t)
		rep := policyWith(t, f, config.DatabasePolicy{Name: "sales"}, config.DatabasePolicy{Name: "hr", Bootstrap: config.BootstrapAuto})
		// The change's commit gets no answer, nor the abort right after
		// it (the next try aborts first, and goes through).
		var mu sync.Mutex
		failed := 0
		f.cluster.ControlKey(int16(kmsg.EndTxn), func(kmsg.Request) (kmsg.Response, error, bool) {
			mu.Lock()
			defer mu.Unlock()
			if failed == 2 {
				return nil, nil, false
			}
			f.cluster.KeepControl()
			failed++
			return nil, errors.New("kafka went away"), true
		})
		if err := tl.applyScope(ctx, rep); err == nil {
			t.Fatal("the scope change went through with its commit unanswered")
		}
		if slices.Contains(tl.inScope, "hr") || len(tl.boots) != 0 {
			t.Fatalf("a failed change moved the scope: in scope %v, bootstraps %+v", tl.inScope, tl.boots)
		}
		// Applied again (as Run does each round, on the state rebuilt
		// from the checkpoint): hr is still added.
		if tl.rebuild {
			if err := tl.restart(ctx, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := applyScope(t, tl, rep); err != nil {
			t.Fatal(err)
		}
		if b := tl.boots; len(b) != 1 || b[0].Database != "hr" || b[0].Reason != ReasonNewDatabase {
			t.Fatalf("bootstraps after the change applied again: %+v", b)
		}
	})
	t.Run("back in the scope", func(t *testing.T) {
		f := newBootFixture(t)
		f.conf.Replication = policyWith(t, f, config.DatabasePolicy{Name: "sales"}, config.DatabasePolicy{Name: "hr"})
		f.src.add("hr", schemas.EventCreateDatabase)
		tl := f.tailer(t)
		if err := drive(t, tl, func() bool { return tl.checkpoint == 1 }); err != nil {
			t.Fatal(err)
		}
		if err := applyScope(t, tl, policyWith(t, f, config.DatabasePolicy{Name: "sales"})); err != nil {
			t.Fatal(err)
		}
		f.src.add("hr", schemas.EventCreateDatabase) // not published: out of the scope
		if err := drive(t, tl, func() bool { return tl.checkpoint == 2 }); err != nil {
			t.Fatal(err)
		}
		if err := applyScope(t, tl, policyWith(t, f, config.DatabasePolicy{Name: "sales"}, config.DatabasePolicy{Name: "hr"})); err != nil {
			t.Fatal(err)
		}
		recs := f.topic(t, "hr")
		if len(recs) != 2 {
			t.Fatalf("hr topic: %s", describe(recs))
		}
		m := recs[1].ev
		if m.EventType != schemas.EventDiscontinuity || m.EventID != 2 || m.PreviousEventID == nil || *m.PreviousEventID != 1 {
			t.Errorf("hr's record after it came back: %s %d previous %v; want a discontinuity at 2 after 1", m.EventType, m.EventID, m.PreviousEventID)
		}
		if len(tl.boots) != 0 {
			t.Errorf("a manual database was bootstrapped: %+v", tl.boots)
		}
	})
}

// applyScope applies a scope change as Run does: a change refused (kfake
// refuses a commit OUT_OF_ORDER_SEQUENCE_NUMBER now and then, see drive)
// is applied again, at most 3 times.
func applyScope(t *testing.T, tl *Tailer, rep config.Replication) error {
	t.Helper()
	for retries := 0; ; retries++ {
		err := tl.applyScope(context.Background(), rep)
		if !errors.Is(err, kerr.OutOfOrderSequenceNumber) || retries >= 3 {
			return err
		}
		t.Logf("scope change refused by kfake (%v): applied again, as Run does", err)
	}
}
