package e2e

import (
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/beltran/gohive/hive_metastore"
	"github.com/twmb/franz-go/pkg/kgo"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/internal/testenv"
	"github.com/hivedr/hivedr/schemas"
)

// The tailer's half of bootstrap on the real stack: a source database
// that existed before the pipeline started is brought to DR by a
// BootstrapRequest on the control topic (as `hivedr bootstrap` writes
// it), through the real tailer, copyd and applier.

// bootstrapSource creates db on the source with external tables
// (partitioned with one and two keys, and not) and a managed one, all
// with files.
func bootstrapSource(t *testing.T, env *testenv.Env, pt *pipelineTest, db string, parts int) {
	t.Helper()
	ctx, w := pt.ctx, pt.w
	if err := w.CreateDatabase(ctx, db); err != nil {
		t.Fatal(err)
	}
	for _, tb := range []struct {
		name string
		spec wl.TableSpec
	}{
		{"orders", wl.TableSpec{Columns: []string{"id bigint", "amount double"}, PartitionKeys: []string{"dt"}}},
		{"events", wl.TableSpec{Columns: []string{"id bigint"}, PartitionKeys: []string{"dt", "region"}}},
		{"accounts", wl.TableSpec{Columns: []string{"id bigint", "owner string"}}},
		{"empty", wl.TableSpec{Columns: []string{"id bigint"}, PartitionKeys: []string{"dt"}}},
	} {
		if err := w.CreateTable(ctx, db, tb.name, tb.spec); err != nil {
			t.Fatal(err)
		}
	}
	var vals, vals2 [][]string
	for i := range parts {
		vals = append(vals, []string{fmt.Sprintf("2026-11-%03d", i)})
		if i%3 == 0 {
			vals2 = append(vals2, []string{fmt.Sprintf("2026-11-%03d", i), []string{"eu", "us"}[i%2]})
		}
	}
	if _, err := w.AddPartitions(ctx, db, "orders", vals, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := w.AddPartitions(ctx, db, "events", vals2, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Insert(ctx, db, "accounts", nil, 7); err != nil {
		t.Fatal(err)
	}
	// A managed table, written as Hive would: its directory under the
	// warehouse with a data file.
	loc := env.Get(t, "HIVEDR_HMS_SRC_WAREHOUSE") + "/" + db + ".db/managed"
	if err := pt.src.CreateTable(ctx, &hive_metastore.Table{TableName: "managed", DbName: db, Owner: "hivedr", TableType: "MANAGED_TABLE",
		Parameters: map[string]string{},
		Sd: &hive_metastore.StorageDescriptor{Cols: []*hive_metastore.FieldSchema{{Name: "id", Type: "bigint"}}, Location: loc,
			InputFormat: "org.apache.hadoop.mapred.TextInputFormat", OutputFormat: "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
			SerdeInfo: &hive_metastore.SerDeInfo{SerializationLib: "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe",
				Parameters: map[string]string{"serialization.format": "1"}}, Parameters: map[string]string{}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Insert(ctx, db, "managed", nil, 5); err != nil {
		t.Fatal(err)
	}
}

// requestBootstrap writes a BootstrapRequest to the pipeline's control
// topic, as `hivedr bootstrap` does.
func requestBootstrap(t *testing.T, p *pipeline, req schemas.BootstrapRequest) {
	t.Helper()
	if req.Source == "" {
		req.Source = p.cfg.Source.Name
	}
	req.RequestedBy, req.RequestedAt = "e2e@test", time.Now().Truncate(time.Millisecond)
	v, err := serde(t, p.env).Encode(&req)
	if err != nil {
		t.Fatal(err)
	}
	topic := kafka.Topics{Prefix: p.prefix}.Control()
	rec := &kgo.Record{Topic: topic, Key: []byte(req.RequestID), Value: v,
		Headers: []kgo.RecordHeader{{Key: kafka.HeaderType, Value: []byte(schemas.NameBootstrapRequest)}}}
	// The tailer creates the topic when it starts.
	eventually(t, time.Minute, "the control topic "+topic, func() bool {
		td, err := p.env.KafkaAdmin(t).ListTopics(ctxFor(t, 10*time.Second), topic)
		return err == nil && td.Error() == nil
	})
	if err := p.env.Kafka(t).ProduceSync(ctxFor(t, time.Minute), rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// newestCheckpoint is the source's newest committed checkpoint (nil when
// none).
func newestCheckpoint(t *testing.T, p *pipeline, s *schemas.Serde, source string) *schemas.TailerCheckpoint {
	t.Helper()
	topic := kafka.Topics{Prefix: p.prefix}.Checkpoints()
	if td, err := p.env.KafkaAdmin(t).ListTopics(ctxFor(t, 30*time.Second), topic); err != nil || td.Error() != nil {
		return nil
	}
	return checkpointBefore(t, p, s, source, time.Time{})
}

// bootstrapOf is db's bootstrap in cp (nil when none).
func bootstrapOf(cp *schemas.TailerCheckpoint, db string) *schemas.BootstrapState {
	if cp == nil {
		return nil
	}
	for i := range cp.Bootstraps {
		if cp.Bootstraps[i].Database == db {
			return &cp.Bootstraps[i]
		}
	}
	return nil
}

// waitBootstrapped waits until the pipeline's tailer has taken a request
// and db has no bootstrap left in its checkpoint (caught up).
func waitBootstrapped(t *testing.T, p *pipeline, s *schemas.Serde, db string, d time.Duration) {
	t.Helper()
	eventually(t, d, db+"'s bootstrap taken and caught up", func() bool {
		p.checkAlive()
		cp := newestCheckpoint(t, p, s, p.cfg.Source.Name)
		// (The request is taken in the transaction that starts it.)
		return cp != nil && cp.RequestsOffset > 0 && bootstrapOf(cp, db) == nil
	})
}

// snapshotRecords checks the bootstrap records on db's topic: each seq
// once, no table twice, and returns how many tables and partitions the
// END counts and how far past the cut the stamps went (how much the
// source changed while the snapshot was read).
func snapshotRecords(t *testing.T, p *pipeline, s *schemas.Serde, db string) (tables, parts, past int64) {
	t.Helper()
	seen := map[int64]bool{}
	tableSeen := map[string]bool{}
	var end *schemas.SnapshotInfo
	for _, ev := range events(readTopic(t, p.env, s, kafka.Topics{Prefix: p.prefix}.Events(db))) {
		if ev.Snapshot == nil || ev.EventType == schemas.EventDiscontinuity {
			continue
		}
		if seen[ev.Snapshot.Seq] {
			t.Errorf("bootstrap record %d of %s published twice", ev.Snapshot.Seq, ev.Snapshot.BootstrapID)
		}
		seen[ev.Snapshot.Seq] = true
		past = max(past, ev.Snapshot.StampEventID-ev.Snapshot.CutEventID)
		switch ev.EventType {
		case schemas.EventSnapshotTable:
			if tableSeen[ev.Table] {
				t.Errorf("table %s published twice (re-listed)", ev.Table)
			}
			tableSeen[ev.Table] = true
		case schemas.EventSnapshotEnd:
			end = ev.Snapshot
		}
	}
	if end == nil {
		t.Fatalf("no END on %s's topic", db)
	}
	if int64(len(seen)) != end.Seq {
		t.Errorf("%d bootstrap records, END's seq %d", len(seen), end.Seq)
	}
	return end.TableCount, end.PartitionCount, past
}

// writer runs workload steps on db until stopped: adds partitions,
// inserts, overwrites, renames and drops, as a live source does. It
// records what it did, so that a test bounds what a snapshot taken while
// it ran holds by that record, not by a guess of its pace.
type writer struct {
	stop chan struct{}
	done chan error
	n    atomic.Int64 // steps started
	// Done by the writer's goroutine; read only after finish.
	added   int64 // partitions of orders added
	dropped int64 // partitions of orders dropped
	renamed int64 // renames of accounts to accounts_r (and back)
}

func (w *writer) steps() int64 { return w.n.Load() }

func startWriter(t *testing.T, pt *pipelineTest, db string) *writer {
	w := &writer{stop: make(chan struct{}), done: make(chan error, 1)}
	rng := testRand(t)
	go func() {
		ctx, s := pt.ctx, pt.w
		var err error
		for i := 0; err == nil; i++ {
			select {
			case <-w.stop:
				w.done <- nil
				return
			default:
			}
			w.n.Add(1)
			switch i % 6 {
			case 0:
				if _, err = s.AddPartitions(ctx, db, "orders", [][]string{{fmt.Sprintf("2027-01-%03d", i)}}, 2); err == nil {
					w.added++
				}
			case 1:
				_, err = s.Insert(ctx, db, "orders", []string{fmt.Sprintf("2026-11-%03d", rng.IntN(10))}, 3)
			case 2:
				_, err = s.InsertOverwrite(ctx, db, "accounts", nil, 4+i%5)
			case 3:
				// Counted once the first rename is done: the table has had
				// the second name from then on.
				err = s.RenameTable(ctx, db, "accounts", "accounts_r")
				if err == nil {
					w.renamed++
					err = s.RenameTable(ctx, db, "accounts_r", "accounts")
				}
			case 4:
				// Twenty of the source's partitions (bootstrapSource's
				// 2026-11-020 to -039), then the one added four steps ago:
				// every drop names a partition that exists, however long
				// the writer runs.
				v := fmt.Sprintf("2027-01-%03d", i-4)
				if k := 20 + i/6; k < 40 {
					v = fmt.Sprintf("2026-11-%03d", k)
				}
				if err = s.DropPartitions(ctx, db, "orders", [][]string{{v}}, true); err == nil {
					w.dropped++
				}
			case 5:
				err = s.AlterTableAddColumn(ctx, db, "events", fmt.Sprintf("c%d string", i))
			}
		}
		w.done <- err
	}()
	return w
}

func (w *writer) finish(t *testing.T) {
	t.Helper()
	close(w.stop)
	if err := <-w.done; err != nil {
		t.Fatalf("writer: %v", err)
	}
	t.Logf("the writer ran %d steps during the bootstrap: %d partitions added, %d dropped, %d renames", w.steps(), w.added, w.dropped, w.renamed)
}

// checkSnapshotCounts checks the END's counts of a snapshot of a source
// of tables tables and parts partitions taken while w ran (after
// w.finish): every table, one more when the writer renamed accounts (a
// table renamed while the snapshot lists the database is published
// under each name a listing found it by; published tables are kept by
// name, so accounts_r at most once), and the partitions give or take
// those the writer added and dropped.
func checkSnapshotCounts(t *testing.T, w *writer, gotTables, gotParts, tables, parts int64) {
	t.Helper()
	maxTables := tables + min(w.renamed, 1)
	if gotTables < tables || gotTables > maxTables {
		t.Errorf("END counts %d tables; want %d to %d (the writer renamed a table %d times)", gotTables, tables, maxTables, w.renamed)
	}
	if least, most := parts-w.dropped, parts+w.added; gotParts < least || gotParts > most {
		t.Errorf("END counts %d partitions; want %d to %d (%d on the source, %d added and %d dropped by the writer)",
			gotParts, least, most, parts, w.added, w.dropped)
	}
}

// TestBootstrapTailer: a database that predates the pipeline is
// bootstrapped on request while a writer keeps changing it; after the
// catch-up DR equals the source, and the events after the bootstrap
// keep applying.
func TestBootstrapTailer(t *testing.T) {
	u := uniq(t)
	db := "bt_sales_" + u
	env := testenv.Require(t)
	pt := &pipelineTest{ctx: ctxFor(t, 15*time.Minute), src: env.HMS(t, testenv.Source), dr: env.HMS(t, testenv.DR)}
	pt.srcFS, pt.drFS = pipelineFS(t, env)
	pt.w = wl.NewSource(pt.src, pt.srcFS, env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL"))
	bootstrapSource(t, env, pt, db, 60)
	pt.pipeline = newPipeline(t, env, []string{db}, currentEventID(t, pt.ctx, pt.src))
	pt.setTailer(t, "bootstrap_page: 5")
	pt.startAll()
	s := serde(t, env)

	requestBootstrap(t, pt.pipeline, schemas.BootstrapRequest{RequestID: "r-" + u, Databases: []string{"bt_sales_*"}})
	// The writer runs from the request to the end of the catch-up, and
	// every kind of its steps at least twice.
	w := startWriter(t, pt, db)
	waitBootstrapped(t, pt.pipeline, s, db, 5*time.Minute)
	eventually(t, 5*time.Minute, "the writer's first 12 steps", func() bool { return w.steps() >= 12 })
	w.finish(t)
	tables, parts, past := snapshotRecords(t, pt.pipeline, s, db)
	t.Logf("bootstrap: %d tables, %d partitions; stamps up to %d events past the cut", tables, parts, past)
	// bootstrapSource's 60 partitions of orders and 20 of events.
	checkSnapshotCounts(t, w, tables, parts, 5, 80)
	if past == 0 {
		t.Error("no record stamped past the cut: the writer changed nothing while the snapshot was read")
	}
	pt.converge(pt.ctx, pt.src, pt.dr, pt.srcFS, pt.drFS, 5*time.Minute)

	// After it: events apply as before.
	if _, err := pt.w.AddPartitions(pt.ctx, db, "orders", [][]string{{"2028-01-01"}}, 2); err != nil {
		t.Fatal(err)
	}
	pt.converge(pt.ctx, pt.src, pt.dr, pt.srcFS, pt.drFS, 3*time.Minute)
	d := drDatabase(t, pt, db)
	if d == nil || !strings.HasPrefix(d.Parameters[drparam.BootstrapDone], db+"-") {
		t.Errorf("DR database %s: %v", db, d)
	}
}

// setTailer adds lines to the pipeline configuration's tailer section.
func (p *pipeline) setTailer(t *testing.T, lines ...string) {
	t.Helper()
	y, err := os.ReadFile(p.conf)
	if err != nil {
		t.Fatal(err)
	}
	add := ""
	for _, l := range lines {
		add += "  " + l + "\n"
	}
	s := strings.Replace(string(y), "\ntailer:\n", "\ntailer:\n"+add, 1)
	if s == string(y) {
		t.Fatal("no tailer section in the pipeline's configuration")
	}
	if err := os.WriteFile(p.conf, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestBootstrapTailerKill9: the tailer is killed (SIGKILL) once its
// checkpoint shows the bootstrap past a point, and restarted: it
// completes the bootstrap from its last committed page, publishing no
// record nor table twice, reading from the source metastore no table it
// had finished and no partition it had published (checkResumeReads), and
// DR equals the source.
func TestBootstrapTailerKill9(t *testing.T) {
	u := uniq(t)
	db := "btk_sales_" + u
	env := testenv.Require(t)
	pt := &pipelineTest{ctx: ctxFor(t, 15*time.Minute), src: env.HMS(t, testenv.Source), dr: env.HMS(t, testenv.DR)}
	pt.srcFS, pt.drFS = pipelineFS(t, env)
	pt.w = wl.NewSource(pt.src, pt.srcFS, env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL"))
	bootstrapSource(t, env, pt, db, 120)
	pt.pipeline = newPipeline(t, env, []string{db}, currentEventID(t, pt.ctx, pt.src))
	const page = 5
	pt.setTailer(t, fmt.Sprintf("bootstrap_page: %d", page))
	pt.startAll()
	s := serde(t, env)
	rng := testRand(t)
	requestBootstrap(t, pt.pipeline, schemas.BootstrapRequest{RequestID: "r-" + u, Databases: []string{db}})

	threshold := int64(20 + rng.IntN(60))
	var at *schemas.BootstrapState
	poll(t, 5*time.Minute, 5*time.Millisecond, fmt.Sprintf("the bootstrap past record %d", threshold), func() bool {
		pt.checkAlive()
		at = bootstrapOf(newestCheckpoint(t, pt.pipeline, s, pt.cfg.Source.Name), db)
		return at != nil && at.Seq > threshold
	})
	pt.tail.kill9()
	t.Logf("tailer killed with the bootstrap past record %d (table %q, partition %q)", at.Seq, at.DoneTable, at.DonePartition)
	restart := time.Now()
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	pt.tail = startHivedr(t, "tail", "tail", "-config", pt.conf, "-metrics-addr", metricsAddr)
	var m map[string]float64
	eventually(t, 5*time.Minute, db+"'s bootstrap caught up after the restart", func() bool {
		pt.checkAlive()
		cp := newestCheckpoint(t, pt.pipeline, s, pt.cfg.Source.Name)
		if cp == nil || bootstrapOf(cp, db) != nil {
			return false
		}
		var ok bool
		m, ok = scrape("http://" + metricsAddr + "/metrics")
		return ok
	})
	// What the restarted tailer read from the source metastore, against
	// what the killed one had left (the records published twice are
	// counted below).
	checkResumeReads(t, m, bootstrapOf(checkpointBefore(t, pt.pipeline, s, pt.cfg.Source.Name, restart), db),
		events(readTopic(t, pt.env, s, kafka.Topics{Prefix: pt.prefix}.Events(db))), db, page)
	tables, parts, _ := snapshotRecords(t, pt.pipeline, s, db)
	if tables != 5 || parts != 160 {
		t.Errorf("END counts %d tables and %d partitions; want 5 and 160", tables, parts)
	}
	pt.converge(pt.ctx, pt.src, pt.dr, pt.srcFS, pt.drFS, 5*time.Minute)
}

// TestBootstrapTailerDiscontinuity: a replicated database whose tailer
// state is lost (a fresh source name, started past events it never
// published) gets a discontinuity marker; the applier halts it
// needs_bootstrap and `hivedr status` says so (exit 1, not caught up over
// the hole); a bootstrap requested of the new tailer brings DR back to
// the source, and status says ok.
func TestBootstrapTailerDiscontinuity(t *testing.T) {
	u := uniq(t)
	db := "btd_sales_" + u
	pt := startPipeline(t, 15*time.Minute, db)
	s := serde(t, pt.env)
	ctx, w := pt.ctx, pt.w
	if err := w.CreateDatabase(ctx, db); err != nil {
		t.Fatal(err)
	}
	if err := w.CreateTable(ctx, db, "orders", wl.TableSpec{Columns: []string{"id bigint"}, PartitionKeys: []string{"dt"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.AddPartitions(ctx, db, "orders", [][]string{{"a"}, {"b"}}, 2); err != nil {
		t.Fatal(err)
	}
	pt.converge(ctx, pt.src, pt.dr, pt.srcFS, pt.drFS, 3*time.Minute)
	pt.tail.stop(t)
	pt.tail = nil
	// Lost while no tailer runs: these never reach the topic.
	if _, err := w.AddPartitions(ctx, db, "orders", [][]string{{"c"}, {"d"}}, 2); err != nil {
		t.Fatal(err)
	}
	start := currentEventID(t, ctx, pt.src)
	y, err := os.ReadFile(pt.conf)
	if err != nil {
		t.Fatal(err)
	}
	fresh := pt.prefix + "-fresh"
	conf := strings.Replace(string(y), "  name: "+pt.prefix+"\n", "  name: "+fresh+"\n", 1)
	conf = strings.Replace(conf, fmt.Sprintf("start_event_id: \"%d\"", pt.start), fmt.Sprintf("start_event_id: \"%d\"", start), 1)
	if conf == string(y) {
		t.Fatal("could not rename the source in the pipeline's configuration")
	}
	freshConf := writeFile(t, "pipeline-fresh.yaml", conf)
	pt.tail = startHivedr(t, "tail", "tail", "-config", freshConf)
	eventually(t, 3*time.Minute, db+" halted needs_bootstrap", func() bool {
		pt.checkAlive()
		d := drDatabase(t, pt, db)
		return d != nil && strings.Contains(d.Parameters[drparam.Halted], "needs_bootstrap")
	})
	var marker *schemas.Event
	for _, ev := range events(readTopic(t, pt.env, s, kafka.Topics{Prefix: pt.prefix}.Events(db))) {
		if ev.EventType == schemas.EventDiscontinuity {
			marker = ev
		}
	}
	if marker == nil || marker.EventID != start || marker.Snapshot == nil || marker.Snapshot.CutEventID != start {
		t.Fatalf("discontinuity marker %+v, want one at event %d", marker, start)
	}
	// `hivedr status` (of the new tailer's configuration) does not call the
	// replica caught up over the hole: halted needs_bootstrap, exit 1.
	if row, code := dbStatus(t, freshConf, db); code != 1 || row.State != "halted" || !strings.Contains(row.Halted, "needs_bootstrap") {
		t.Errorf("hivedr status of %s before the bootstrap: exit %d, state %q, halted %q; want exit 1, halted, needs_bootstrap",
			db, code, row.State, row.Halted)
	}
	requestBootstrap(t, pt.pipeline, schemas.BootstrapRequest{RequestID: "r-" + u, Source: fresh, Databases: []string{db}})
	// The DR already equals the source (the first pipeline replicated it),
	// so convergence alone says nothing: wait for the bootstrap's END to be
	// applied first.
	eventually(t, 5*time.Minute, db+" bootstrapped on DR", func() bool {
		d := drDatabase(t, pt, db)
		return d != nil && strings.HasPrefix(d.Parameters[drparam.BootstrapDone], db+"-")
	})
	pt.converge(ctx, pt.src, pt.dr, pt.srcFS, pt.drFS, 5*time.Minute)
	d := drDatabase(t, pt, db)
	if d == nil || d.Parameters[drparam.Halted] != "" || !strings.HasPrefix(d.Parameters[drparam.BootstrapDone], db+"-") {
		t.Errorf("DR database %s after the bootstrap: %v", db, d)
	}
	// And now status says ok.
	eventually(t, 2*time.Minute, "hivedr status of "+db+" ok after the bootstrap", func() bool {
		pt.checkAlive()
		row, code := dbStatus(t, freshConf, db)
		return code == 0 && row.State == "ok" && row.Halted == "" && row.Bootstrap == nil
	})
}

// TestBootstrapTailerScale bootstraps a database of 50 tables (managed and
// external, partitioned and not) and 2,000 partitions, 550 of them with
// a file (bootstrapSource's orders and events, and 8 tables of 50),
// while a writer keeps changing it, and reports how long the tailer took
// to publish the snapshot and the pipeline to converge.
func TestBootstrapTailerScale(t *testing.T) {
	const tables, partitioned, perTable, withFiles = 50, 40, 50, 8
	// bootstrapSource gives orders ordersParts partitions and events one
	// in three of them: with the 37 other partitioned tables' (empty has
	// none), 2,000.
	const ordersParts = 112
	const partitions = ordersParts + (ordersParts+2)/3 + (partitioned-3)*perTable
	u := uniq(t)
	db := "bts_sales_" + u
	env := testenv.Require(t)
	pt := &pipelineTest{ctx: ctxFor(t, 25*time.Minute), src: env.HMS(t, testenv.Source), dr: env.HMS(t, testenv.DR)}
	pt.srcFS, pt.drFS = pipelineFS(t, env)
	pt.w = wl.NewSource(pt.src, pt.srcFS, env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL"))
	made := time.Now()
	bootstrapSource(t, env, pt, db, ordersParts) // orders (the writer's), events, accounts, empty, managed
	for i := range tables - 5 {
		name := fmt.Sprintf("t%02d", i)
		spec := wl.TableSpec{Columns: []string{"id bigint", "v string"}}
		if i < partitioned-3 {
			spec.PartitionKeys = []string{"dt"}
		}
		if err := pt.w.CreateTable(pt.ctx, db, name, spec); err != nil {
			t.Fatal(err)
		}
		if len(spec.PartitionKeys) == 0 {
			if _, err := pt.w.Insert(pt.ctx, db, name, nil, 2); err != nil {
				t.Fatal(err)
			}
			continue
		}
		var vals [][]string
		for j := range perTable {
			vals = append(vals, []string{fmt.Sprintf("d%04d", j)})
		}
		rows := 0
		if i < withFiles {
			rows = 1
		}
		for k := 0; k < len(vals); k += 500 {
			if _, err := pt.w.AddPartitions(pt.ctx, db, name, vals[k:min(k+500, len(vals))], rows); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Counted on the source, as made.
	names, err := pt.src.GetAllTables(pt.ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	onSource := 0
	for _, name := range names {
		ps, err := pt.src.GetPartitionNames(pt.ctx, db, name, -1)
		if err != nil {
			t.Fatal(err)
		}
		onSource += len(ps)
	}
	t.Logf("source database made in %s: %d tables, %d partitions", time.Since(made).Round(time.Second), len(names), onSource)
	if len(names) != tables || onSource != partitions || partitions != 2000 {
		t.Fatalf("the source database has %d tables and %d partitions; want %d and %d (2,000)", len(names), onSource, tables, partitions)
	}
	pt.pipeline = newPipeline(t, env, []string{db}, currentEventID(t, pt.ctx, pt.src))
	pt.startAll()
	s := serde(t, env)

	start := time.Now()
	requestBootstrap(t, pt.pipeline, schemas.BootstrapRequest{RequestID: "r-" + u, Databases: []string{db}})
	w := startWriter(t, pt, db)
	var snapshot time.Duration
	eventually(t, 10*time.Minute, db+"'s snapshot published", func() bool {
		pt.checkAlive()
		cp := newestCheckpoint(t, pt.pipeline, s, pt.cfg.Source.Name)
		b := bootstrapOf(cp, db)
		if cp != nil && cp.RequestsOffset > 0 && (b == nil || b.Phase == schemas.PhaseCatchup) {
			snapshot = time.Since(start)
			return true
		}
		return false
	})
	waitBootstrapped(t, pt.pipeline, s, db, 5*time.Minute)
	w.finish(t)
	n, parts, past := snapshotRecords(t, pt.pipeline, s, db)
	checkSnapshotCounts(t, w, n, parts, tables, partitions)
	pt.converge(pt.ctx, pt.src, pt.dr, pt.srcFS, pt.drFS, 15*time.Minute)
	took := time.Since(start)
	t.Logf("bootstrap of %d tables, %d partitions: snapshot published in %s (%.0f partitions/s; stamps up to %d events past the cut), "+
		"DR equal to the source %s after the request (%.0f partitions/s end to end)",
		n, parts, snapshot.Round(time.Millisecond), float64(parts)/snapshot.Seconds(), past, took.Round(time.Second), float64(parts)/took.Seconds())
}

// TestBootstrapTailerEnteredScope: a table with files, created under an
// excluded name (tmp_*) and renamed into the scope while the pipeline
// runs, is bootstrapped on its own by the tailer (the applier's
// enters_scope halt ends at its BEGIN), and DR equals the source.
func TestBootstrapTailerEnteredScope(t *testing.T) {
	u := uniq(t)
	db := "bte_sales_" + u
	pt := startPipeline(t, 10*time.Minute, db)
	s := serde(t, pt.env)
	ctx, w := pt.ctx, pt.w
	if err := w.CreateDatabase(ctx, db); err != nil {
		t.Fatal(err)
	}
	spec := wl.TableSpec{Columns: []string{"id bigint"}, PartitionKeys: []string{"dt"}}
	if err := w.CreateTable(ctx, db, "tmp_staging", spec); err != nil {
		t.Fatal(err)
	}
	if _, err := w.AddPartitions(ctx, db, "tmp_staging", [][]string{{"a"}, {"b"}, {"c"}}, 3); err != nil {
		t.Fatal(err)
	}
	if err := w.RenameTable(ctx, db, "tmp_staging", "staging"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.AddPartitions(ctx, db, "staging", [][]string{{"d"}}, 3); err != nil {
		t.Fatal(err)
	}
	pt.converge(ctx, pt.src, pt.dr, pt.srcFS, pt.drFS, 4*time.Minute)
	var begin *schemas.SnapshotInfo
	for _, ev := range events(readTopic(t, pt.env, s, kafka.Topics{Prefix: pt.prefix}.Events(db))) {
		if ev.EventType == schemas.EventSnapshotBegin {
			begin = ev.Snapshot
		}
	}
	if begin == nil || begin.Reason != "entered_scope" || strings.Join(begin.Tables, ",") != "staging" {
		t.Errorf("the table-scoped bootstrap's BEGIN: %+v", begin)
	}
}
