package e2e

import (
	"errors"
	"fmt"
	"os"
	"path"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/beltran/gohive/hive_metastore"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/hmslog"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/internal/testenv"
	"github.com/hivedr/hivedr/schemas"
)

// The applier's half of bootstrap on the real stack. The test publishes a
// bootstrap's records itself, as the tailer publishes them (through the
// schema registry, with its headers and keys snapshot/<id>/<seq>, slices
// in transactions), and plays copyd for their files (written on the DR
// cluster, COPIED completions); the real applier applies them to the DR
// metastore and DR HDFS.

// bootstrapFeed writes one database's bootstrap records and completions.
type bootstrapFeed struct {
	t        *testing.T
	p        *pipeline
	db       string
	s        *schemas.Serde
	tailer   *kgo.Client // transactional, as the tailer's
	copyd    *kgo.Client
	drFS     *fs.HDFS
	src, dr  string // the clusters' roots, hdfs://authority
	id       string
	cut, seq int64
	counts   [3]int64 // tables, partitions, files
}

func newBootstrapFeed(t *testing.T, env *testenv.Env, p *pipeline, db string) *bootstrapFeed {
	t.Helper()
	topics := kafka.Topics{Prefix: p.prefix}
	ctx := ctxFor(t, time.Minute)
	if _, err := env.KafkaAdmin(t).CreateTopic(ctx, 1, 1, nil, topics.Events(db)); err != nil {
		t.Fatal(err)
	}
	return &bootstrapFeed{t: t, p: p, db: db, s: serde(t, env),
		tailer: env.Kafka(t, kgo.TransactionalID(p.prefix+"-test-tailer")), copyd: env.Kafka(t),
		drFS: drHDFS(t, env),
		src:  "hdfs://" + env.Get(t, "HIVEDR_HDFS_SRC_NAMENODE"), dr: "hdfs://" + env.Get(t, "HIVEDR_HDFS_DR_NAMENODE")}
}

// start begins a bootstrap: the records after it are of id, cut at cut.
func (f *bootstrapFeed) start(id string, cut int64) {
	f.id, f.cut, f.seq, f.counts = id, cut, 0, [3]int64{}
}

func (f *bootstrapFeed) record(typ schemas.EventType, table string, payload schemas.Payload, stamp int64, files []string) *schemas.Event {
	f.seq++
	ev := &schemas.Event{EventID: f.cut, EventTime: time.Now().Truncate(time.Second), EventType: typ, Database: f.db, Table: table,
		Databases: []string{f.db}, Source: f.p.prefix, MessageFormat: "hivedr", Payload: payload, PreviousEventID: new(int64),
		Snapshot: &schemas.SnapshotInfo{BootstrapID: f.id, CutEventID: f.cut, StampEventID: stamp, Seq: f.seq, WithData: true, Reason: "requested"}}
	for i, file := range files {
		ev.Files = append(ev.Files, schemas.FileRef{URI: file, TaskID: fmt.Sprintf("%d-s%d-%d", f.cut, f.seq, i)})
	}
	f.counts[2] += int64(len(files))
	return ev
}

func (f *bootstrapFeed) begin() *schemas.Event {
	return f.record(schemas.EventSnapshotBegin, "", &schemas.DatabaseChange{After: &schemas.Database{
		Name: f.db, Location: f.src + "/external/" + f.db + ".db", Owner: "etl", Parameters: map[string]string{"team": "bootstrap"}}}, 0, nil)
}

func (f *bootstrapFeed) srcTable(name string, partKeys ...string) *schemas.Table {
	t := &schemas.Table{Database: f.db, Name: name, Owner: "etl", TableType: "EXTERNAL_TABLE",
		Location: f.src + "/external/" + f.db + ".db/" + name, Parameters: map[string]string{"EXTERNAL": "TRUE"},
		Columns: []schemas.Column{{Name: "id", Type: "bigint"}},
		Storage: schemas.Storage{InputFormat: "org.apache.hadoop.mapred.TextInputFormat",
			OutputFormat: "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
			SerdeLib:     "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe", NumBuckets: -1}}
	for _, k := range partKeys {
		t.PartitionKeys = append(t.PartitionKeys, schemas.Column{Name: k, Type: "string"})
	}
	return t
}

func (f *bootstrapFeed) table(t *schemas.Table, stamp int64, files ...string) *schemas.Event {
	f.counts[0]++
	return f.record(schemas.EventSnapshotTable, t.Name, &schemas.TableChange{After: t}, stamp, files)
}

