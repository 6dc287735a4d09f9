package producer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/beltran/gohive/hive_metastore"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/hmslog"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/schemas"
)

// tjsonOf serializes a Thrift object as the metastore's log does.
func tjsonOf(t testing.TB, v thrift.TStruct) string {
	t.Helper()
	ser := thrift.NewTSerializer()
	ser.Protocol = thrift.NewTJSONProtocolFactory().GetProtocol(ser.Transport)
	s, err := ser.WriteString(context.Background(), v)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func thriftTable(db, name string, partKeys ...string) *hive_metastore.Table {
	tb := &hive_metastore.Table{DbName: db, TableName: name, Owner: "etl", TableType: "MANAGED_TABLE",
		Sd: &hive_metastore.StorageDescriptor{Location: "hdfs://src/warehouse/" + db + ".db/" + name,
			Cols: []*hive_metastore.FieldSchema{{Name: "id", Type: "bigint"}}, SerdeInfo: &hive_metastore.SerDeInfo{}},
		Parameters: map[string]string{}}
	for _, k := range partKeys {
		tb.PartitionKeys = append(tb.PartitionKeys, &hive_metastore.FieldSchema{Name: k, Type: "string"})
	}
	return tb
}

// memSnaps is a source metastore in memory (Snapshots), counting reads.
type memSnaps struct {
	t      testing.TB
	mu     sync.Mutex
	dbs    map[string]bool
	tables map[string]*hive_metastore.Table // db.table
	parts  map[string][]string              // db.table -> partition values (key ds)
	reads  map[string]int                   // db.table -> Table calls
	// nameLists counts PartitionNames calls.
	nameLists int
	onRead    func(db, table string) // called inside each table or partition read
	// tear: the next Partitions calls (one per entry) answer the named
	// partition without values and then drop it, as a metastore does
	// whose drop commits between the queries of one read.
	tear []string
	// tearKeeps: a torn answer leaves the partition there.
	tearKeeps bool
}

func newMemSnaps(t testing.TB) *memSnaps {
	return &memSnaps{t: t, dbs: map[string]bool{}, tables: map[string]*hive_metastore.Table{}, parts: map[string][]string{}, reads: map[string]int{}}
}

func (s *memSnaps) addTable(tb *hive_metastore.Table, parts int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dbs[tb.DbName] = true
	k := tb.DbName + "." + tb.TableName
	s.tables[k] = tb
	for i := 1; i <= parts; i++ {
		s.parts[k] = append(s.parts[k], fmt.Sprintf("%03d", i))
	}
}

func (s *memSnaps) read(db, table string) {
	if s.onRead != nil {
		s.onRead(db, table)
	}
}

func (s *memSnaps) Database(_ context.Context, name string) (*schemas.Database, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.dbs[name] {
		return nil, fmt.Errorf("database %s: %w", name, ErrNoSuchObject)
	}
	return DatabaseFromThriftJSON(tjsonOf(s.t, &hive_metastore.Database{Name: name, LocationUri: "hdfs://src/warehouse/" + name + ".db",
		Parameters: map[string]string{"team": "x"}}))
}

func (s *memSnaps) Tables(_ context.Context, db string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k, tb := range s.tables {
		if strings.HasPrefix(k, db+".") {
			out = append(out, tb.TableName)
		}
	}
	return out, nil
}

func (s *memSnaps) Table(_ context.Context, db, name string) (*schemas.Table, error) {
	s.read(db, name)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads[db+"."+name]++
	tb := s.tables[db+"."+name]
	if tb == nil {
		return nil, fmt.Errorf("table %s.%s: %w", db, name, ErrNoSuchObject)
	}
	return TableFromThriftJSON(tjsonOf(s.t, tb))
}

func (s *memSnaps) PartitionNames(_ context.Context, db, table, after string, limit int) ([]string, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tables[db+"."+table] == nil {
		return nil, false, ErrNoSuchObject
	}
	s.nameLists++
	// (The metastore's order is its own: the page is the caller's.)
	page := hms.NewNamesAfter(after, limit)
	vals := s.parts[db+"."+table]
	for i := len(vals) - 1; i >= 0; i-- {
		page.Add("ds=" + vals[i])
	}
	names, more := page.Names()
	return names, more, nil
}

func (s *memSnaps) Partitions(_ context.Context, db, table string, names []string) ([]schemas.Partition, error) {
	s.read(db, table)
	s.mu.Lock()
	defer s.mu.Unlock()
	tb := s.tables[db+"."+table]
	var tear string
	if len(s.tear) > 0 {
		tear, s.tear = s.tear[0], s.tear[1:]
	}
	var out []schemas.Partition
	for _, n := range names {
		v := strings.TrimPrefix(n, "ds=")
		if !slices.Contains(s.parts[db+"."+table], v) {
			continue
		}
		values := []string{v}
		if n == tear {
			values = nil
			if !s.tearKeeps {
				s.parts[db+"."+table] = slices.DeleteFunc(s.parts[db+"."+table], func(x string) bool { return x == v })
			}
		}
		p, err := PartitionFromThriftJSON(tjsonOf(s.t, &hive_metastore.Partition{Values: values, DbName: db, TableName: table,
			Sd: &hive_metastore.StorageDescriptor{Location: tb.Sd.Location + "/" + n, SerdeInfo: &hive_metastore.SerDeInfo{}}}))
		if err != nil {
			return nil, err
		}
		out = append(out, *p)
	}
	return out, nil
}

// memLister lists one file under every directory.
type memLister struct{}

func (memLister) Walk(_ context.Context, dir string, fn func(string, int64) error) error {
	return fn(dir+"/000000_0", 10)
}

// bootFixture is a fixture with a source metastore and a tailer driven
// step by step.
type bootFixture struct {
	*fixture
	snaps *memSnaps
	// dirSnaps takes HDFS snapshots; nil: none.
	dirSnaps DirSnapshots
}

func newBootFixture(t *testing.T) *bootFixture {
	f := &bootFixture{fixture: newFixture(t), snaps: newMemSnaps(t)}
	f.conf.Tailer.BootstrapPage = 10
	f.conf.Replication.SourceRoots = []string{"hdfs://src/"}
	f.conf.Replication.PathMappings = []config.PathMapping{{Source: "hdfs://src/", Target: "hdfs://dr/"}}
	if err := f.conf.Validate(); err != nil {
		t.Fatal(err)
	}
	return f
}

// tailer starts a tailer (New and start) to drive with drive.
func (f *bootFixture) tailer(t *testing.T) *Tailer {
	t.Helper()
	tl, err := New(withConf(f.conf, Config{Source: f.src, Codec: f.serde, Snapshots: f.snaps, Lister: memLister{}, DirSnapshots: f.dirSnaps,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	if err != nil {
		t.Fatal(err)
	}
	if err := tl.start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return tl
}

// drive runs the tailer's steps (main, then bootstraps) until done or an
// error; every step reads the control topic. A step that kfake refuses
// OUT_OF_ORDER_SEQUENCE_NUMBER (it does, now and then, under -race: about
// 1 run in 80 of TestBootstrapCatchupResumes, before any change of the
// tailer's) is run again, at most 3 times, as Run runs again a step that
// failed (its transaction aborted, the tailer's state as of its
// checkpoint); what the topics then hold is checked as ever.
func drive(t *testing.T, tl *Tailer, done func() bool) error {
	t.Helper()
	_, err := driveRetries(t, tl, done)
	return err
}

// driveRetries is drive, also saying how many steps it ran again: a step
// run again reads its page from the metastore again.
func driveRetries(t *testing.T, tl *Tailer, done func() bool) (retries int, err error) {
	t.Helper()
	ctx := context.Background()
	again := func(err error) bool {
		if !errors.Is(err, kerr.OutOfOrderSequenceNumber) || retries >= 3 {
			return false
		}
		retries++
		t.Logf("step refused by kfake (%v): run again, as Run does", err)
		return true
	}
	for range 500 {
		if done() {
			return retries, nil
		}
		tl.lastReqPoll = time.Time{}
		if _, err := tl.step(ctx); err != nil {
			if again(err) {
				continue
			}
			return retries, err
		}
		if _, err := tl.bootstrapStep(ctx); err != nil {
			if again(err) {
				continue
			}
			return retries, err
		}
	}
	t.Fatalf("not done after 500 steps (checkpoint %d, bootstraps %+v)", tl.checkpoint, tl.boots)
	return retries, nil
}

// published gives sales a table a and n events, published by a tailer
// it returns.
func (f *bootFixture) published(t *testing.T, n int64) *Tailer {
	t.Helper()
	f.snaps.addTable(thriftTable("sales", "a"), 0)
	for range n {
		f.src.add("sales", schemas.EventCreateDatabase)
	}
	tl := f.tailer(t)
	if err := drive(t, tl, func() bool { return tl.checkpoint == n }); err != nil {
		t.Fatal(err)
	}
	return tl
}

func (f *bootFixture) request(t *testing.T, req schemas.BootstrapRequest) {
	t.Helper()
	if req.Source == "" {
		req.Source = f.conf.Source.Name
	}
	req.RequestedAt = time.Now().Truncate(time.Millisecond)
	v, err := f.serde.Encode(&req)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.conf.Kafka.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	topic := kafka.Topics{Prefix: f.conf.Kafka.TopicPrefix}.Control()
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Key: []byte(req.RequestID), Value: v}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// topicRec is one record of an events topic.
type topicRec struct {
	key string
	ev  *schemas.Event // nil for a heartbeat
}

func (f *bootFixture) topic(t *testing.T, db string) []topicRec {
	t.Helper()
	recs := f.read(t, kafka.Topics{Prefix: f.conf.Kafka.TopicPrefix}.Events(db))
	var out []topicRec
	for _, r := range recs {
		v, err := f.serde.Decode(context.Background(), r.Value)
		if err != nil {
			t.Fatal(err)
		}
		if ev, ok := v.(*schemas.Event); ok { // (heartbeats left out)
			out = append(out, topicRec{key: string(r.Key), ev: ev})
		}
	}
	return out
}

// read returns the committed records of partition 0 of topic.
func (f *fixture) read(t *testing.T, topic string) []*kgo.Record {
	t.Helper()
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.conf.Kafka.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	end, err := kafka.CommittedEnd(ctx, cl, topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := kafka.ReadCommitted(ctx, []kgo.Opt{kgo.SeedBrokers(f.conf.Kafka.Brokers...)}, topic, 0, 0, end)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// checkpoints are the committed checkpoints of the fixture's source.
func (f *bootFixture) checkpoints(t *testing.T) []*schemas.TailerCheckpoint {
	var out []*schemas.TailerCheckpoint
	for _, r := range f.read(t, kafka.Topics{Prefix: f.conf.Kafka.TopicPrefix}.Checkpoints()) {
		v, err := f.serde.Decode(context.Background(), r.Value)
		if err != nil {
			t.Fatal(err)
		}
		if cp := v.(*schemas.TailerCheckpoint); cp.Source == f.conf.Source.Name {
			out = append(out, cp)
		}
	}
	return out
}

// describe renders a topic as one token per record: event IDs, B/T/P/E
// for BEGIN, TABLE, PARTITION, END (with the table), D for a
// discontinuity; heartbeats are left out.
func describe(recs []topicRec) string {
	var out []string
	for _, r := range recs {
		switch {
		case r.ev == nil:
		case r.ev.EventType == schemas.EventSnapshotBegin:
			out = append(out, "B")
		case r.ev.EventType == schemas.EventSnapshotTable:
			out = append(out, "T:"+r.ev.Table)
		case r.ev.EventType == schemas.EventSnapshotPartition:
			out = append(out, "P:"+r.ev.Table)
		case r.ev.EventType == schemas.EventSnapshotEnd:
			out = append(out, "E")
		case r.ev.EventType == schemas.EventDiscontinuity:
			out = append(out, fmt.Sprintf("D%d", r.ev.EventID))
		default:
			out = append(out, strconv.FormatInt(r.ev.EventID, 10))
		}
	}
	// Runs of partitions of one table are folded: P:b*25.
	var folded []string
	for i := 0; i < len(out); {
		j := i
		for j < len(out) && out[j] == out[i] && strings.HasPrefix(out[i], "P:") {
			j++
		}
		if j-i > 1 {
			folded = append(folded, fmt.Sprintf("%s*%d", out[i], j-i))
			i = j
			continue
		}
		folded = append(folded, out[i])
		i++
	}
	return strings.Join(folded, " ")
}

// checkSnapshot checks a bootstrap's records on a topic: keys, event IDs
// at the cut, seq from 1 without holes, the END's counts, files' task IDs.
func checkSnapshot(t *testing.T, recs []topicRec, cut int64, tables, parts int64) *schemas.SnapshotInfo {
	t.Helper()
	var seq int64
	var end *schemas.SnapshotInfo
	var id string
	for _, r := range recs {
		if r.ev == nil || r.ev.Snapshot == nil || r.ev.EventType == schemas.EventDiscontinuity {
			continue
		}
		s := r.ev.Snapshot
		seq++
		if id == "" {
			id = s.BootstrapID
		}
		if s.BootstrapID != id || s.Seq != seq || r.ev.EventID != cut || s.CutEventID != cut || r.key != fmt.Sprintf("snapshot/%s/%d", id, seq) {
			t.Fatalf("record %d of the bootstrap: key %s, event %d, %+v; want seq %d at cut %d of %s", seq, r.key, r.ev.EventID, s, seq, cut, id)
		}
		if r.ev.MessageFormat != "hivedr" {
			t.Errorf("record %d: message format %q", seq, r.ev.MessageFormat)
		}
		for i, file := range r.ev.Files {
			if want := fmt.Sprintf("%s-s%d-%d", id, seq, i); file.TaskID != want {
				t.Errorf("record %d file %d: task %s, want %s", seq, i, file.TaskID, want)
			}
		}
		if (r.ev.EventType == schemas.EventSnapshotTable || r.ev.EventType == schemas.EventSnapshotPartition) && s.StampEventID < cut {
			t.Errorf("record %d: stamp %d below the cut %d", seq, s.StampEventID, cut)
		}
		if r.ev.EventType == schemas.EventSnapshotEnd {
			end = s
		}
	}
	if end == nil {
		t.Fatal("no END on the topic")
	}
	if end.Seq != seq || end.TableCount != tables || end.PartitionCount != parts {
		t.Fatalf("END %+v; want seq %d, %d tables, %d partitions", end, seq, tables, parts)
	}
	return end
}

func TestBootstrapRequestPublishesPagesThenCatchesUp(t *testing.T) {
	f := newBootFixture(t)
	f.conf.Replication.Databases = []config.DatabasePolicy{{Name: "sales"}, {Name: "hr"}}
	f.conf.Tailer.HeartbeatInterval = config.Duration{Duration: time.Nanosecond} // every step
	f.conf.Tailer.HeartbeatRate = 0                                              // to every database
	if err := f.conf.Validate(); err != nil {
		t.Fatal(err)
	}
	f.snaps.addTable(thriftTable("sales", "a"), 0)
	f.snaps.addTable(thriftTable("sales", "b", "ds"), 25)
	f.snaps.addTable(thriftTable("hr", "people"), 0)
	for range 5 {
		f.src.add("sales", schemas.EventCreateDatabase)
	}
	tl := f.tailer(t)
	if err := drive(t, tl, func() bool { return tl.checkpoint == 5 }); err != nil {
		t.Fatal(err)
	}
	f.request(t, schemas.BootstrapRequest{RequestID: "r1", Databases: []string{"SAL*", "nosuch"}})
	f.request(t, schemas.BootstrapRequest{RequestID: "other", Source: "elsewhere"})
	if err := drive(t, tl, func() bool { return len(tl.boots) == 1 }); err != nil {
		t.Fatal(err)
	}
	if b := tl.boots[0]; b.Database != "sales" || b.CutEventID != 5 || b.RequestID != "r1" || b.Reason != ReasonRequested ||
		!strings.HasPrefix(b.BootstrapID, "sales-5-") {
		t.Fatalf("bootstrap %+v", b)
	}
	// Events during the snapshot: sales's wait for the catch-up, hr's go on.
	f.src.add("sales", schemas.EventCreateDatabase) // 6
	f.src.add("hr", schemas.EventCreateDatabase)    // 7
	f.src.add("sales", schemas.EventCreateDatabase) // 8
	if err := drive(t, tl, func() bool { return len(tl.boots) == 0 }); err != nil {
		t.Fatal(err)
	}
	f.src.add("sales", schemas.EventCreateDatabase) // 9: the main loop's again
	if err := drive(t, tl, func() bool { return tl.checkpoint == 9 }); err != nil {
		t.Fatal(err)
	}
	recs := f.topic(t, "sales")
	if got, want := describe(recs), "1 2 3 4 5 B T:a T:b P:b*25 E 6 8 9"; got != want {
		t.Fatalf("sales topic: %s\nwant %s", got, want)
	}
	end := checkSnapshot(t, recs, 5, 2, 25)
	if end.FileCount != 26 || end.ByteCount != 260 {
		t.Errorf("END counts %d files, %d bytes; want 26 and 260", end.FileCount, end.ByteCount)
	}
	// The chain: the events after the END follow the cut, then each other.
	var prevs []int64
	for _, r := range recs[len(recs)-3:] {
		prevs = append(prevs, *r.ev.PreviousEventID)
	}
	if fmt.Sprint(prevs) != "[5 6 8]" {
		t.Errorf("previous_event_id of events 6, 8, 9: %v, want [5 6 8]", prevs)
	}
	// Partitions in name order, one per record.
	var names []string
	for _, r := range recs {
		if r.ev != nil && r.ev.EventType == schemas.EventSnapshotPartition {
			c := r.ev.Payload.(*schemas.PartitionChange)
			if len(c.After) != 1 || c.Table == nil || c.Table.Name != "b" {
				t.Fatalf("partition record %+v", c)
			}
			names = append(names, c.After[0].Values[0])
		}
	}
	if !sort.StringsAreSorted(names) || len(names) != 25 {
		t.Errorf("partitions %v", names)
	}
	// No heartbeat on sales's topic from its BEGIN to the end of its
	// catch-up (event 8); before and after, every step sends one.
	var kinds []string
	for _, r := range f.read(t, kafka.Topics{Prefix: f.conf.Kafka.TopicPrefix}.Events("sales")) {
		kinds = append(kinds, string(r.Key))
	}
	seq := strings.Join(kinds, " ")
	begin, eight := strings.Index(seq, "/1 "), strings.Index(seq, " 8 ")
	if begin < 0 || eight < 0 || strings.Contains(seq[begin:eight], "heartbeat") || !strings.Contains(seq[:begin], "heartbeat") ||
		!strings.Contains(seq[eight:], "heartbeat") {
		t.Errorf("sales topic's keys: %s", seq)
	}
	// hr was published during sales's snapshot, not after it.
	if got := describe(f.topic(t, "hr")); got != "7" {
		t.Errorf("hr topic: %s", got)
	}
	// Pages: the checkpoints record the bootstrap's progress, at most a
	// page (10 records, plus the TABLE that starts a table) apart.
	var seqs []int64
	for _, cp := range f.checkpoints(t) {
		if len(cp.Bootstraps) == 1 && cp.Bootstraps[0].Phase == schemas.PhaseSnapshot && cp.Bootstraps[0].Seq > 0 &&
			(len(seqs) == 0 || seqs[len(seqs)-1] != cp.Bootstraps[0].Seq) {
			seqs = append(seqs, cp.Bootstraps[0].Seq)
		}
	}
	if len(seqs) < 2 || seqs[0] > 11 {
		t.Fatalf("snapshot progress in the checkpoints: %v", seqs)
	}
	for i := 1; i < len(seqs); i++ {
		if d := seqs[i] - seqs[i-1]; d <= 0 || d > 11 {
			t.Fatalf("snapshot progress in the checkpoints: %v", seqs)
		}
	}
	if got := testutil.ToFloat64(tl.m.requestsSkipped); got != 1 {
		t.Errorf("%v requests of other sources skipped, want 1", got)
	}
	if tl.reqOff != 2 {
		t.Errorf("requests offset %d, want 2", tl.reqOff)
	}
}

// TestBootstrapResumesAfterCrash: a tailer killed between two pages (its
// next transaction left open) is replaced; the new one continues after
// the last committed page without reading the finished tables again.
func TestBootstrapResumesAfterCrash(t *testing.T) {
	f := newBootFixture(t)
	f.conf.Tailer.BootstrapPage = 5
	if err := f.conf.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b", "c"} {
		f.snaps.addTable(thriftTable("sales", n), 0)
	}
	f.snaps.addTable(thriftTable("sales", "d", "ds"), 12)
	f.snaps.addTable(thriftTable("sales", "e"), 0)
	f.src.add("sales", schemas.EventCreateDatabase)
	tl := f.tailer(t)
	f.request(t, schemas.BootstrapRequest{RequestID: "r1"})
	// Until a page of d's partitions is committed.
	if err := drive(t, tl, func() bool { return len(tl.boots) == 1 && tl.boots[0].DonePartition != "" }); err != nil {
		t.Fatal(err)
	}
	done := tl.boots[0]
	if done.DoneTable != "c" {
		t.Fatalf("progress %+v", done)
	}
	// The crash: a transaction begun and never ended.
	if err := tl.prod.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := tl.prod.ProduceSync(context.Background(), record(kafka.Topics{Prefix: f.conf.Kafka.TopicPrefix}.Events("sales"),
		"snapshot/lost", []byte("x"), schemas.NameMetastoreEvent, "1")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	readsBefore := map[string]int{}
	for k, v := range f.snaps.reads {
		readsBefore[k] = v
	}
	tl2 := f.tailer(t) // fences tl, aborts its transaction
	if b := tl2.boots; len(b) != 1 || b[0].Seq != done.Seq || b[0].DonePartition != done.DonePartition {
		t.Fatalf("resumed with %+v, want %+v", b, done)
	}
	retries, err := driveRetries(t, tl2, func() bool { return len(tl2.boots) == 0 })
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b", "c"} {
		if got := f.snaps.reads["sales."+n] - readsBefore["sales."+n]; got != 0 {
			t.Errorf("finished table %s read %d times after the restart", n, got)
		}
	}
	// Only d, in progress at the crash, has its partitions listed again.
	if n := tl2.m.RelistedTables(); n != 1 {
		t.Errorf("%d tables' partitions listed again after the restart, want 1 (d)", n)
	}
	// What the new tailer read from the metastore: d (in progress) and e,
	// the partitions of d not yet published, d's names once. A step run
	// again (drive's retries) reads its page, and may list d's names,
	// again: at most a page of partitions and a listing more each.
	tables, parts, listings := tl2.m.BootstrapReads("sales")
	wantParts := 12 - done.PartitionsDone
	page := int64(f.conf.Tailer.BootstrapPage)
	if tables != 2 || parts < wantParts || parts > wantParts+int64(retries)*page || listings < 1 || listings > 1+int64(retries) {
		t.Errorf("after the restart (%d steps run again): %d tables, %d partitions, %d listings read; want 2 (d, e), %d (+ up to %d a step run again), 1 (+ 1 a step run again)",
			retries, tables, parts, listings, wantParts, page)
	}
	recs := f.topic(t, "sales")
	checkSnapshot(t, recs, 1, 5, 12)
	if got := describe(recs); got != "1 B T:a T:b T:c T:d P:d*12 T:e E" {
		t.Errorf("sales topic: %s", got)
	}
}

// renameMsg is an ALTER_TABLE message renaming from to to.
func renameMsg(t testing.TB, from, to *hive_metastore.Table) string {
	b, err := json.Marshal(map[string]string{"db": to.DbName, "table": to.TableName,
		"tableObjBeforeJson": tjsonOf(t, from), "tableObjAfterJson": tjsonOf(t, to)})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (s *memSource) addRaw(e hmslog.RawEvent) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	e.EventID = 1
	if len(s.evs) > 0 {
		e.EventID = s.evs[len(s.evs)-1].EventID + 1
	}
	e.EventTime, e.Catalog = 1_700_000_000+e.EventID, "hive"
	if e.MessageFormat == "" {
		e.MessageFormat = "json-0.2"
	}
	s.evs = append(s.evs, e)
	return e.EventID
}

func TestTouches(t *testing.T) {
	tmp, tt := thriftTable("sales", "tmp_t"), thriftTable("sales", "t")
	other := thriftTable("hr", "t")
	rename := renameMsg(t, tmp, tt)
	cases := []struct {
		name string
		raw  hmslog.RawEvent
		want bool
	}{
		{"its own event", hmslog.RawEvent{EventType: schemas.EventAddPartition, Database: "sales", Table: "t"}, true},
		{"in other case", hmslog.RawEvent{EventType: schemas.EventInsert, Database: "SALES", Table: "T"}, true},
		{"another table", hmslog.RawEvent{EventType: schemas.EventAddPartition, Database: "sales", Table: "u"}, false},
		{"the same name elsewhere", hmslog.RawEvent{EventType: schemas.EventAddPartition, Database: "hr", Table: "t"}, false},
		{"a rename to it", hmslog.RawEvent{EventType: schemas.EventAlterTable, Database: "sales", Table: "t", Message: rename}, true},
		{"a rename from it", hmslog.RawEvent{EventType: schemas.EventAlterTable, Database: "sales", Table: "tmp_t", Message: renameMsg(t, tt, tmp)}, true},
		{"a rename into it from another database", hmslog.RawEvent{EventType: schemas.EventAlterTable, Database: "hr", Table: "t", Message: renameMsg(t, other, tt)}, true},
		{"a drop of its database", hmslog.RawEvent{EventType: schemas.EventDropDatabase, Database: "sales"}, true},
		{"a change of its database", hmslog.RawEvent{EventType: schemas.EventAlterDatabase, Database: "sales"}, false},
		{"a transaction", hmslog.RawEvent{EventType: schemas.EventOpenTxn}, false},
	}
	for _, c := range cases {
		if got := touches(c.raw, "sales", "t"); got != c.want {
			t.Errorf("%s: touches = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestStamps: an object read between heads h1 and h2 is stamped h2 when
// no event in between touches it, else h1.
func TestStamps(t *testing.T) {
	cases := []struct {
		name   string
		during []hmslog.RawEvent // events written while the object is read
		want   func(h1, h2 int64) int64
	}{
		{"quiet", nil, func(h1, h2 int64) int64 { return h2 }},
		{"other tables change", []hmslog.RawEvent{{EventType: schemas.EventAddPartition, Database: "sales", Table: "u"},
			{EventType: schemas.EventCreateDatabase, Database: "hr"}}, func(_, h2 int64) int64 { return h2 }},
		{"it changes", []hmslog.RawEvent{{EventType: schemas.EventCreateDatabase, Database: "hr"},
			{EventType: schemas.EventAddPartition, Database: "sales", Table: "t"}}, func(h1, _ int64) int64 { return h1 }},
		{"its database is dropped", []hmslog.RawEvent{{EventType: schemas.EventDropDatabase, Database: "sales"}},
			func(h1, _ int64) int64 { return h1 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newBootFixture(t)
			f.conf.Tailer.BatchSize = 1 // the window read in several calls
			for range 3 {
				f.src.add("sales", schemas.EventCreateDatabase)
			}
			tl := f.tailer(t)
			h1, _ := f.src.Head(context.Background())
			stamp, head, err := tl.stamped(context.Background(), "sales", "t", func() error {
				for _, e := range c.during {
					f.src.addRaw(e)
				}
				return nil
			})
			h2, _ := f.src.Head(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if head != h2 {
				t.Errorf("head %d, want the second read %d", head, h2)
			}
			if want := c.want(h1, h2); stamp != want {
				t.Errorf("stamp %d, want %d (h1 %d, h2 %d)", stamp, want, h1, h2)
			}
		})
	}
	if stampOf(3, 9, true) != 3 || stampOf(3, 9, false) != 9 {
		t.Error("stampOf")
	}
}

// TestBootstrapStampsConcurrentChange: partitions added while a page is
// read stamp the page with the head before it.
func TestBootstrapStampsConcurrentChange(t *testing.T) {
	f := newBootFixture(t)
	f.snaps.addTable(thriftTable("sales", "a"), 0)
	f.snaps.addTable(thriftTable("sales", "b", "ds"), 3)
	f.src.add("sales", schemas.EventCreateDatabase)
	f.snaps.onRead = func(db, table string) {
		if table == "b" {
			f.src.addRaw(hmslog.RawEvent{EventType: schemas.EventAddPartition, Database: db, Table: table, Message: "{}"})
		} else {
			f.src.add("hr", schemas.EventCreateDatabase)
		}
	}
	tl := f.tailer(t)
	f.request(t, schemas.BootstrapRequest{RequestID: "r1"})
	if err := drive(t, tl, func() bool { return tl.checkpoint > 1 && len(tl.boots) == 0 }); err != nil {
		t.Fatal(err)
	}
	f.snaps.onRead = nil
	stamps := map[string]int64{}
	for _, r := range f.topic(t, "sales") {
		if r.ev != nil && r.ev.Snapshot != nil && r.ev.EventType != schemas.EventSnapshotBegin && r.ev.EventType != schemas.EventSnapshotEnd {
			stamps[describe([]topicRec{r})] = r.ev.Snapshot.StampEventID
		}
	}
	// a: read between heads 1 and 2 (an hr event): h2 = 2. b's TABLE:
	// read between 2 and 3, touched: h1 = 2; its partitions between 3
	// and 4, touched: h1 = 3.
	if stamps["T:a"] != 2 || stamps["T:b"] != 2 || stamps["P:b"] != 3 {
		t.Errorf("stamps %v", stamps)
	}
}

// TestBootstrapTornPartitionRead: a page of partitions the metastore
// answered with one partition torn (no values: dropped between its
// queries) is read again, and no record of a partition without values
// is published; a page torn every time fails the step, which the tailer
// retries, naming the partition.
func TestBootstrapTornPartitionRead(t *testing.T) {
	f := newBootFixture(t)
	f.snaps.addTable(thriftTable("sales", "b", "ds"), 3)
	f.src.add("sales", schemas.EventCreateDatabase)
	f.snaps.tear = []string{"ds=002"}
	tl := f.tailer(t)
	f.request(t, schemas.BootstrapRequest{RequestID: "r1"})
	if err := drive(t, tl, func() bool { return tl.checkpoint > 0 && len(tl.boots) == 0 }); err != nil {
		t.Fatal(err)
	}
	var got [][]string
	for _, r := range f.topic(t, "sales") {
		if r.ev != nil && r.ev.EventType == schemas.EventSnapshotPartition {
			for _, p := range r.ev.Payload.(*schemas.PartitionChange).After {
				got = append(got, p.Values)
			}
		}
	}
	if want := [][]string{{"001"}, {"003"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("partition records %v, want %v (the torn one read again: gone)", got, want)
	}

	f = newBootFixture(t)
	f.snaps.addTable(thriftTable("sales", "b", "ds"), 3)
	f.src.add("sales", schemas.EventCreateDatabase)
	for range tornTries {
		f.snaps.tear = append(f.snaps.tear, "ds=001")
	}
	f.snaps.tearKeeps = true
	tl = f.tailer(t)
	f.request(t, schemas.BootstrapRequest{RequestID: "r1"})
	err := drive(t, tl, func() bool { return false })
	if err == nil || !strings.Contains(err.Error(), "a partition with 0 values where the table has 1 keys") || !strings.Contains(err.Error(), "sales.b") {
		t.Fatalf("torn at every read: %v, want an error naming the partition", err)
	}
}

func TestPlanRequest(t *testing.T) {
	pol := config.Replication{Databases: []config.DatabasePolicy{{Name: "sales*"}, {Name: "hr", ExternalData: config.MetadataOnly}}}
	pol.EnsureDefaults()
	if err := pol.Validate(); err != nil {
		t.Fatal(err)
	}
	source := []string{"sales", "sales_eu", "hr", "tmp"}
	active := []schemas.BootstrapState{{Database: "sales_eu", BootstrapID: "sales_eu-1-1", Phase: schemas.PhaseCatchup}}
	now := time.UnixMilli(1_700_000_000_000)
	cases := []struct {
		name     string
		req      schemas.BootstrapRequest
		want     string // databases/tables/with_data
		warnings []string
	}{
		{"every database in scope", schemas.BootstrapRequest{}, "hr//false sales//true", []string{"sales_eu is being bootstrapped"}},
		{"a glob", schemas.BootstrapRequest{Databases: []string{"SALES*"}}, "sales//true", []string{"sales_eu is being bootstrapped"}},
		{"out of scope and missing", schemas.BootstrapRequest{Databases: []string{"tmp", "nosuch", "hr"}}, "hr//false",
			[]string{"nosuch match no database", "databases tmp are not in the replication scope"}},
		{"tables of one database", schemas.BootstrapRequest{Databases: []string{"sales"}, Tables: []string{"T1", "t2"}}, "sales/t1,t2/true", nil},
		{"tables of several databases", schemas.BootstrapRequest{Databases: []string{"sales", "hr"}, Tables: []string{"t"}}, "",
			[]string{"a table-scoped bootstrap is of one database"}},
	}
	for _, c := range cases {
		c.req.RequestID = "r"
		boots, warnings := planRequest(&c.req, source, &pol, active, 42, time.Time{}, now, newTxnTable(nil, 0))
		var got []string
		for _, b := range boots {
			got = append(got, fmt.Sprintf("%s/%s/%v", b.Database, strings.Join(b.Tables, ","), b.WithData))
			if b.CutEventID != 42 || b.BootstrapID != b.Database+"-42-1700000000000" || b.Phase != schemas.PhaseSnapshot || b.Reason != ReasonRequested {
				t.Errorf("%s: %+v", c.name, b)
			}
		}
		if strings.Join(got, " ") != c.want {
			t.Errorf("%s: bootstraps %v, want %s", c.name, got, c.want)
		}
		if len(warnings) != len(c.warnings) {
			t.Errorf("%s: warnings %q, want %q", c.name, warnings, c.warnings)
			continue
		}
		for i, w := range c.warnings {
			if !strings.Contains(warnings[i], w) {
				t.Errorf("%s: warning %q lacks %q", c.name, warnings[i], w)
			}
		}
	}
}

// TestBootstrapDiscontinuity: a tailer started without a checkpoint over
// a topic with records marks it before anything else; with policy
// bootstrap: auto it also bootstraps the database.
func TestBootstrapDiscontinuity(t *testing.T) {
	for _, auto := range []bool{false, true} {
		t.Run(fmt.Sprintf("auto=%v", auto), func(t *testing.T) {
			f := newBootFixture(t)
			tl := f.published(t, 3)
			for range 3 {
				f.src.add("sales", schemas.EventCreateDatabase)
			}
			// A fresh state (another source name, no checkpoint) started
			// past events 4 and 5.
			f.conf.Source.Name = "fresh"
			f.conf.Tailer.StartEventID = "5"
			if auto {
				f.conf.Replication.Databases[0].Bootstrap = config.BootstrapAuto
			}
			if err := f.conf.Validate(); err != nil {
				t.Fatal(err)
			}
			tl = f.tailer(t)
			if err := drive(t, tl, func() bool { return tl.checkpoint == 6 && len(tl.boots) == 0 }); err != nil {
				t.Fatal(err)
			}
			recs := f.topic(t, "sales")
			want := "1 2 3 D5 6"
			if auto {
				want = "1 2 3 D5 B T:a E 6"
			}
			if got := describe(recs); got != want {
				t.Fatalf("sales topic: %s, want %s", got, want)
			}
			d := recs[3]
			if d.key != "5" || d.ev.Snapshot.CutEventID != 5 || d.ev.Snapshot.Reason != ReasonDiscontinuity || *d.ev.PreviousEventID != 3 {
				t.Errorf("discontinuity record %s: %+v prev %d", d.key, d.ev.Snapshot, *d.ev.PreviousEventID)
			}
			if auto {
				if b := recs[4].ev.Snapshot; b.Reason != ReasonDiscontinuity || b.CutEventID != 5 {
					t.Errorf("BEGIN %+v", b)
				}
			}
			if last := recs[len(recs)-1].ev; *last.PreviousEventID != 5 {
				t.Errorf("event 6 follows %d, want 5", *last.PreviousEventID)
			}
		})
	}
}

// TestBootstrapRepairsChainBroken: a tailer stopped CHAIN_BROKEN and a
// chain_broken request: the restarted tailer resumes after the gap and
// bootstraps every database of the scope at that cut.
func TestBootstrapRepairsChainBroken(t *testing.T) {
	f := newBootFixture(t)
	tl := f.published(t, 3)
	for range 5 {
		f.src.add("sales", schemas.EventCreateDatabase)
	}
	f.src.purge(5)
	err := drive(t, tl, func() bool { return false })
	if !errors.Is(err, ErrChainBroken) || !strings.Contains(err.Error(), "hivedr bootstrap -repair-chain") {
		t.Fatalf("err = %v, want CHAIN_BROKEN naming the repair", err)
	}
	if err := tl.markChainBroken(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Without a request the restarted tailer stops on the same gap.
	tl = f.tailer(t)
	if err := drive(t, tl, func() bool { return false }); !errors.Is(err, ErrChainBroken) {
		t.Fatalf("err = %v without a repair request", err)
	}
	if err := tl.markChainBroken(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.request(t, schemas.BootstrapRequest{RequestID: "repair", Reason: ReasonChainBroken})
	tl = f.tailer(t)
	if tl.checkpoint != 5 || len(tl.boots) != 1 || tl.boots[0].CutEventID != 5 || tl.boots[0].Reason != ReasonChainBroken {
		t.Fatalf("after the repair: checkpoint %d, bootstraps %+v", tl.checkpoint, tl.boots)
	}
	// Event 5 is purged: the cut's time is event 6's, not the broken
	// checkpoint's (event 3's).
	if at := time.Unix(1_700_000_006, 0); !tl.boots[0].CutEventTime.Equal(at) || !tl.checkpointTime.Equal(at) {
		t.Errorf("after the repair: cut time %s, checkpoint time %s; want %s", tl.boots[0].CutEventTime, tl.checkpointTime, at)
	}
	if err := drive(t, tl, func() bool { return tl.checkpoint == 8 && len(tl.boots) == 0 }); err != nil {
		t.Fatal(err)
	}
	if got := describe(f.topic(t, "sales")); got != "1 2 3 B T:a E 6 7 8" {
		t.Errorf("sales topic: %s", got)
	}
}

// TestBootstrapEnteredScope: a table renamed into the scope gets a
// table-scoped bootstrap right after the rename, manual policy or not.
func TestBootstrapEnteredScope(t *testing.T) {
	f := newBootFixture(t)
	f.conf.Replication.Databases = []config.DatabasePolicy{{Name: "sales", ExcludeTables: []string{"tmp_.*"}}}
	if err := f.conf.Validate(); err != nil {
		t.Fatal(err)
	}
	tmp, tt := thriftTable("sales", "tmp_t", "ds"), thriftTable("sales", "t", "ds")
	f.snaps.addTable(tt, 2)
	f.snaps.addTable(thriftTable("sales", "other"), 0)
	f.src.add("sales", schemas.EventCreateDatabase)
	f.src.addRaw(hmslog.RawEvent{EventType: schemas.EventAlterTable, Database: "sales", Table: "t", Message: renameMsg(t, tmp, tt)})
	f.src.add("sales", schemas.EventCreateDatabase)
	tl := f.tailer(t)
	if err := drive(t, tl, func() bool { return tl.checkpoint == 3 && len(tl.boots) == 0 }); err != nil {
		t.Fatal(err)
	}
	recs := f.topic(t, "sales")
	if got := describe(recs); got != "1 2 3 B T:t P:t*2 E" {
		t.Fatalf("sales topic: %s", got)
	}
	if b := recs[3].ev.Snapshot; b.Reason != ReasonEnteredScope || fmt.Sprint(b.Tables) != "[t]" || b.CutEventID != 3 {
		t.Errorf("BEGIN %+v", b)
	}
}

func TestEnteredScope(t *testing.T) {
	pol := config.Replication{Databases: []config.DatabasePolicy{{Name: "sales", ExcludeTables: []string{"tmp_.*"}}}}
	pol.EnsureDefaults()
	if err := pol.Validate(); err != nil {
		t.Fatal(err)
	}
	tb := func(db, name string) *schemas.Table { return &schemas.Table{Database: db, Name: name} }
	cases := []struct {
		name          string
		before, after *schemas.Table
		want          bool
	}{
		{"from an excluded name", tb("sales", "tmp_x"), tb("sales", "x"), true},
		{"from a database out of scope", tb("hr", "x"), tb("sales", "x"), true},
		{"within the scope", tb("sales", "y"), tb("sales", "x"), false},
		{"out of the scope", tb("sales", "x"), tb("sales", "tmp_x"), false},
		{"not a rename", nil, tb("sales", "x"), false},
	}
	for _, c := range cases {
		ev := &schemas.Event{EventType: schemas.EventAlterTable, Payload: &schemas.TableChange{Before: c.before, After: c.after}}
		if k, got := enteredScope(ev, &pol); got != c.want || (got && k != (tableKey{"sales", "x"})) {
			t.Errorf("%s: %v %v, want %v", c.name, k, got, c.want)
		}
	}
}

// TestBootstrapNewDatabase: with policy bootstrap: auto, a database of the
// scope that exists on the source but was never published is
// bootstrapped (new_database); one the tailer publishes is not.
func TestBootstrapNewDatabase(t *testing.T) {
	f := newBootFixture(t)
	f.conf.Replication.Databases = []config.DatabasePolicy{{Name: "sales", Bootstrap: config.BootstrapAuto}, {Name: "hr", Bootstrap: config.BootstrapAuto}}
	if err := f.conf.Validate(); err != nil {
		t.Fatal(err)
	}
	f.snaps.addTable(thriftTable("sales", "a"), 0)
	f.src.add("hr", schemas.EventCreateDatabase)
	f.src.add("hr", schemas.EventCreateDatabase)
	tl := f.tailer(t)
	if err := drive(t, tl, func() bool {
		_, ok := tl.chain["sales"]
		return tl.checkpoint == 2 && ok && len(tl.boots) == 0
	}); err != nil {
		t.Fatal(err)
	}
	recs := f.topic(t, "sales")
	if got := describe(recs); got != "B T:a E" {
		t.Fatalf("sales topic: %s", got)
	}
	if r := recs[0].ev.Snapshot.Reason; r != ReasonNewDatabase {
		t.Errorf("reason %q", r)
	}
	if got := describe(f.topic(t, "hr")); got != "1 2" {
		t.Errorf("hr topic: %s (bootstrapped although published)", got)
	}
}

// TestBootstrapCatchupResumes: a tailer replaced in the middle of a
// catch-up continues it from its checkpoint: every held event once, in
// order, after the END.
func TestBootstrapCatchupResumes(t *testing.T) {
	f := newBootFixture(t)
	tl := f.published(t, 2)
	f.request(t, schemas.BootstrapRequest{RequestID: "r1"})
	if err := drive(t, tl, func() bool { return len(tl.boots) == 1 }); err != nil {
		t.Fatal(err)
	}
	for range 40 { // held: more than one step of catch-up (4 batches of 7)
		f.src.add("sales", schemas.EventCreateDatabase)
	}
	for tl.checkpoint < 42 { // the main loop alone: all 40 wait
		if _, err := tl.step(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if err := drive(t, tl, func() bool {
		return len(tl.boots) == 1 && tl.boots[0].Phase == schemas.PhaseCatchup && tl.boots[0].CatchupEventID > 2
	}); err != nil {
		t.Fatal(err)
	}
	at := tl.boots[0].CatchupEventID
	if at >= 42 {
		t.Fatalf("catch-up at %d already", at)
	}
	tl = f.tailer(t)
	if len(tl.boots) != 1 || tl.boots[0].CatchupEventID != at {
		t.Fatalf("resumed with %+v, want the catch-up at %d", tl.boots, at)
	}
	if err := drive(t, tl, func() bool { return tl.checkpoint == 42 && len(tl.boots) == 0 }); err != nil {
		t.Fatal(err)
	}
	var want []string
	for id := 3; id <= 42; id++ {
		want = append(want, strconv.Itoa(id))
	}
	if got := describe(f.topic(t, "sales")); got != "1 2 B T:a E "+strings.Join(want, " ") {
		t.Errorf("sales topic: %s", got)
	}
}

// rename renames db.from to db.to in the source metastore, partitions and
// all, and logs the ALTER_TABLE event.
func (f *bootFixture) rename(t *testing.T, db, from, to string) {
	t.Helper()
	s := f.snaps
	s.mu.Lock()
	old := s.tables[db+"."+from]
	if old == nil {
		s.mu.Unlock()
		t.Fatalf("rename of %s.%s: no such table", db, from)
	}
	nt := *old
	nt.TableName = to
	s.tables[db+"."+to], s.parts[db+"."+to] = &nt, s.parts[db+"."+from]
	delete(s.tables, db+"."+from)
	delete(s.parts, db+"."+from)
	s.mu.Unlock()
	f.src.addRaw(hmslog.RawEvent{EventType: schemas.EventAlterTable, Database: db, Table: to, Message: renameMsg(t, old, &nt)})
}

// TestBootstrapRenameDuringSnapshot: tables renamed while a snapshot is
// in a partitioned table (fired on that observed progress), with or
// without a tailer restart right after. Every table is published once
// under the name it has when read, the table in progress is neither
// skipped nor restarted, and a table renamed behind the cursor is
// published before the END.
func TestBootstrapRenameDuringSnapshot(t *testing.T) {
	for _, tc := range []struct {
		name     string
		from, to string
		restart  bool
		want     string
	}{
		{"between done and in progress", "x", "b", false, "1 B T:a T:c P:c*12 T:b E 2"},
		{"between done and in progress, restarted", "x", "b", true, "1 B T:a T:c P:c*12 T:b E 2"},
		{"behind the cursor", "x", "a0", false, "1 B T:a T:c P:c*12 T:a0 E 2"},
		{"behind the cursor, restarted", "x", "a0", true, "1 B T:a T:c P:c*12 T:a0 E 2"},
		{"ahead of the cursor", "x", "y", false, "1 B T:a T:c P:c*12 T:y E 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newBootFixture(t)
			f.conf.Tailer.BootstrapPage = 5
			if err := f.conf.Validate(); err != nil {
				t.Fatal(err)
			}
			f.snaps.addTable(thriftTable("sales", "a"), 0)
			f.snaps.addTable(thriftTable("sales", "c", "ds"), 12)
			f.snaps.addTable(thriftTable("sales", "x"), 0)
			f.src.add("sales", schemas.EventCreateDatabase)
			tl := f.tailer(t)
			f.request(t, schemas.BootstrapRequest{RequestID: "r1"})
			if err := drive(t, tl, func() bool {
				return len(tl.boots) == 1 && tl.boots[0].TableInProgress == "c" && tl.boots[0].DonePartition != ""
			}); err != nil {
				t.Fatal(err)
			}
			if b := tl.boots[0]; b.DoneTable != "a" || !slices.Equal(b.PublishedTables, []string{"a", "c"}) {
				t.Fatalf("progress %+v", b)
			}
			f.rename(t, "sales", tc.from, tc.to)
			if tc.restart {
				tl = f.tailer(t)
				if b := tl.boots; len(b) != 1 || b[0].TableInProgress != "c" {
					t.Fatalf("resumed with %+v", b)
				}
			}
			if err := drive(t, tl, func() bool { return len(tl.boots) == 0 }); err != nil {
				t.Fatal(err)
			}
			recs := f.topic(t, "sales")
			if got := describe(recs); got != tc.want {
				t.Errorf("sales topic: %s\nwant %s", got, tc.want)
			}
			checkSnapshot(t, recs, 1, 3, 12)
			// c, in progress at the restart, is listed again (from its
			// last partition published); nothing else.
			want := 0.0
			if tc.restart {
				want = 1
			}
			if n := tl.m.RelistedTables(); float64(n) != want {
				t.Errorf("%d tables' partitions listed again, want %v", n, want)
			}
			if got := f.snaps.reads["sales.a"]; got != 1 {
				t.Errorf("finished table a read %d times, want 1", got)
			}
		})
	}
}

// TestResumeOrder: what a page has left, from the cursor and the tables
// listed at its start.
func TestResumeOrder(t *testing.T) {
	for _, tc := range []struct {
		name       string
		b          schemas.BootstrapState
		tables     []string
		want       []string
		inProgress bool
	}{
		{"fresh", schemas.BootstrapState{}, []string{"a", "b"}, []string{"a", "b"}, false},
		{"in progress first, even listed after another name",
			schemas.BootstrapState{TableInProgress: "c", PublishedTables: []string{"a", "c"}}, []string{"a", "b", "c", "d"}, []string{"c", "b", "d"}, true},
		{"in progress renamed away is still resumed (its read finds it gone)",
			schemas.BootstrapState{TableInProgress: "c", PublishedTables: []string{"a", "c"}}, []string{"a", "d"}, []string{"c", "d"}, true},
		{"a name behind the cursor", schemas.BootstrapState{DoneTable: "c", PublishedTables: []string{"a", "c"}}, []string{"a", "a0", "c"}, []string{"a0"}, false},
		{"all published: the END's page", schemas.BootstrapState{DoneTable: "c", PublishedTables: []string{"a", "c"}}, []string{"a", "c"}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ip := resumeOrder(&tc.b, tc.tables)
			if !slices.Equal(got, tc.want) || ip != tc.inProgress {
				t.Errorf("resumeOrder = %v, %v; want %v, %v", got, ip, tc.want, tc.inProgress)
			}
		})
	}
}

// TestAdoptLegacyCursor: a checkpoint of an older tailer (done_table and
// done_partition only) resumes as that tailer meant it.
func TestAdoptLegacyCursor(t *testing.T) {
	tables := []string{"a", "b", "c", "d"}
	for _, tc := range []struct {
		name       string
		b          schemas.BootstrapState
		inProgress string
		published  []string
	}{
		{"not started", schemas.BootstrapState{}, "", nil},
		{"BEGIN only", schemas.BootstrapState{Seq: 1}, "", nil},
		{"between tables", schemas.BootstrapState{Seq: 3, DoneTable: "b"}, "", []string{"a", "b"}},
		{"in a table", schemas.BootstrapState{Seq: 9, DoneTable: "b", DonePartition: "ds=003"}, "c", []string{"a", "b", "c"}},
		{"in the first table", schemas.BootstrapState{Seq: 9, DonePartition: "ds=003"}, "a", []string{"a"}},
		{"new cursor kept", schemas.BootstrapState{Seq: 9, DoneTable: "b", TableInProgress: "d", PublishedTables: []string{"a", "b", "d"}},
			"d", []string{"a", "b", "d"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.b
			adoptLegacyCursor(&b, tables)
			if b.TableInProgress != tc.inProgress || !slices.Equal(b.PublishedTables, tc.published) {
				t.Errorf("adopted in progress %q, published %v; want %q, %v", b.TableInProgress, b.PublishedTables, tc.inProgress, tc.published)
			}
		})
	}
}

// TestCatchupTxns: a catch-up's commits and aborts reach the database
// its transaction allocated in, whichever batch (or the time before the
// cut) held the allocation; the table a bootstrap keeps is its
// database's only; a checkpoint of an older tailer knows nothing, and a
// commit naming no writes is read from the source.
func TestCatchupTxns(t *testing.T) {
	abort := func(id, txn int64) schemas.Event {
		return schemas.Event{EventID: id, EventType: schemas.EventAbortTxn, Payload: &schemas.Transaction{TxnIDs: []int64{txn}}}
	}
	ledger := schemas.TableWriteID{Database: "finance", Table: "ledger", WriteID: 1}
	for _, tc := range []struct {
		name string
		// main is the main table at the cut (nil: an older tailer's
		// checkpoint, which carried none); batches the catch-up's.
		main    *txnTable
		batches [][]schemas.Event
		// want, for the last event: whether it reaches sales, whether it
		// was read from the source; the table kept after the last batch.
		reaches, read bool
		kept          []int64
	}{
		{name: "a commit in a later batch than the allocation",
			main:    newTxnTable(nil, 0),
			batches: [][]schemas.Event{{allocEvent(11, "sales", "orders", 10)}, {allocEvent(12, "finance", "ledger", 10)}, {commitEvent(13, 10, ledger)}},
			reaches: true},
		{name: "an abort in a later batch than the allocation",
			main:    newTxnTable(nil, 0),
			batches: [][]schemas.Event{{allocEvent(11, "sales", "orders", 10)}, {abort(12, 10)}},
			reaches: true},
		{name: "a transaction open at the cut",
			main:    newTxnTable([]schemas.OpenTxn{{TxnID: 10, FirstEventID: 9, Databases: []string{"finance", "sales"}}}, 0),
			batches: [][]schemas.Event{{allocEvent(11, "sales", "orders", 12)}, {commitEvent(12, 10, ledger)}},
			reaches: true, kept: []int64{12}},
		{name: "one open at the cut in another database only is not kept",
			main:    newTxnTable([]schemas.OpenTxn{{TxnID: 10, FirstEventID: 9, Databases: []string{"finance"}}}, 0),
			batches: [][]schemas.Event{{allocEvent(11, "sales", "orders", 12)}, {commitEvent(12, 10, ledger)}},
			kept:    []int64{12}},
		{name: "still open after the last batch",
			main:    newTxnTable(nil, 0),
			batches: [][]schemas.Event{{allocEvent(11, "sales", "orders", 10)}, {allocEvent(12, "finance", "ledger", 12)}, {commitEvent(13, 12, ledger)}},
			kept:    []int64{10}},
		{name: "an older tailer's checkpoint: a commit naming no writes is read",
			batches: [][]schemas.Event{{allocEvent(11, "sales", "orders", 10)}, {commitEvent(12, 10)}},
			reaches: true, read: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &fakeTxns{writes: map[int64][]TxnWrite{10: {{Database: "sales", Table: "orders", WriteID: 1,
				Files: ordersFile + "#c1##delta_0000001_0000001_0000"}}}}
			tl := txnTailer(t, logWith(9, 11, 12, 13), src)
			b := schemas.BootstrapState{Database: "sales", TxnsTrackedAbove: -1}
			if tc.main != nil {
				b = newBootstrap("sales", nil, ReasonRequested, "", 10, time.Time{}, time.Unix(1, 0), &config.DatabasePolicy{Name: "sales"}, tc.main)
			}
			var last schemas.Event
			for _, evs := range tc.batches {
				tt, err := tl.completeTxns(context.Background(), evs, catchupTxns(&b))
				if err != nil {
					t.Fatal(err)
				}
				keepTxns(&b, tt)
				last = evs[len(evs)-1]
			}
			if got := slices.Contains(last.Databases, "sales"); got != tc.reaches {
				t.Errorf("event %d reaches sales: %v (databases %v), want %v", last.EventID, got, last.Databases, tc.reaches)
			}
			if read := len(src.reads) > 0; read != tc.read {
				t.Errorf("read from the source: %v, want %v", read, tc.read)
			}
			var kept []int64
			for _, o := range b.OpenTxns {
				kept = append(kept, o.TxnID)
				if !slices.Contains(o.Databases, "sales") {
					t.Errorf("kept transaction %d of databases %v", o.TxnID, o.Databases)
				}
			}
			if !slices.Equal(kept, tc.kept) {
				t.Errorf("kept %v, want %v", kept, tc.kept)
			}
		})
	}
}

// TestTxnsAfter: the table after a prefix of a batch's events is the one
// completeTxns leaves after those events alone.
func TestTxnsAfter(t *testing.T) {
	evs := []schemas.Event{allocEvent(5, "sales", "orders", 10, 11), commitEvent(6, 10), allocEvent(7, "finance", "ledger", 12),
		{EventID: 8, EventType: schemas.EventAbortTxn, Payload: &schemas.Transaction{TxnIDs: []int64{11}}}}
	tl := txnTailer(t, logWith(5, 6, 7, 8), &fakeTxns{})
	for n := range len(evs) + 1 {
		ps := make([]prepared, n)
		for i := range n {
			ps[i].routed.Event = evs[i]
		}
		before := newTxnTable([]schemas.OpenTxn{{TxnID: 9, FirstEventID: 4, Databases: []string{"sales"}}}, 0)
		want, err := tl.completeTxns(context.Background(), slices.Clone(evs[:n]), before)
		if err != nil {
			t.Fatal(err)
		}
		if got := txnsAfter(before, ps); !slices.EqualFunc(got.list(), want.list(), func(a, b schemas.OpenTxn) bool {
			return a.TxnID == b.TxnID && a.FirstEventID == b.FirstEventID && slices.Equal(a.Databases, b.Databases)
		}) {
			t.Errorf("after %d events: %v, want %v", n, got.list(), want.list())
		}
		if len(before.open) != 1 {
			t.Errorf("after %d events the table given changed: %v", n, before.list())
		}
	}
}

// TestTableIncarnation: the table in progress is known by the
// metastore's table ID, or its create time where the metastore gives no
// ID; a table made again under the name is another one, and a cursor of
// an older tailer (no incarnation recorded) is taken as the same.
func TestTableIncarnation(t *testing.T) {
	read := func(id *int64, created int32, keys ...string) *schemas.Table {
		t.Helper()
		ht := &hive_metastore.Table{TableName: "big", DbName: "sales", CreateTime: created, ID: id, Sd: &hive_metastore.StorageDescriptor{}}
		for _, k := range keys {
			ht.PartitionKeys = append(ht.PartitionKeys, &hive_metastore.FieldSchema{Name: k, Type: "string"})
		}
		tb, err := TableFromThriftJSON(tjsonOf(t, ht))
		if err != nil {
			t.Fatal(err)
		}
		return tb
	}
	id := func(n int64) *int64 { return &n }
	for _, tc := range []struct {
		name        string
		published   *schemas.Table // nil: an older tailer's cursor
		found       *schemas.Table
		incarnation string // of published
		same        bool
	}{
		{"the same table", read(id(41), 1700000000, "dt"), read(id(41), 1700000000, "dt"), "id:41", true},
		{"made again in the same second", read(id(41), 1700000000, "dt"), read(id(42), 1700000000, "dt"), "id:41", false},
		{"made again with other keys", read(id(41), 1700000000, "dt"), read(id(42), 1700000005, "region", "day"), "id:41", false},
		{"no ID: the create time", read(nil, 1700000000, "dt"), read(nil, 1700000000, "dt"), "created:1700000000", true},
		{"no ID, made again later", read(nil, 1700000000, "dt"), read(nil, 1700000003, "region"), "created:1700000000", false},
		{"an older tailer's cursor", nil, read(id(42), 1700000005, "region"), "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var recorded string
			if tc.published != nil {
				recorded = tableIncarnation(tc.published)
			}
			if recorded != tc.incarnation {
				t.Errorf("incarnation %q, want %q", recorded, tc.incarnation)
			}
			if got := sameIncarnation(recorded, tc.found); got != tc.same {
				t.Errorf("same table: %v, want %v", got, tc.same)
			}
		})
	}
}

// TestRepairCut: a repair resumes just before the first event after the
// gap, its bootstraps stamped with that event's time (the cut event is
// purged), never the broken checkpoint's; with nothing after the
// checkpoint it resumes at the head, as of now.
func TestRepairCut(t *testing.T) {
	cpTime := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC) // days before the repair
	now := time.Date(2026, 11, 4, 12, 0, 0, 0, time.UTC)
	after := time.Date(2026, 11, 4, 11, 59, 0, 0, time.UTC)
	ev := func(id int64) []hmslog.RawEvent { return []hmslog.RawEvent{{EventID: id, EventTime: after.Unix()}} }
	for _, tc := range []struct {
		name     string
		head     int64
		first    []hmslog.RawEvent
		wantCut  int64
		wantTime time.Time
	}{
		{"a gap after the checkpoint", 900, ev(500), 499, after},
		{"everything after the checkpoint purged", 900, nil, 900, now},
		{"no gap", 900, ev(101), 100, cpTime},
		{"nothing after the checkpoint", 100, nil, 100, cpTime},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cut, at := repairCut(100, cpTime, tc.head, tc.first, now)
			if cut != tc.wantCut || !at.Equal(tc.wantTime) {
				t.Errorf("cut %d at %s, want %d at %s", cut, at, tc.wantCut, tc.wantTime)
			}
		})
	}
}

// TestAcidStamp: a page of a transactional table's partitions is stamped
// at most at the head read before the write-ID state its files are
// chosen by, so a compaction committed after that state (its directory
// invisible to it) applies on DR; other tables keep the page's stamp.
func TestAcidStamp(t *testing.T) {
	for _, tc := range []struct {
		name  string
		page  int64
		view  *acidView
		stamp int64
	}{
		{"not transactional", 120, nil, 120},
		{"state read before the page (its TABLE record's)", 120, &acidView{at: 100}, 100},
		{"state read again after the page's read (a restart)", 120, &acidView{at: 125}, 120},
		{"state read at the page's head", 120, &acidView{at: 120}, 120},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := acidStamp(tc.page, tc.view); got != tc.stamp {
				t.Errorf("stamp %d, want %d", got, tc.stamp)
			}
		})
	}
}
