package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/internal/testenv"
	"github.com/hivedr/hivedr/schemas"
)

// workload drives the real source metastore through its Thrift API.
type workload struct {
	t     *testing.T
	ctx   context.Context
	c     *hms.Client
	env   *testenv.Env
	root  string // external root on the source HDFS, hdfs://host:port/external
	files []string
}

func (w *workload) must(what string, err error) {
	w.t.Helper()
	if err != nil {
		w.t.Fatalf("%s: %v", what, err)
	}
}

func (w *workload) createDB(name string) {
	w.must("create database "+name, w.c.CreateDatabase(w.ctx, &hive_metastore.Database{
		Name: name, LocationUri: w.root + "/" + name + ".db", Parameters: map[string]string{}}))
}

func (w *workload) table(db, name string, cols []string, partKeys ...string) *hive_metastore.Table {
	var fs, ps []*hive_metastore.FieldSchema
	for _, c := range cols {
		n, typ, _ := strings.Cut(c, " ")
		fs = append(fs, &hive_metastore.FieldSchema{Name: n, Type: typ})
	}
	for _, k := range partKeys {
		ps = append(ps, &hive_metastore.FieldSchema{Name: k, Type: "string"})
	}
	return &hive_metastore.Table{
		TableName: name, DbName: db, Owner: "hivedr", TableType: "EXTERNAL_TABLE",
		Parameters: map[string]string{"EXTERNAL": "TRUE"}, PartitionKeys: ps,
		Sd: &hive_metastore.StorageDescriptor{
			Cols: fs, Location: w.root + "/" + db + ".db/" + name,
			InputFormat:  "org.apache.hadoop.mapred.TextInputFormat",
			OutputFormat: "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
			SerdeInfo:    &hive_metastore.SerDeInfo{SerializationLib: "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe", Parameters: map[string]string{}},
			Parameters:   map[string]string{},
		},
	}
}

func (w *workload) createTable(tb *hive_metastore.Table) {
	w.must("create table "+tb.DbName+"."+tb.TableName, w.c.CreateTable(w.ctx, tb))
}

// insert writes a data file under loc on the source HDFS and fires the
// INSERT event the way Hive's client does after a load.
func (w *workload) insert(db, table, loc string, partVals []string, replace bool) string {
	w.t.Helper()
	file := loc + "/part-" + uniq(w.t)
	path := strings.TrimPrefix(file, "hdfs://"+w.env.Get(w.t, "HIVEDR_HDFS_SRC_NAMENODE"))
	testenv.WriteHDFS(w.t, w.env.HDFS(w.t, testenv.Source), path, randomBytes(w.t, 4096))
	req := &hive_metastore.FireEventRequest{
		Successful: true, DbName: &db, TableName: &table, PartitionVals: partVals,
		Data: &hive_metastore.FireEventRequestData{InsertData: &hive_metastore.InsertEventRequestData{
			Replace: &replace, FilesAdded: []string{file}, PartitionVal: partVals,
		}},
	}
	_, err := w.c.FireListenerEvent(w.ctx, req)
	w.must("insert into "+db+"."+table, err)
	w.files = append(w.files, file)
	return file
}