func (f *bootstrapFeed) part(t *schemas.Table, value string, stamp int64, files ...string) *schemas.Event {
	f.counts[1]++
	p := schemas.Partition{Values: []string{value}, Location: t.Location + "/" + t.PartitionKeys[0].Name + "=" + value}
	return f.record(schemas.EventSnapshotPartition, t.Name, &schemas.PartitionChange{Table: t, After: []schemas.Partition{p}}, stamp, files)
}

func (f *bootstrapFeed) end() *schemas.Event {
	ev := f.record(schemas.EventSnapshotEnd, "", nil, 0, nil)
	ev.Snapshot.TableCount, ev.Snapshot.PartitionCount, ev.Snapshot.FileCount = f.counts[0], f.counts[1], f.counts[2]
	return ev
}

// publish writes evs to the database's topic in one transaction, as the
// tailer does.
func (f *bootstrapFeed) publish(evs ...*schemas.Event) {
	f.t.Helper()
	topic := kafka.Topics{Prefix: f.p.prefix}.Events(f.db)
	var recs []*kgo.Record
	for _, ev := range evs {
		v, err := f.s.Encode(ev)
		if err != nil {
			f.t.Fatal(err)
		}
		key := fmt.Sprint(ev.EventID)
		if ev.Snapshot != nil && ev.EventType != schemas.EventDiscontinuity {
			key = fmt.Sprintf("snapshot/%s/%d", ev.Snapshot.BootstrapID, ev.Snapshot.Seq)
		}
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(key), Value: v, Headers: []kgo.RecordHeader{
			{Key: kafka.HeaderType, Value: []byte(schemas.NameMetastoreEvent)}, {Key: kafka.HeaderEventID, Value: []byte(fmt.Sprint(ev.EventID))}}})
	}
	ctx := ctxFor(f.t, time.Minute)
	if err := f.tailer.BeginTransaction(); err != nil {
		f.t.Fatal(err)
	}
	if err := f.tailer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		f.t.Fatal(err)
	}
	if err := f.tailer.EndTransaction(ctx, kgo.TryCommit); err != nil {
		f.t.Fatal(err)
	}
}

// drPath is the DR location of a source location (the pipeline's path
// mapping).
func (f *bootstrapFeed) drPath(src string) string {
	l, err := f.p.mapLocation(src)
	if err != nil {
		f.t.Fatal(err)
	}
	return l
}

func drHDFS(t *testing.T, env *testenv.Env) *fs.HDFS {
	_, dr := pipelineFS(t, env)
	return dr
}

// put writes a file on the DR cluster.
func (f *bootstrapFeed) put(dr string) {
	f.t.Helper()
	ctx := ctxFor(f.t, time.Minute)
	data := []byte("1\n2\n")
	w, err := f.drFS.Create(ctx, dr, int64(len(data)))
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		f.t.Fatal(err)
	}
	if err := w.Commit(ctx, crcOf(data)); err != nil {
		f.t.Fatal(err)
	}
}

// copied plays copyd for the records' files: each written on DR, then a
// COPIED completion published.
func (f *bootstrapFeed) copied(evs ...*schemas.Event) {
	f.t.Helper()
	var recs []*kgo.Record
	for _, ev := range evs {
		for _, file := range ev.Files {
			target := f.drPath(file.URI)
			f.put(target)
			v, err := f.s.Encode(&schemas.CopyCompletion{TaskID: file.TaskID, EventID: ev.EventID, Database: f.db,
				SourceURI: file.URI, TargetURI: target, Status: schemas.StatusCopied, Attempts: 1, Length: 4})
			if err != nil {
				f.t.Fatal(err)
			}
			recs = append(recs, &kgo.Record{Topic: kafka.Topics{Prefix: f.p.prefix}.Completions(), Key: []byte(file.TaskID), Value: v,
				Headers: []kgo.RecordHeader{{Key: kafka.HeaderType, Value: []byte(schemas.NameCopyCompletion)}}})
		}
	}
	if len(recs) > 0 {
		if err := f.copyd.ProduceSync(ctxFor(f.t, time.Minute), recs...).FirstErr(); err != nil {
			f.t.Fatal(err)
		}
	}
}

// drFiles lists the files directly under a DR directory (names).
func (f *bootstrapFeed) drFiles(dir string) []string {
	f.t.Helper()
	locs, err := f.drFS.List(ctxFor(f.t, time.Minute), dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		f.t.Fatal(err)
	}
	var out []string
	for _, l := range locs {
		out = append(out, path.Base(l))
	}
	sort.Strings(out)
	return out
}

