package producer

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/internal/acid"
	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/schemas"
)

// acidSnaps is memSnaps that also reads transactional tables' write-ID
// states (WriteIDSource), counting the reads.
type acidSnaps struct {
	*memSnaps
	mu     sync.Mutex
	txns   acid.Txns
	states map[string]acid.WriteIDs // db.table
	reads  map[string]int
}

func (s *acidSnaps) TableWriteIDs(_ context.Context, db, table string) (acid.Txns, acid.WriteIDs, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := db + "." + table
	s.reads[k]++
	w, ok := s.states[k]
	if !ok {
		return acid.Txns{}, acid.WriteIDs{}, fmt.Errorf("no write-ID state for %s", k)
	}
	return s.txns, w, nil
}

func (s *acidSnaps) set(table string, w acid.WriteIDs) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.states[table] = w
}

func (s *acidSnaps) readsOf(table string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads[table]
}

// fileLister lists the files it holds under a directory, with size 10.
type fileLister []string

func (l fileLister) Walk(_ context.Context, dir string, fn func(string, int64) error) error {
	for _, f := range l {
		if strings.HasPrefix(f, dir+"/") {
			if err := fn(f, 10); err != nil {
				return err
			}
		}
	}
	return nil
}

// acidTable is a transactional table of the fixture's source.
func acidThriftTable(db, name string, partKeys ...string) *hive_metastore.Table {
	tb := thriftTable(db, name, partKeys...)
	tb.Parameters["transactional"] = "true"
	return tb
}

// acidFixture is a bootFixture whose source has transactional tables.
type acidFixture struct {
	*bootFixture
	acid  *acidSnaps
	files fileLister
	clock time.Time
}

func newAcidFixture(t *testing.T) *acidFixture {
	f := &acidFixture{bootFixture: newBootFixture(t), clock: time.Unix(1_800_000_000, 0)}
	f.acid = &acidSnaps{memSnaps: f.snaps, states: map[string]acid.WriteIDs{}, reads: map[string]int{}, txns: acid.Txns{HighWaterMark: 1000}}
	return f
}

