package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/beltran/gohive/hive_metastore"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/internal/testenv"
	"github.com/hivedr/hivedr/schemas"
)

// pipeline is a test's own tailer, copy daemon and applier, on topics,
// groups and databases of its own, as three separate processes.
type pipeline struct {
	t       *testing.T
	env     *testenv.Env
	prefix  string
	conf    string
	cfg     *config.Config
	dbs     []string
	start   int64 // the source event the tailer starts after
	state   string
	metrics string // the applier's metrics address

	tail, copyd, apply *proc
}

// pipelineDR is what options of newPipeline may change: the DR cluster's
// filesystems.hdfs entry (a YAML flow mapping) and the path mapping's
// target. By default both address the DR NameNode as the stack
// lists it; TestLocationAliases spells them otherwise.
type pipelineDR struct {
	filesystem, target string
}

func newPipeline(t *testing.T, env *testenv.Env, dbs []string, start int64, opts ...func(*pipelineDR)) *pipeline {
	t.Helper()
	u := uniq(t)
	p := &pipeline{t: t, env: env, prefix: "p" + u, dbs: dbs, start: start, state: t.TempDir(),
		metrics: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
	src := "hdfs://" + env.Get(t, "HIVEDR_HDFS_SRC_NAMENODE")
	dr := "hdfs://" + env.Get(t, "HIVEDR_HDFS_DR_NAMENODE")
	drConf := pipelineDR{target: dr + "/", filesystem: fmt.Sprintf("{namenodes: [%s], webhdfs: %s, user: hivedr}",
		env.Get(t, "HIVEDR_HDFS_DR_NAMENODE"), env.Get(t, "HIVEDR_HDFS_DR_HTTP"))}
	for _, o := range opts {
		o(&drConf)
	}
	var scope strings.Builder
	for _, db := range dbs {
		fmt.Fprintf(&scope, "    - {name: %s, exclude_tables: [\"tmp_.*\"]}\n", db)
	}
	y := strings.NewReplacer(
		"$DRFS", drConf.filesystem, "$DRTARGET", drConf.target,
		"$PREFIX", p.prefix, "$HMSSRC", env.Get(t, "HIVEDR_HMS_SRC"), "$HMSDR", env.Get(t, "HIVEDR_HMS_DR"),
		"$BROKERS", strings.Join(env.KafkaBrokers(t), ","), "$REGISTRY", env.Get(t, "HIVEDR_SCHEMA_REGISTRY"),
		"$START", fmt.Sprint(start), "$METRICS", p.metrics,
		"$SRCNN", env.Get(t, "HIVEDR_HDFS_SRC_NAMENODE"), "$SRCWEB", env.Get(t, "HIVEDR_HDFS_SRC_HTTP"),
		"$DRNN", env.Get(t, "HIVEDR_HDFS_DR_NAMENODE"), "$DRWEB", env.Get(t, "HIVEDR_HDFS_DR_HTTP"),
		"$DATABASES", scope.String(), "$SRC", src, "$DR", dr,
	).Replace(`
source:
  name: $PREFIX
  kind: thrift
  metastore: $HMSSRC
kafka:
  brokers: [$BROKERS]
  topic_prefix: $PREFIX
  replication_factor: 1
  manifest_partitions: 3
schema_registry: $REGISTRY
tailer:
  batch_size: 200
  poll_interval: 200ms
  heartbeat_interval: 2s
  start_event_id: "$START"
  metrics_addr: ""
copyd:
  group: $PREFIX-copyd
  instance: $PREFIX
  workers: 4
  retries: 2
  metrics_addr: ""
  cm_roots: ["$SRC/cmroot/"]
applier:
  group: $PREFIX-applier
  metastore: $HMSDR
  halt_after: 30s
  metrics_addr: "$METRICS"
filesystems:
  hdfs:
    - {namenodes: [$SRCNN], webhdfs: $SRCWEB, user: hivedr}
    - $DRFS
replication:
  databases:
$DATABASES
  source_roots: ["$SRC/warehouse", "$SRC/external"]
  path_mappings:
    - {source: "$SRC/", target: "$DRTARGET"}
`)
	p.conf = writeFile(t, "pipeline.yaml", y)
	cfg, err := config.Load(p.conf)
	if err != nil {
		t.Fatal(err)
	}
	p.cfg = cfg
	return p
}

func (p *pipeline) startTail() {
	p.tail = startHivedr(p.t, "tail", "tail", "-config", p.conf)
}

func (p *pipeline) startCopyd() {
	p.copyd = startHivedr(p.t, "copyd", "copyd", "-config", p.conf, "-state-dir", filepath.Join(p.state, "copyd"))
}

func (p *pipeline) startApply(extra ...string) {
	args := append([]string{"apply", "-config", p.conf, "-state-dir", filepath.Join(p.state, "applier")}, extra...)
	p.apply = startHivedr(p.t, "apply", args...)
}

func (p *pipeline) startAll() {
	p.startTail()
	p.startCopyd()
	p.startApply()
}

// checkAlive fails the test if a daemon exited.
func (p *pipeline) checkAlive() {
	p.t.Helper()
	for _, pr := range []*proc{p.tail, p.copyd, p.apply} {
		if pr != nil && pr.exited() {
			p.t.Fatalf("%s exited early:\n%s", pr.name, tail(pr.out.String(), 60))
		}
	}
}

func (p *pipeline) mapLocation(s string) (string, error) { return p.cfg.Replication.MapPath(s) }

// files returns the source and DR HDFS as the workload package reads them.
func pipelineFS(t *testing.T, env *testenv.Env) (src, dr *fs.HDFS) {
	t.Helper()
	mk := func(nn, web string) *fs.HDFS {
		h, err := fs.NewHDFS(fs.HDFSConfig{NameNodes: []string{env.Get(t, nn)}, WebHDFS: env.Get(t, web), User: "hivedr"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		return h
	}
	return mk("HIVEDR_HDFS_SRC_NAMENODE", "HIVEDR_HDFS_SRC_HTTP"), mk("HIVEDR_HDFS_DR_NAMENODE", "HIVEDR_HDFS_DR_HTTP")
}

// pipelineTest is a pipeline a test started, with the clients and the
// workload source its steps use.
type pipelineTest struct {
	*pipeline
	ctx         context.Context
	src, dr     *hms.Client
	srcFS, drFS *fs.HDFS
	w           *wl.Source
}

// startPipeline starts tail, copyd and apply on dbs from the source log's
// current head, within a test deadline of d.
func startPipeline(t *testing.T, d time.Duration, dbs ...string) *pipelineTest {
	t.Helper()
	env := testenv.Require(t)
	pt := &pipelineTest{ctx: ctxFor(t, d), src: env.HMS(t, testenv.Source), dr: env.HMS(t, testenv.DR)}
	pt.srcFS, pt.drFS = pipelineFS(t, env)
	pt.pipeline = newPipeline(t, env, dbs, currentEventID(t, pt.ctx, pt.src))
	pt.startAll()
	pt.w = wl.NewSource(pt.src, pt.srcFS, env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL"))
	return pt
}

// runSteps runs workload steps in order, calling after (when not nil)
// after each.
func (pt *pipelineTest) runSteps(steps []workloadStep, after func(i int)) {
	pt.t.Helper()
	for i, st := range steps {
		if err := st.run(pt.ctx, pt.w); err != nil {
			pt.t.Fatalf("workload step %q: %v", st.name, err)
		}
		if after != nil {
			after(i)
		}
	}
}

// eventTopics are the pipeline's database topics.
func (p *pipeline) eventTopics() []string {
	var topics []string
	for _, db := range p.dbs {
		topics = append(topics, kafka.Topics{Prefix: p.prefix}.Events(db))
	}
	return topics
}

// converge waits until the DR metastore and files equal the source's.
func (p *pipeline) converge(ctx context.Context, src, dr *hms.Client, srcFS, drFS wl.Files, d time.Duration) {
	p.t.Helper()
	var last []wl.Diff
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		p.checkAlive()
		diffs, err := wl.Compare(ctx, src, dr, srcFS, drFS, p.dbs, p.mapLocation)
		if err == nil && len(diffs) == 0 {
			return
		}
		if err != nil {
			p.t.Logf("compare: %v", err)
		}
		last = diffs
		time.Sleep(time.Second)
	}
	var b strings.Builder
	for _, d := range last {
		b.WriteString("\n  " + d.String())
	}
	p.t.Fatalf("DR did not converge with the source in %s; %d differences:%s\napplier:\n%s", d, len(last), b.String(),
		tail(p.apply.out.String(), 40))
}

// caughtUp reports whether the applier group has committed every event
// topic's end.
func (p *pipeline) caughtUp(ctx context.Context) bool {
	adm := p.env.KafkaAdmin(p.t)
	topics := p.eventTopics()
	lag, err := adm.Lag(ctx, p.prefix+"-applier")
	if err != nil {
		return false
	}
	gl, ok := lag[p.prefix+"-applier"]
	if !ok || gl.FetchErr != nil || gl.DescribeErr != nil {
		return false
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return false
	}
	caught := true
	ends.Each(func(o kadm.ListedOffset) {
		c, ok := gl.Lag.Lookup(o.Topic, o.Partition)
		if !ok || c.Commit.At < o.Offset {
			caught = false
		}
	})
	return caught
}

// workloadStep is one named step of a test workload.
type workloadStep struct {
	name string
	run  func(ctx context.Context, s *wl.Source) error
}

// scenario is the workload the pipeline tests run on two databases; each
// step is one or more metastore calls. kill, when set, runs between steps.
func scenario(db1, db2 string) []workloadStep {
	type step = workloadStep
	orders := wl.TableSpec{Columns: []string{"id bigint", "amount double", "note string"}, PartitionKeys: []string{"dt"}}
	accounts := wl.TableSpec{Columns: []string{"id bigint", "owner string"}}
	return []step{
		{"create databases", func(ctx context.Context, s *wl.Source) error {
			if err := s.CreateDatabase(ctx, db1); err != nil {
				return err
			}
			return s.CreateDatabase(ctx, db2)
		}},
		{"create tables", func(ctx context.Context, s *wl.Source) error {
			if err := s.CreateTable(ctx, db1, "orders", orders); err != nil {
				return err
			}
			return s.CreateTable(ctx, db1, "accounts", accounts)
		}},
		{"add partitions with files", func(ctx context.Context, s *wl.Source) error {
			_, err := s.AddPartitions(ctx, db1, "orders", [][]string{{"2026-12-01"}, {"2026-12-02"}, {"2026-12-03"}}, 50)
			return err
		}},
		{"insert", func(ctx context.Context, s *wl.Source) error {
			if _, err := s.Insert(ctx, db1, "orders", []string{"2026-12-01"}, 20); err != nil {
				return err
			}
			_, err := s.Insert(ctx, db1, "accounts", nil, 30)
			return err
		}},
		{"excluded table churns", func(ctx context.Context, s *wl.Source) error {
			for i := 0; i < 2; i++ {
				if err := s.CreateTable(ctx, db1, "tmp_scratch", accounts); err != nil {
					return err
				}
				if _, err := s.Insert(ctx, db1, "tmp_scratch", nil, 5); err != nil {
					return err
				}
				if err := s.DropTable(ctx, db1, "tmp_scratch", true); err != nil {
					return err
				}
			}
			return nil
		}},
		{"insert overwrite", func(ctx context.Context, s *wl.Source) error {
			if _, err := s.InsertOverwrite(ctx, db1, "orders", []string{"2026-12-02"}, 10); err != nil {
				return err
			}
			_, err := s.InsertOverwrite(ctx, db1, "accounts", nil, 12)
			return err
		}},
		{"alter table add column", func(ctx context.Context, s *wl.Source) error {
			return s.AlterTableAddColumn(ctx, db1, "accounts", "email string")
		}},
		{"rename table", func(ctx context.Context, s *wl.Source) error {
			return s.RenameTable(ctx, db1, "accounts", "clients")
		}},
		{"rename across databases", func(ctx context.Context, s *wl.Source) error {
			return s.RenameTableAcross(ctx, db1, "clients", db2, "clients")
		}},
		{"drop partitions", func(ctx context.Context, s *wl.Source) error {
			return s.DropPartitions(ctx, db1, "orders", [][]string{{"2026-12-03"}}, true)
		}},
		{"drop and recreate with another schema", func(ctx context.Context, s *wl.Source) error {
			if err := s.DropTable(ctx, db1, "orders", true); err != nil {
				return err
			}
			spec := wl.TableSpec{Columns: []string{"order_id string", "total decimal(12,2)", "currency string"}, PartitionKeys: []string{"dt", "region"}}
			if err := s.CreateTable(ctx, db1, "orders", spec); err != nil {
				return err
			}
			_, err := s.AddPartitions(ctx, db1, "orders", [][]string{{"2026-12-04", "eu"}, {"2026-12-04", "us"}}, 40)
			return err
		}},
		{"add a partition and drop it at once", func(ctx context.Context, s *wl.Source) error {
			if _, err := s.AddPartitions(ctx, db1, "orders", [][]string{{"2026-12-05", "eu"}}, 40); err != nil {
				return err
			}
			return s.DropPartitions(ctx, db1, "orders", [][]string{{"2026-12-05", "eu"}}, true)
		}},
		{"insert into the new table", func(ctx context.Context, s *wl.Source) error {
			_, err := s.Insert(ctx, db1, "orders", []string{"2026-12-04", "us"}, 25)
			return err
		}},
	}
}

// TestPipelineConverges runs the scenario through the source metastore with
// `hivedr tail`, `hivedr copyd` and `hivedr apply` running as separate
// processes, and checks that the DR metastore and DR files equal the
// source's. Then it resets the applier's group to the start of the topics
// and re-runs it: the DR state does not change (idempotent re-drive).
func TestPipelineConverges(t *testing.T) {
	u := uniq(t)
	db1, db2 := "pc_sales_"+u, "pc_archive_"+u
	p := startPipeline(t, 8*time.Minute, db1, db2)
	ctx, src, dr, srcFS, drFS := p.ctx, p.src, p.dr, p.srcFS, p.drFS
	p.runSteps(scenario(db1, db2), nil)
	p.converge(ctx, src, dr, srcFS, drFS, 3*time.Minute)
	eventually(t, time.Minute, "applier group committed to the end of the event topics", func() bool { return p.caughtUp(ctx) })

	// The DR databases are marked as replication targets at the last event.
	for _, db := range []string{db1, db2} {
		d, err := dr.GetDatabase(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		if d.Parameters["repl.target.for"] == "" || d.Parameters["repl.last.id"] == "" {
			t.Errorf("DR database %s parameters %v: want repl.target.for and repl.last.id", db, d.Parameters)
		}
	}
	before, err := wl.Capture(ctx, dr, drFS, []string{db1, db2})
	if err != nil {
		t.Fatal(err)
	}

	// Re-drive: stop the applier, rewind its group to the start, run it again.
	p.apply.stop(t)
	adm := p.env.KafkaAdmin(t)
	starts, err := adm.ListStartOffsets(ctx, p.eventTopics()...)
	if err != nil {
		t.Fatal(err)
	}
	if err := adm.CommitAllOffsets(ctx, p.prefix+"-applier", starts.Offsets()); err != nil {
		t.Fatalf("reset the applier group: %v", err)
	}
	if p.caughtUp(ctx) {
		t.Fatal("the applier group still looks caught up after the reset")
	}
	p.startApply()
	eventually(t, 2*time.Minute, "re-driven applier caught up", func() bool { p.checkAlive(); return p.caughtUp(ctx) })
	after, err := wl.Capture(ctx, dr, drFS, []string{db1, db2})
	if err != nil {
		t.Fatal(err)
	}
	if diffs := wl.DiffSnapshots(before, after, func(s string) (string, error) { return s, nil }); len(diffs) != 0 {
		t.Fatalf("re-drive changed the DR state: %v", diffs)
	}
	if !strings.Contains(p.apply.out.String(), "applier started") {
		t.Fatal("re-driven applier did not log its start")
	}
	metrics := httpGet(t, "http://"+p.metrics+"/metrics")
	if !strings.Contains(metrics, `result="already_applied"`) {
		t.Errorf("re-drive: no already_applied events counted in the applier metrics:\n%s", grepLines(metrics, "hivedr_applier_events_total"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestPipelineKill9 runs the scenario while the tailer, the copy daemon and
// the applier are killed with SIGKILL in turn, each restarted at once, and
// checks (the applier's completion cache deleted at one restart) that the
// DR still converges to the source, that every event
// reached its topic once, and that every copy task has exactly one
// completion.
func TestPipelineKill9(t *testing.T) {
	u := uniq(t)
	db1, db2 := "pk_sales_"+u, "pk_archive_"+u
	p := startPipeline(t, 8*time.Minute, db1, db2)
	ctx, env := p.ctx, p.env
	lostState := false
	kills := []func(){
		func() { p.tail.kill9(); p.startTail() },
		func() { p.copyd.kill9(); p.startCopyd() },
		func() {
			p.apply.kill9()
			if lostState {
				// The second time, its completion cache is lost too: that
				// must cost time only.
				if err := os.RemoveAll(filepath.Join(p.state, "applier")); err != nil {
					t.Fatal(err)
				}
			}
			lostState = true
			p.startApply()
		},
	}
	p.runSteps(scenario(db1, db2), func(i int) {
		// Let the daemons get going on the step, then kill one mid-flight.
		time.Sleep(time.Duration(150+50*(i%4)) * time.Millisecond)
		kills[i%len(kills)]()
	})
	p.converge(ctx, p.src, p.dr, p.srcFS, p.drFS, 4*time.Minute)
	eventually(t, time.Minute, "applier group committed to the end of the event topics", func() bool { return p.caughtUp(ctx) })

	s := serde(t, env)
	type topicEvent struct {
		db string
		id int64
	}
	seen := map[topicEvent]int{}
	for _, db := range p.dbs {
		for _, ev := range events(readTopic(t, env, s, kafka.Topics{Prefix: p.prefix}.Events(db))) {
			seen[topicEvent{db, ev.EventID}]++
		}
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("event %d is %d times on the topic of %s", k.id, n, k.db)
		}
	}
	if len(seen) == 0 {
		t.Fatal("no events on the topics")
	}
	tasks := 0
	done := map[string]int{}
	for _, d := range readTopic(t, env, s, p.prefix+".manifests") {
		if task, ok := d.value.(*schemas.CopyTask); ok {
			tasks++
			// Keyed by target (same-file tasks share a partition), task ID in a header.
			if string(d.rec.Key) != task.TargetURI || !hasHeader(d.rec, kafka.HeaderTaskID, task.TaskID) {
				t.Errorf("copy task %s: key %q, headers %v; want key %s and %s=%s", task.TaskID, d.rec.Key, d.rec.Headers,
					task.TargetURI, kafka.HeaderTaskID, task.TaskID)
			}
		}
	}
	for _, d := range readTopic(t, env, s, p.prefix+".completions") {
		if c, ok := d.value.(*schemas.CopyCompletion); ok {
			done[c.TaskID]++
		}
	}
	if len(done) != tasks {
		t.Errorf("%d copy tasks but %d tasks completed", tasks, len(done))
	}
	for id, n := range done {
		if n != 1 {
			t.Errorf("copy task %s has %d completions", id, n)
		}
	}
	t.Logf("%d events, %d copy tasks, converged after %d kills", len(seen), tasks, len(scenario(db1, db2)))
}

// TestPipelineHaltAndSkip creates a table whose location lies outside the
// source roots: the applier halts that database (log, metric, and the
// hivedr.halted parameter on the DR database) while another database keeps
// replicating; restarted with --skip-event it skips exactly that event,
// records who skipped it, and goes on.
func TestPipelineHaltAndSkip(t *testing.T) {
	u := uniq(t)
	bad, good := "ph_bad_"+u, "ph_good_"+u
	p := startPipeline(t, 6*time.Minute, bad, good)
	ctx, env, dr, w := p.ctx, p.env, p.dr, p.w
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	spec := wl.TableSpec{Columns: []string{"id bigint"}}
	must("create databases", errors.Join(w.CreateDatabase(ctx, bad), w.CreateDatabase(ctx, good)))
	must("create t1", w.CreateTable(ctx, bad, "t1", spec))
	outside := "hdfs://" + env.Get(t, "HIVEDR_HDFS_SRC_NAMENODE") + "/elsewhere/" + u + "/t_out"
	must("create t_out outside the roots", w.CreateTable(ctx, bad, "t_out", wl.TableSpec{Columns: spec.Columns, Location: outside}))
	must("create t2", w.CreateTable(ctx, bad, "t2", spec))

	// The bad database halts at t_out, loudly.
	var halted string
	eventually(t, 2*time.Minute, "DR database "+bad+" records the halt", func() bool {
		p.checkAlive()
		d, err := dr.GetDatabase(ctx, bad)
		if err != nil {
			return false
		}
		halted = d.Parameters["hivedr.halted"]
		return halted != ""
	})
	if !strings.Contains(halted, "CREATE_TABLE") || !strings.Contains(halted, "path_outside_roots") || !strings.Contains(halted, outside) {
		t.Errorf("hivedr.halted = %q: want the event type, the reason and the path", halted)
	}
	metrics := httpGet(t, "http://"+p.metrics+"/metrics")
	if want := `hivedr_applier_halted{db="` + bad + `",reason="path_outside_roots"} 1`; !strings.Contains(metrics, want) {
		t.Errorf("metrics lack %s:\n%s", want, grepLines(metrics, "hivedr_applier_halted"))
	}
	if log := p.apply.out.String(); !strings.Contains(log, "database halted") || !strings.Contains(log, outside) {
		t.Errorf("applier log does not name the halt and the path:\n%s", tail(log, 20))
	}
	tableExists := func(db, name string) bool {
		_, err := dr.GetTableReq(ctx, &hive_metastore.GetTableRequest{DbName: db, TblName: name})
		return err == nil
	}
	if !tableExists(bad, "t1") || tableExists(bad, "t_out") || tableExists(bad, "t2") {
		t.Errorf("on DR: t1 %v (want true), t_out %v (want false), t2 %v (want false)",
			tableExists(bad, "t1"), tableExists(bad, "t_out"), tableExists(bad, "t2"))
	}
	// A halted database does not hold up the others.
	must("create good.t", w.CreateTable(ctx, good, "t", spec))
	eventually(t, time.Minute, good+".t on DR", func() bool { return tableExists(good, "t") })

	// Skip exactly the halting event.
	var id int64
	if _, err := fmt.Sscanf(halted, "event %d", &id); err != nil || id <= 0 {
		t.Fatalf("no event ID in hivedr.halted %q", halted)
	}
	p.apply.stop(t)
	p.startApply("-skip-event", fmt.Sprintf("%s:%d", bad, id))
	eventually(t, time.Minute, bad+".t2 on DR after the skip", func() bool { p.checkAlive(); return tableExists(bad, "t2") })
	if tableExists(bad, "t_out") {
		t.Error("the skipped table was created on DR")
	}
	d, err := dr.GetDatabase(ctx, bad)
	must("get DR database", err)
	rec := d.Parameters[fmt.Sprintf("hivedr.skipped.%d", id)]
	if !strings.Contains(rec, "requested by ") || !strings.Contains(rec, "skipped CREATE_TABLE") {
		t.Errorf("skip record %q: want who asked and what was skipped", rec)
	}
	if d.Parameters["hivedr.halted"] != "" {
		t.Errorf("hivedr.halted still set after the skip: %q", d.Parameters["hivedr.halted"])
	}
}

func hasHeader(r *kgo.Record, key, value string) bool {
	for _, h := range r.Headers {
		if h.Key == key && string(h.Value) == value {
			return true
		}
	}
	return false
}