// withBatch sets applier.batch_partitions in the pipeline's configuration.
func (p *pipeline) withBatch(t *testing.T, n int) {
	t.Helper()
	y, err := os.ReadFile(p.conf)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(y), "\napplier:\n", fmt.Sprintf("\napplier:\n  batch_partitions: %d\n", n), 1)
	if s == string(y) {
		t.Fatal("no applier section in the pipeline's configuration")
	}
	if err := os.WriteFile(p.conf, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// drDatabase reads the DR database (nil when it does not exist).
func drDatabase(t *testing.T, pt *pipelineTest, db string) *hive_metastore.Database {
	d, err := pt.dr.GetDatabase(pt.ctx, db)
	if err != nil {
		return nil
	}
	return d
}

// TestBootstrapApplierBatches applies the same bootstrap (a table of
// bootstrapPartitions partitions) with applier.batch_partitions 1 and
// 1000 and reports both rates, then re-bootstraps the second database
// with changes: the END drops the table and partitions the snapshot no
// longer has, a table's DR directory is pruned to the record's files, and
// the events after the END, chained, apply; the database is converged in
// place, never dropped and created again (the DR metastore's own log).
func TestBootstrapApplierBatches(t *testing.T) {
	const bootstrapPartitions = 600
	env := testenv.Require(t)
	pt := &pipelineTest{ctx: ctxFor(t, 12*time.Minute), src: env.HMS(t, testenv.Source), dr: env.HMS(t, testenv.DR)}
	rates := map[int]float64{}
	var last *bootstrapFeed
	for _, batch := range []int{1, 1000} {
		db := fmt.Sprintf("bapp%d_%s", batch, uniq(t))
		pt.pipeline = newPipeline(t, env, []string{db}, 0)
		pt.withBatch(t, batch)
		f := newBootstrapFeed(t, env, pt.pipeline, db)
		f.start("b1-"+db, 1000)
		tb := f.srcTable("t", "ds")
		gone := f.srcTable("gone")
		recs := []*schemas.Event{f.begin(), f.table(gone, 1000), f.table(tb, 1000)}
		var slice []*schemas.Event
		for i := 1; i <= bootstrapPartitions; i++ {
			slice = append(slice, f.part(tb, fmt.Sprintf("%04d", i), 1000))
		}
		f.publish(recs...)
		f.publish(slice...)
		f.publish(f.end())

		pt.startApply()
		start := time.Now()
		var began time.Time
		// (Polled often: the time is the figure.)
		poll(t, 8*time.Minute, 20*time.Millisecond, db+"'s bootstrap applied on DR", func() bool {
			pt.checkAlive()
			d := drDatabase(t, pt, db)
			if d != nil && began.IsZero() {
				began = time.Now()
			}
			return d != nil && d.Parameters[drparam.BootstrapDone] == f.id
		})
		took := time.Since(began)
		rates[batch] = float64(bootstrapPartitions) / took.Seconds()
		t.Logf("batch_partitions %d: %d partitions applied in %s from the BEGIN (%s from the applier's start): %.0f partitions/s",
			batch, bootstrapPartitions, took.Round(time.Millisecond), time.Since(start).Round(time.Millisecond), rates[batch])
		d := drDatabase(t, pt, db)
		if d.Parameters[drparam.LastID] != "1000" || d.Parameters[drparam.BootstrapID] != "" || d.Parameters["team"] != "bootstrap" ||
			d.Parameters[drparam.Target] != drparam.TargetMark(pt.prefix) {
			t.Errorf("DR database %s: %v", db, d.Parameters)
		}
		names, err := pt.dr.GetPartitionNames(pt.ctx, db, "t", -1)
		if err != nil || len(names) != bootstrapPartitions {
			t.Fatalf("%d partitions of %s.t on DR (%v), want %d", len(names), db, err, bootstrapPartitions)
		}
		metrics := httpGet(t, "http://"+pt.metrics+"/metrics")
		want := fmt.Sprintf(`hivedr_applier_bootstrap_applied_total{db=%q,kind="partitions",pipeline=%q} %d`, db, pt.prefix, bootstrapPartitions)
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s:\n%s", want, grepLines(metrics, "hivedr_applier_bootstrap"))
		}
		if batch == 1 {
			pt.apply.stop(t)
			pt.apply = nil
		}
		last = f
	}
	t.Logf("batching: %.1fx the rate of one partition per call", rates[1000]/rates[1])

	// A re-bootstrap of the second database: gone is no longer at the
	// source, t lost its partitions past 0400 and 0001 has a file, table
	// u is new, and its DR directory holds a file the source does not.
	f, db := last, last.db
	drBefore := currentEventID(t, pt.ctx, pt.dr)
	f.start("b2-"+db, 1100)
	tb, u := f.srcTable("t", "ds"), f.srcTable("u")
	uFiles := []string{u.Location + "/000000_0", u.Location + "/000001_0"}
	f.put(f.drPath(u.Location + "/stale_0"))
	recs := []*schemas.Event{f.begin(), f.table(tb, 1100), f.table(u, 1101, uFiles...)}
	p1 := f.part(tb, "0001", 1101, tb.Location+"/ds=0001/000000_0")
	recs = append(recs, p1)
	for i := 2; i <= 400; i++ {
		recs = append(recs, f.part(tb, fmt.Sprintf("%04d", i), 1101))
	}
	recs = append(recs, f.end())
	f.publish(recs...)
	// After the END: events after the cut, chained to the topic's last
	// event before the bootstrap (none: 0).
	alter := *u
	alter.Parameters = map[string]string{"EXTERNAL": "TRUE", "after": "end"}
	ev := &schemas.Event{EventID: 1102, EventTime: time.Now().Truncate(time.Second), EventType: schemas.EventAlterTable, Database: db, Table: "u",
		Databases: []string{db}, Source: pt.prefix, Payload: &schemas.TableChange{Before: u, After: &alter}, PreviousEventID: new(int64)}
	f.publish(ev)
	f.copied(recs...)

	eventually(t, 5*time.Minute, db+" re-bootstrapped and at event 1102", func() bool {
		pt.checkAlive()
		d := drDatabase(t, pt, db)
		return d != nil && d.Parameters[drparam.LastID] == "1102"
	})
	d := drDatabase(t, pt, db)
	if d.Parameters[drparam.BootstrapDone] != f.id || d.Parameters[drparam.Halted] != "" {
		t.Errorf("DR database %s: %v", db, d.Parameters)
	}
	if pt.drTableExists(db, "gone") {
		t.Error("table gone, which the re-bootstrap does not have, is still on DR")
	}
	names, err := pt.dr.GetPartitionNames(pt.ctx, db, "t", -1)
	if err != nil || len(names) != 400 || names[0] != "ds=0001" || names[len(names)-1] != "ds=0400" {
		t.Errorf("partitions of %s.t after the re-bootstrap: %d (%v), want ds=0001..ds=0400", db, len(names), err)
	}
	res, err := pt.dr.GetTableReq(pt.ctx, &hive_metastore.GetTableRequest{DbName: db, TblName: "u"})
	if err != nil || res.Table.Parameters["after"] != "end" || res.Table.Parameters[drparam.LastID] != "1102" {
		t.Errorf("%s.u after the event following the END: %v", db, err)
	}
	if got := f.drFiles(f.drPath(u.Location)); strings.Join(got, ",") != "000000_0,000001_0" {
		t.Errorf("DR files of %s.u: %v, want the record's two (stale_0 pruned)", db, got)
	}
	if got := f.drFiles(f.drPath(tb.Location + "/ds=0001")); strings.Join(got, ",") != "000000_0" {
		t.Errorf("DR files of %s.t ds=0001: %v", db, got)
	}
	// Converged in place: the DR metastore's own log holds, for the
	// re-bootstrap, no drop and no create of the database; it does hold
	// the drop of table gone (the log covers the re-bootstrap).
	writes := map[schemas.EventType]int{}
	drLogEvents(t, pt.ctx, env, drBefore, db, func(raw hmslog.RawEvent) { writes[raw.EventType]++ })
	t.Logf("the DR metastore's log during the re-bootstrap of %s: %v", db, writes)
	if n := writes[schemas.EventDropDatabase] + writes[schemas.EventCreateDatabase]; n > 0 || writes[schemas.EventDropTable] == 0 {
		t.Errorf("the DR metastore's log during the re-bootstrap of %s: %v; want no DROP_DATABASE or CREATE_DATABASE (converged in place), and gone's DROP_TABLE",
			db, writes)
	}
	// The group committed the topic's end.
	eventually(t, time.Minute, "the applier group at the topic's end", func() bool { return pt.caughtUp(pt.ctx) })
}