// TestTailerThriftWorkload runs DDL and data changes through the real source
// metastore and checks that `hivedr tail` (Thrift source) publishes them to
// the right per-database topics, in event-ID order, with typed payloads,
// copy tasks for their files, heartbeats, and the excluded table filtered;
// Debian's kcat reads the records, and `hivedr cat` prints them as JSON.
func TestTailerThriftWorkload(t *testing.T) {
	env := testenv.Require(t)
	s := serde(t, env)
	ctx := ctxFor(t, 5*time.Minute)
	src := env.HMS(t, testenv.Source)
	start := currentEventID(t, ctx, src)
	u := uniq(t)
	sales, archive, other := "tw_sales_"+u, "tw_archive_"+u, "tw_other_"+u
	w := &workload{t: t, ctx: ctx, c: src, env: env, root: env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL")}

	w.createDB(sales)
	w.createDB(archive)
	w.createDB(other) // out of scope
	orders := w.table(sales, "orders", []string{"id bigint", "amount double"}, "dt")
	w.createTable(orders)
	var parts []*hive_metastore.Partition
	for _, dt := range []string{"2026-12-01", "2026-12-02"} {
		sd := *orders.Sd
		sd.Location = orders.Sd.Location + "/dt=" + dt
		parts = append(parts, &hive_metastore.Partition{Values: []string{dt}, DbName: sales, TableName: "orders", Sd: &sd, Parameters: map[string]string{}})
	}
	_, err := src.AddPartitions(ctx, parts)
	w.must("add partitions", err)
	w.insert(sales, "orders", parts[0].Sd.Location, []string{"2026-12-01"}, false)
	w.insert(sales, "orders", parts[1].Sd.Location, []string{"2026-12-02"}, true)
	customers := w.table(sales, "customers", []string{"id bigint", "name string"})
	w.createTable(customers)
	w.insert(sales, "customers", customers.Sd.Location, nil, false)
	// Alter: add a column.
	customers.Sd.Cols = append(customers.Sd.Cols, &hive_metastore.FieldSchema{Name: "email", Type: "string"})
	w.must("alter customers", src.AlterTable(ctx, sales, "customers", customers))
	// Rename within the database, then across databases.
	renamed := *customers
	renamed.TableName = "clients"
	w.must("rename customers", src.AlterTable(ctx, sales, "customers", &renamed))
	moved := renamed
	moved.DbName = archive
	w.must("move clients to archive", src.AlterTable(ctx, sales, "clients", &moved))
	// Drop and recreate with another schema.
	w.must("drop orders", src.DropTable(ctx, sales, "orders", false))
	w.createTable(w.table(sales, "orders", []string{"order_id string", "total decimal(12,2)", "currency string"}, "dt", "region"))
	// An excluded table churns.
	for i := 0; i < 3; i++ {
		w.createTable(w.table(sales, "tmp_scratch", []string{"x int"}))
		w.must("drop tmp_scratch", src.DropTable(ctx, sales, "tmp_scratch", false))
	}
	w.createTable(w.table(other, "t", []string{"x int"}))
	last := currentEventID(t, ctx, src)

	conf := tailerConf{prefix: "t" + u, source: "thrift", kind: "thrift", start: itoa(start),
		databases: "    - {name: " + sales + ", exclude_tables: [\"tmp_.*\"]}\n    - {name: " + archive + "}"}
	metricsPort := freePort(t)
	conf.metricsAddr = "127.0.0.1:" + itoa(int64(metricsPort))
	p := startHivedr(t, "tailer", "tail", "-config", conf.write(t, env))
	waitCheckpoint(t, env, s, conf, last, p, 2*time.Minute)
	metrics := httpGet(t, "http://127.0.0.1:"+itoa(int64(metricsPort))+"/metrics")
	topics := kafka.Topics{Prefix: conf.prefix}
	// At least one heartbeat follows the last event.
	eventually(t, time.Minute, "a heartbeat on "+topics.Events(sales)+" covering event "+itoa(last), func() bool {
		if p.exited() {
			t.Fatalf("tailer exited early:\n%s", tail(p.out.String(), 40))
		}
		for _, d := range readTopic(t, env, s, topics.Events(sales)) {
			if h, ok := d.value.(*schemas.Heartbeat); ok && h.ScannedEventID >= last {
				return true
			}
		}
		return false
	})
	p.stop(t)

	salesRecs := readTopic(t, env, s, topics.Events(sales))
	salesEvs := events(salesRecs)
	var types []schemas.EventType
	for i, e := range salesEvs {
		if i > 0 && e.EventID <= salesEvs[i-1].EventID {
			t.Fatalf("%s: event %d after %d", sales, e.EventID, salesEvs[i-1].EventID)
		}
		if len(e.Errors) > 0 {
			t.Errorf("event %d %s has errors %+v", e.EventID, e.EventType, e.Errors)
		}
		types = append(types, e.EventType)
		if e.Table == "tmp_scratch" {
			t.Errorf("excluded table event %d %s published", e.EventID, e.EventType)
		}
	}
	wantTypes := []schemas.EventType{schemas.EventCreateDatabase, schemas.EventCreateTable, schemas.EventAddPartition, schemas.EventInsert, schemas.EventInsert, schemas.EventCreateTable, schemas.EventInsert,
		schemas.EventAlterTable, schemas.EventAlterTable, schemas.EventAlterTable, schemas.EventDropTable, schemas.EventCreateTable}
	if !slices.Equal(types, wantTypes) {
		t.Fatalf("%s event types = %v\nwant %v", sales, types, wantTypes)
	}
	// Typed payloads.
	alter := salesEvs[7].Payload.(*schemas.TableChange)
	if n := len(alter.After.Columns); n != 3 || alter.After.Columns[2].Name != "email" {
		t.Errorf("ALTER_TABLE add column: after has columns %+v", alter.After.Columns)
	}
	move := salesEvs[9].Payload.(*schemas.TableChange)
	if move.Before.Database != sales || move.After.Database != archive || !slices.Equal(salesEvs[9].Databases, sortedPair(sales, archive)) {
		t.Errorf("cross-database rename: before %s.%s after %s.%s databases %v", move.Before.Database, move.Before.Name, move.After.Database, move.After.Name, salesEvs[9].Databases)
	}
	recreated := salesEvs[11].Payload.(*schemas.TableChange).After
	if len(recreated.Columns) != 3 || recreated.Columns[0].Name != "order_id" || len(recreated.PartitionKeys) != 2 {
		t.Errorf("recreated orders: columns %+v partition keys %+v", recreated.Columns, recreated.PartitionKeys)
	}
	addp := salesEvs[2].Payload.(*schemas.PartitionChange)
	if len(addp.After) != 2 || addp.After[1].Values[0] != "2026-12-02" {
		t.Errorf("ADD_PARTITION partitions %+v", addp.After)
	}
	if ins := salesEvs[4].Payload.(*schemas.InsertData); !ins.Replace {
		t.Errorf("INSERT OVERWRITE not marked replace")
	}
	// The move reaches the archive topic too, in order with its own events.
	archEvs := events(readTopic(t, env, s, topics.Events(archive)))
	var archTypes []schemas.EventType
	for _, e := range archEvs {
		archTypes = append(archTypes, e.EventType)
	}
	if !slices.Equal(archTypes, []schemas.EventType{schemas.EventCreateDatabase, schemas.EventAlterTable}) || archEvs[1].EventID != salesEvs[9].EventID {
		t.Errorf("%s events = %v", archive, archTypes)
	}
	// Copy tasks: one per inserted file, mapped to the DR cluster.
	tasks := map[string]*schemas.CopyTask{}
	for _, d := range readTopic(t, env, s, topics.Manifests()) {
		if task, ok := d.value.(*schemas.CopyTask); ok {
			tasks[task.SourceURI] = task
		}
	}
	for _, f := range w.files {
		task := tasks[f]
		if task == nil {
			t.Errorf("no copy task for %s", f)
			continue
		}
		wantTarget := strings.Replace(f, env.Get(t, "HIVEDR_HDFS_SRC_NAMENODE"), env.Get(t, "HIVEDR_HDFS_DR_NAMENODE"), 1)
		if task.TargetURI != wantTarget || task.Database != sales {
			t.Errorf("task for %s: target %s db %s, want %s in %s", f, task.TargetURI, task.Database, wantTarget, sales)
		}
	}
	// Heartbeats keep the quiet topic's lag true.
	var hb *schemas.Heartbeat
	for _, d := range salesRecs {
		if h, ok := d.value.(*schemas.Heartbeat); ok {
			hb = h
		}
	}
	if hb == nil || hb.ScannedEventID < last || hb.Database != sales {
		t.Errorf("last heartbeat on %s = %+v, want one covering event %d", sales, hb, last)
	}
	// Metrics count what was filtered, and why.
	for _, want := range []string{
		`hivedr_tailer_events_filtered_total{db="` + sales + `",pipeline="` + conf.prefix + `",reason="table_excluded"} 6`,
		`hivedr_tailer_events_filtered_total{db="` + other + `",pipeline="` + conf.prefix + `",reason="database_out_of_scope"} 2`,
		`hivedr_tailer_state{pipeline="` + conf.prefix + `",state="RUNNING"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	// The last published event ID is a committed checkpoint, last or a
	// later one: the source metastore is shared, and other tests' events
	// may follow ours.
	published := int64(-1)
	for _, l := range strings.Split(metrics, "\n") {
		if v, ok := strings.CutPrefix(l, `hivedr_tailer_last_published_event_id{pipeline="`+conf.prefix+`"} `); ok {
			published, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	committed := false
	for _, d := range readTopic(t, env, s, topics.Checkpoints()) {
		if cp, ok := d.value.(*schemas.TailerCheckpoint); ok && cp.Source == conf.source && cp.LastEventID == published {
			committed = true
		}
	}
	if published < last || !committed {
		t.Errorf("metrics say hivedr_tailer_last_published_event_id %d: want a committed checkpoint at or after event %d", published, last)
	}

	// kcat from Debian reads the same committed records (it has no Avro
	// support, so it shows the Confluent-framed value raw; the key and the
	// type header are plain).
	kcatOut := runCmd(t, env.Get(t, "HIVEDR_KCAT"), "-C", "-b", strings.Join(env.KafkaBrokers(t), ","), "-t", topics.Events(sales),
		"-X", "isolation.level=read_committed", "-o", "beginning", "-e", "-c", "1", "-J")
	var kc struct {
		Key     string   `json:"key"`
		Headers []string `json:"headers"`
		Payload string   `json:"payload"`
	}
	if err := json.Unmarshal([]byte(kcatOut), &kc); err != nil {
		t.Fatalf("kcat -J output is not JSON: %v\n%s", err, kcatOut)
	}
	if kc.Key != itoa(salesEvs[0].EventID) || !slices.Contains(kc.Headers, schemas.NameMetastoreEvent) || !strings.HasPrefix(kc.Payload, "\x00") {
		t.Errorf("kcat record: key %q headers %v payload starts %q", kc.Key, kc.Headers, kc.Payload[:min(5, len(kc.Payload))])
	}
	// hivedr cat decodes them with the writer's schema.
	catOut := runCmd(t, hivedrBin(t), "cat", "-config", conf.write(t, env), "-n", "1", topics.Events(sales))
	var cr struct {
		Type        string `json:"type"`
		PayloadType string `json:"payload_type"`
		Value       struct {
			EventID int64 `json:"event_id"`
		}
	}
	if err := json.Unmarshal([]byte(catOut), &cr); err != nil {
		t.Fatalf("hivedr cat output is not JSON: %v\n%s", err, catOut)
	}
	if cr.Type != schemas.NameMetastoreEvent || cr.PayloadType != "io.hivedr.DatabaseChange" || cr.Value.EventID != salesEvs[0].EventID {
		t.Errorf("hivedr cat printed %s", catOut)
	}
}

func sortedPair(a, b string) []string {
	if a > b {
		a, b = b, a
	}
	return []string{a, b}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// freePort returns a loopback port nothing listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func runCmd(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("%s %v: %v\n%s", name, args, err, stderr)
	}
	return string(out)
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestTailerSourcesAgree publishes the same stretch of the real source
// metastore's log twice, once read through Thrift and once straight from
// its Postgres NOTIFICATION_LOG, and checks both give the same records.
func TestTailerSourcesAgree(t *testing.T) {
	env := testenv.Require(t)
	s := serde(t, env)
	ctx := ctxFor(t, 5*time.Minute)
	src := env.HMS(t, testenv.Source)
	start := currentEventID(t, ctx, src)
	u := uniq(t)
	db := "agree_" + u
	w := &workload{t: t, ctx: ctx, c: src, env: env, root: env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL")}
	w.createDB(db)
	tb := w.table(db, "t", []string{"id bigint", "v string"}, "dt")
	w.createTable(tb)
	sd := *tb.Sd
	sd.Location += "/dt=1"
	_, err := src.AddPartitions(ctx, []*hive_metastore.Partition{{Values: []string{"1"}, DbName: db, TableName: "t", Sd: &sd, Parameters: map[string]string{}}})
	w.must("add partition", err)
	w.insert(db, "t", sd.Location, []string{"1"}, false)
	w.must("drop table", src.DropTable(ctx, db, "t", false))
	last := currentEventID(t, ctx, src)

	got := map[string][]*schemas.Event{}
	for _, kind := range []string{"thrift", "postgres"} {
		c := tailerConf{prefix: "t" + u + kind, source: kind, kind: kind, postgres: env.Get(t, "HIVEDR_POSTGRES_SRC_DSN"),
			start: itoa(start), databases: "    - {name: " + db + "}"}
		p := startHivedr(t, "tailer "+kind, "tail", "-config", c.write(t, env))
		waitCheckpoint(t, env, s, c, last, p, 2*time.Minute)
		p.stop(t)
		got[kind] = events(readTopic(t, env, s, kafka.Topics{Prefix: c.prefix}.Events(db)))
	}
	th, pg := got["thrift"], got["postgres"]
	if len(th) != 5 || len(pg) != len(th) {
		t.Fatalf("thrift published %d events, postgres %d; want 5 each", len(th), len(pg))
	}
	for i := range th {
		a, b := *th[i], *pg[i]
		// The fields meant to differ: the source's name, and which reader
		// of the log (and the name again) its source_info block names.
		a.Source, b.Source = "", ""
		if a.SourceInfo != nil && b.SourceInfo != nil {
			ai, bi := *a.SourceInfo, *b.SourceInfo
			if ai.Reader == bi.Reader {
				t.Errorf("event %d: both tailers say they read the log with %q", a.EventID, ai.Reader)
			}
			ai.Name, bi.Name, ai.Reader, bi.Reader = "", "", "", ""
			a.SourceInfo, b.SourceInfo = &ai, &bi
		}
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		if string(ja) != string(jb) {
			t.Errorf("event %d differs:\nthrift   %s\npostgres %s", th[i].EventID, ja, jb)
		}
	}
}

// TestTailerFencesZombie starts a second tailer with the same configuration
// (the same transactional ID) while the first runs: one of the two (the
// old one, unless the newcomer read the checkpoints while the old was
// committing) must stop with an error instead of writing on, the other
// publishes everything, and no event is written after a newer one.
func TestTailerFencesZombie(t *testing.T) {
	env := testenv.Require(t)
	s := serde(t, env)
	log := newSynthLog(t, env)
	_, last := log.append(t, capturedRows(t))
	c := tailerConf{prefix: "t" + uniq(t), source: "zombie", kind: "postgres", postgres: log.DSN,
		databases: "    - {name: cap_sales}\n    - {name: cap_archive}"}
	cfg := c.write(t, env)
	old := startHivedr(t, "old tailer", "tail", "-config", cfg)
	waitCheckpoint(t, env, s, c, last, old, 2*time.Minute)
	fresh := startHivedr(t, "new tailer", "tail", "-config", cfg)
	_, last = log.append(t, capturedRows(t)) // work for both
	// Exactly one of the two goes on. Usually the new one fences the
	// old; when the new one read the checkpoints while the old was
	// committing a newer one, the old takes over once and the new one
	// stops at its next transaction (docs/tailer.md, one tailer per
	// source).
	var loser, winner *proc
	poll(t, 2*time.Minute, 50*time.Millisecond, "one of the two tailers to stop", func() bool {
		switch {
		case old.exited():
			loser, winner = old, fresh
		case fresh.exited():
			loser, winner = fresh, old
		}
		return loser != nil
	})
	if code := loser.wait(t, time.Minute); code != 1 {
		t.Fatalf("fenced %s exited %d, want 1", loser.name, code)
	}
	if out := loser.out.String(); !strings.Contains(strings.ToUpper(out), "FENCED") && !strings.Contains(out, "INVALID_PRODUCER_EPOCH") {
		t.Errorf("fenced %s does not say it was fenced:\n%s", loser.name, tail(out, 10))
	}
	t.Logf("the %s stopped, the %s went on", loser.name, winner.name)
	waitCheckpoint(t, env, s, c, last, winner, 2*time.Minute)
	if winner.exited() {
		t.Fatalf("both tailers stopped:\n%s", tail(winner.out.String(), 10))
	}
	winner.stop(t)
	ids := events(readTopic(t, env, s, kafka.Topics{Prefix: c.prefix}.Events("cap_sales")))
	for i := 1; i < len(ids); i++ {
		if ids[i].EventID <= ids[i-1].EventID {
			t.Fatalf("event %d after %d: a zombie wrote after being fenced", ids[i].EventID, ids[i-1].EventID)
		}
	}
}