// tailer starts a tailer reading f's source and files, on f's clock.
func (f *acidFixture) tailer(t *testing.T) *Tailer {
	t.Helper()
	tl, err := New(withConf(f.conf, Config{Source: f.src, Codec: f.serde, Snapshots: f.acid, Lister: f.files,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	if err != nil {
		t.Fatal(err)
	}
	tl.acidState().now = func() time.Time { return f.clock }
	if err := tl.start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return tl
}

// recordOf returns the TABLE record of table on the topic, or nil.
func recordOf(recs []topicRec, typ schemas.EventType, table string) []*schemas.Event {
	var out []*schemas.Event
	for _, r := range recs {
		if r.ev != nil && r.ev.EventType == typ && r.ev.Table == table {
			out = append(out, r.ev)
		}
	}
	return out
}

// fileNames are the files of an event, below dir.
func fileNames(ev *schemas.Event, dir string) []string {
	var out []string
	for _, f := range ev.Files {
		out = append(out, strings.TrimPrefix(f.URI, dir+"/"))
	}
	slices.Sort(out)
	return out
}

// TestBootstrapACIDVisibleFiles: a transactional table's record carries
// its write-ID state, and the files of the table and of each partition
// are those a reader with that state reads: valid deltas, never an
// aborted one, one above the high-water mark, or a compactor's base whose
// transaction had not committed; files outside ACID directories as for
// any table. A table that is not transactional keeps all its files and
// carries no state.
func TestBootstrapACIDVisibleFiles(t *testing.T) {
	f := newAcidFixture(t)
	orders := "hdfs://src/warehouse/sales.db/orders"
	events := "hdfs://src/warehouse/sales.db/events"
	plain := "hdfs://src/warehouse/sales.db/plain"
	f.files = fileLister{
		orders + "/000000_0",
		orders + "/delta_0000001_0000001_0000/bucket_00000",
		orders + "/delta_0000002_0000002_0000/bucket_00000",
		orders + "/delta_0000003_0000003_0000/bucket_00000",
		orders + "/delta_0000003_0000003_0000/bucket_00001",
		orders + "/base_0000003_v0000099/bucket_00000",
		orders + "/delta_0000004_0000004_0000/bucket_00000",
		orders + "/HIVE_UNION_SUBDIR_1/000000_0",
		events + "/ds=001/delta_0000001_0000001_0000/000000_0",
		events + "/ds=001/delta_0000002_0000002_0000/000000_0",
		events + "/ds=002/delta_0000001_0000001_0000/000000_0",
		events + "/ds=002/delta_0000002_0000002_0000/000000_0",
		events + "/ds=002/base_0000003/000000_0",
		plain + "/delta_0000002_0000002_0000/000000_0",
	}
	f.snaps.addTable(acidThriftTable("sales", "orders"), 0)
	f.snaps.addTable(acidThriftTable("sales", "events", "ds"), 2)
	f.snaps.addTable(thriftTable("sales", "plain"), 0)
	f.acid.txns = acid.Txns{HighWaterMark: 120, Invalid: []int64{99}}
	f.acid.set("sales.orders", acid.WriteIDs{HighWaterMark: 3, Aborted: []int64{2}})
	f.acid.set("sales.events", acid.WriteIDs{HighWaterMark: 3, Aborted: []int64{2}})
	f.src.add("sales", schemas.EventCreateDatabase)
	tl := f.tailer(t)
	f.request(t, schemas.BootstrapRequest{RequestID: "r1"})
	if err := drive(t, tl, func() bool { return tl.checkpoint == 1 && len(tl.boots) == 0 && f.acid.readsOf("sales.orders") > 0 }); err != nil {
		t.Fatal(err)
	}
	recs := f.topic(t, "sales")
	checkSnapshot(t, recs, 1, 3, 2)
	if got := describe(recs); got != "1 B T:events P:events*2 T:orders T:plain E" {
		t.Fatalf("sales topic: %s", got)
	}
	o := recordOf(recs, schemas.EventSnapshotTable, "orders")[0]
	if w := o.Snapshot.WriteIDs; w == nil || w.HighWaterMark != 3 || fmt.Sprint(w.Aborted) != "[2]" || len(w.Open) != 0 {
		t.Errorf("orders' write ids %+v, want hwm 3, aborted [2]", w)
	}
	if got, want := fileNames(o, orders), []string{"000000_0", "HIVE_UNION_SUBDIR_1/000000_0", "delta_0000001_0000001_0000/bucket_00000",
		"delta_0000003_0000003_0000/bucket_00000", "delta_0000003_0000003_0000/bucket_00001"}; !slices.Equal(got, want) {
		t.Errorf("orders' files %v\nwant %v", got, want)
	}
	if e := recordOf(recs, schemas.EventSnapshotTable, "events")[0]; e.Snapshot.WriteIDs == nil || e.Snapshot.WriteIDs.HighWaterMark != 3 {
		t.Errorf("events' write ids %+v", e.Snapshot.WriteIDs)
	}
	parts := recordOf(recs, schemas.EventSnapshotPartition, "events")
	if got := fmt.Sprint(fileNames(parts[0], events+"/ds=001"), fileNames(parts[1], events+"/ds=002")); got !=
		"[delta_0000001_0000001_0000/000000_0] [base_0000003/000000_0]" {
		t.Errorf("events' partitions' files: %s", got)
	}
	for _, p := range parts {
		if p.Snapshot.WriteIDs != nil {
			t.Errorf("partition record with write ids %+v", p.Snapshot.WriteIDs)
		}
	}
	p := recordOf(recs, schemas.EventSnapshotTable, "plain")[0]
	if p.Snapshot.WriteIDs != nil || len(p.Files) != 1 {
		t.Errorf("plain table: write ids %+v, files %v", p.Snapshot.WriteIDs, p.Files)
	}
	if end := recordOf(recs, schemas.EventSnapshotEnd, "")[0]; end.Snapshot.ByteCount != 10*int64(5+2+1) {
		t.Errorf("END's bytes %d, want those of the 8 files copied", end.Snapshot.ByteCount)
	}
}

// TestBootstrapACIDWaitsForOpenWriteIDs: a transactional table whose
// write IDs are open waits, read again at most once a second, while the
// other tables are published; the pages that only find it waiting commit
// nothing; the END waits for it; once none is open it is published with
// the state then, its newly committed delta among its files.
func TestBootstrapACIDWaitsForOpenWriteIDs(t *testing.T) {
	f := newAcidFixture(t)
	f.conf.Tailer.BootstrapOpenTxnWait = config.Duration{Duration: time.Hour}
	b := "hdfs://src/warehouse/sales.db/b"
	f.files = fileLister{b + "/delta_0000003_0000003_0000/000000_0", b + "/delta_0000004_0000004_0000/000000_0"}
	f.snaps.addTable(thriftTable("sales", "a"), 0)
	f.snaps.addTable(acidThriftTable("sales", "b"), 0)
	f.snaps.addTable(thriftTable("sales", "c"), 0)
	f.acid.set("sales.b", acid.WriteIDs{HighWaterMark: 4, Open: []int64{4}})
	f.src.add("sales", schemas.EventCreateDatabase)
	tl := f.tailer(t)
	f.request(t, schemas.BootstrapRequest{RequestID: "r1"})
	if err := drive(t, tl, func() bool {
		return len(tl.boots) == 1 && published(&tl.boots[0], "a") && published(&tl.boots[0], "c")
	}); err != nil {
		t.Fatal(err)
	}
	if got := describe(f.topic(t, "sales")); got != "1 B T:a T:c" {
		t.Fatalf("sales topic while b waits: %s", got)
	}
	reads, cps := f.acid.readsOf("sales.b"), len(f.checkpoints(t))
	ctx := context.Background()
	step := func() {
		t.Helper()
		if published, err := tl.snapshotPage(ctx, "sales"); err != nil || published {
			t.Fatalf("a page with b waiting: published %v, %v", published, err)
		}
	}
	step()
	step()
	if got := f.acid.readsOf("sales.b"); got != reads {
		t.Errorf("b's state read %d times within a second of the last read", got-reads)
	}
	f.clock = f.clock.Add(time.Second)
	step()
	if got := f.acid.readsOf("sales.b"); got != reads+1 {
		t.Errorf("b's state read %d times a second later, want 1", got-reads)
	}
	if got := len(f.checkpoints(t)); got != cps {
		t.Errorf("%d checkpoints committed by pages that only found b waiting", got-cps)
	}
	// Its transaction commits.
	f.acid.set("sales.b", acid.WriteIDs{HighWaterMark: 4})
	f.clock = f.clock.Add(time.Second)
	if err := drive(t, tl, func() bool { return len(tl.boots) == 0 }); err != nil {
		t.Fatal(err)
	}
	recs := f.topic(t, "sales")
	if got := describe(recs); got != "1 B T:a T:c T:b E" {
		t.Fatalf("sales topic: %s", got)
	}
	checkSnapshot(t, recs, 1, 3, 0)
	rb := recordOf(recs, schemas.EventSnapshotTable, "b")[0]
	if w := rb.Snapshot.WriteIDs; w == nil || w.HighWaterMark != 4 || len(w.Open) != 0 || len(w.Aborted) != 0 {
		t.Errorf("b's write ids %+v", w)
	}
	if got := fileNames(rb, b); fmt.Sprint(got) != "[delta_0000003_0000003_0000/000000_0 delta_0000004_0000004_0000/000000_0]" {
		t.Errorf("b's files %v", got)
	}
	if len(tl.acid.views)+len(tl.acid.waits) != 0 {
		t.Errorf("the ended bootstrap's transactional tables still held: %+v %+v", tl.acid.views, tl.acid.waits)
	}
}

// TestBootstrapACIDWaitBound: past tailer.bootstrap_open_txn_wait the
// table is published with its open write IDs marked open, and their
// deltas are not copied.
func TestBootstrapACIDWaitBound(t *testing.T) {
	f := newAcidFixture(t)
	f.conf.Tailer.BootstrapOpenTxnWait = config.Duration{Duration: time.Minute}
	b := "hdfs://src/warehouse/sales.db/b"
	f.files = fileLister{b + "/delta_0000003_0000003_0000/000000_0", b + "/delta_0000004_0000004_0000/000000_0",
		b + "/delta_0000005_0000005_0000/000000_0"}
	f.snaps.addTable(acidThriftTable("sales", "b"), 0)
	f.acid.set("sales.b", acid.WriteIDs{HighWaterMark: 5, Open: []int64{4}, Aborted: []int64{5}})
	f.src.add("sales", schemas.EventCreateDatabase)
	tl := f.tailer(t)
	f.request(t, schemas.BootstrapRequest{RequestID: "r1"})
	if err := drive(t, tl, func() bool { return len(tl.boots) == 1 && f.acid.readsOf("sales.b") > 0 }); err != nil {
		t.Fatal(err)
	}
	for _, d := range []time.Duration{30 * time.Second, 29 * time.Second} {
		f.clock = f.clock.Add(d)
		if published, err := tl.snapshotPage(context.Background(), "sales"); err != nil || published {
			t.Fatalf("a page %s into the wait: published %v, %v", d, published, err)
		}
	}
	f.clock = f.clock.Add(time.Second)
	if err := drive(t, tl, func() bool { return len(tl.boots) == 0 }); err != nil {
		t.Fatal(err)
	}
	recs := f.topic(t, "sales")
	if got := describe(recs); got != "1 B T:b E" {
		t.Fatalf("sales topic: %s", got)
	}
	rb := recordOf(recs, schemas.EventSnapshotTable, "b")[0]
	if w := rb.Snapshot.WriteIDs; w == nil || w.HighWaterMark != 5 || fmt.Sprint(w.Open, w.Aborted) != "[4] [5]" {
		t.Errorf("b's write ids %+v, want hwm 5, open [4], aborted [5]", w)
	}
	if got := fileNames(rb, b); fmt.Sprint(got) != "[delta_0000003_0000003_0000/000000_0]" {
		t.Errorf("b's files %v", got)
	}
}

// TestBootstrapACIDRestartInPartitions: a tailer restarted inside a
// transactional table's partitions reads its state again for the rest.
func TestBootstrapACIDRestartInPartitions(t *testing.T) {
	f := newAcidFixture(t)
	f.conf.Tailer.BootstrapPage = 3
	ev := "hdfs://src/warehouse/sales.db/events"
	for i := 1; i <= 6; i++ {
		f.files = append(f.files, fmt.Sprintf("%s/ds=%03d/delta_0000001_0000001_0000/000000_0", ev, i),
			fmt.Sprintf("%s/ds=%03d/delta_0000002_0000002_0000/000000_0", ev, i))
	}
	f.snaps.addTable(acidThriftTable("sales", "events", "ds"), 6)
	f.acid.set("sales.events", acid.WriteIDs{HighWaterMark: 2, Aborted: []int64{2}})
	f.src.add("sales", schemas.EventCreateDatabase)
	tl := f.tailer(t)
	f.request(t, schemas.BootstrapRequest{RequestID: "r1"})
	if err := drive(t, tl, func() bool { return len(tl.boots) == 1 && tl.boots[0].DonePartition != "" }); err != nil {
		t.Fatal(err)
	}
	// Write 2 turns valid (its aborted transaction was cleaned); the new
	// tailer reads the state again for the partitions left.
	f.acid.set("sales.events", acid.WriteIDs{HighWaterMark: 2})
	tl2 := f.tailer(t)
	if err := drive(t, tl2, func() bool { return len(tl2.boots) == 0 }); err != nil {
		t.Fatal(err)
	}
	recs := f.topic(t, "sales")
	checkSnapshot(t, recs, 1, 1, 6)
	var counts []int
	for _, p := range recordOf(recs, schemas.EventSnapshotPartition, "events") {
		counts = append(counts, len(p.Files))
	}
	if fmt.Sprint(counts) != "[1 2 2 2 2 2]" {
		t.Errorf("files per partition %v: want the first page's (one partition) by the state published, the rest's by the state read again", counts)
	}
	if got := f.acid.readsOf("sales.events"); got != 2 {
		t.Errorf("events' state read %d times, want 2", got)
	}
}

// TestReadFromLiveForACID: a transactional table's files are listed from
// the live tree even when the bootstrap took HDFS snapshots.
func TestReadFromLiveForACID(t *testing.T) {
	tl := &Tailer{}
	pg := &snapPage{t: tl, b: &schemas.BootstrapState{BootstrapID: "b", SnapshotEventID: 5, HDFSSnapshots: []string{"hdfs://src/warehouse/.snapshot/x"}}}
	tb, err := TableFromThriftJSON(tjsonOf(t, acidThriftTable("sales", "orders")))
	if err != nil {
		t.Fatal(err)
	}
	from, err := pg.readFrom(context.Background(), tb, tb.Location, 9)
	if err != nil || from != nil {
		t.Errorf("readFrom a transactional table: %v, %v; want the live tree", from, err)
	}
}
