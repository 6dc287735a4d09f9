package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/beltran/gohive/hive_metastore"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/internal/krb"
	"github.com/hivedr/hivedr/internal/location"
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
	// roleEnv is the environment each daemon (tail, copyd, apply) gets
	// on top of the test's: the secured pipeline's Kafka user.
	roleEnv map[string][]string
}

// pipelineConf is what options of newPipeline may change in the
// pipeline's configuration. filesystem (the DR cluster's filesystems.hdfs
// entry, a YAML flow mapping) and target (the path mapping's target)
// address the DR NameNode as the stack lists it by default;
// TestLocationAliases spells them otherwise. The secured pipeline
// (securePipeline) sets the rest: both clusters' entries with their
// Kerberos keys (srcFilesystem too), metastorePrincipal on both
// metastores, kafka's sasl and tls keys (kafkaSecurity, YAML lines
// indented under kafka:), schema_registry as a mapping (registry), and a
// kerberos section (kerberos, top-level YAML).
type pipelineConf struct {
	srcFilesystem, filesystem, target string
	metastorePrincipal                string
	kafkaSecurity                     string
	registry                          string
	kerberos                          string
	// copydExtra is more keys of the copyd section (YAML lines indented
	// under copyd:).
	copydExtra string
	// moreFilesystems are more filesystems.hdfs entries (YAML flow
	// mappings), and extra more top-level YAML (sites:, say).
	moreFilesystems []string
	extra           string
}

func newPipeline(t *testing.T, env *testenv.Env, dbs []string, start int64, opts ...func(*pipelineConf)) *pipeline {
	t.Helper()
	u := uniq(t)
	p := &pipeline{t: t, env: env, prefix: "p" + u, dbs: dbs, start: start, state: t.TempDir(),
		metrics: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
	src := "hdfs://" + env.Get(t, "HIVEDR_HDFS_SRC_NAMENODE")
	dr := "hdfs://" + env.Get(t, "HIVEDR_HDFS_DR_NAMENODE")
	plainFS := func(site testenv.Site) string {
		return fmt.Sprintf("{namenodes: [%s], webhdfs: %s, user: hivedr}",
			env.Get(t, "HIVEDR_HDFS_"+string(site)+"_NAMENODE"), env.Get(t, "HIVEDR_HDFS_"+string(site)+"_HTTP"))
	}
	c := pipelineConf{target: dr + "/", srcFilesystem: plainFS(testenv.Source), filesystem: plainFS(testenv.DR),
		registry: env.Get(t, "HIVEDR_SCHEMA_REGISTRY")}
	for _, o := range opts {
		o(&c)
	}
	principal := ""
	if c.metastorePrincipal != "" {
		principal = "  metastore_principal: " + c.metastorePrincipal
	}
	var scope strings.Builder
	for _, db := range dbs {
		fmt.Fprintf(&scope, "    - {name: %s, exclude_tables: [\"tmp_.*\"]}\n", db)
	}
	y := strings.NewReplacer(
		"$SRCFS", c.srcFilesystem, "$DRFS", c.filesystem, "$DRTARGET", c.target,
		"$METASTOREPRINCIPAL", principal, "$KERBEROS", c.kerberos, "$COPYDEXTRA", c.copydExtra,
		"$PREFIX", p.prefix, "$HMSSRC", env.Get(t, "HIVEDR_HMS_SRC"), "$HMSDR", env.Get(t, "HIVEDR_HMS_DR"),
		"$BROKERS", strings.Join(env.KafkaBrokers(t), ","), "$REGISTRY", c.registry, "$KAFKASECURITY", c.kafkaSecurity,
		"$START", fmt.Sprint(start), "$METRICS", p.metrics,
		"$DATABASES", scope.String(), "$SRC", src, "$DR", dr,
		"$MOREFS", strings.Join(append([]string{""}, c.moreFilesystems...), "\n    - "), "$EXTRA", c.extra,
	).Replace(`
source:
  name: $PREFIX
  kind: thrift
  metastore: $HMSSRC
$METASTOREPRINCIPAL
kafka:
  brokers: [$BROKERS]
  topic_prefix: $PREFIX
  replication_factor: 1
  manifest_partitions: 3
$KAFKASECURITY
schema_registry: $REGISTRY
tailer:
  batch_size: 200
  poll_interval: 200ms
  heartbeat_interval: 2s
  start_event_id: "$START"
  # Exit at once on CHAIN_BROKEN (TestTailerChainBroken tests the linger).
  chain_broken_linger: 0s
  metrics_addr: ""
copyd:
  group: $PREFIX-copyd
  instance: $PREFIX
  workers: 4
  retries: 2
  metrics_addr: ""
  cm_roots: ["$SRC/cmroot/"]
$COPYDEXTRA
applier:
  group: $PREFIX-applier
  metastore: $HMSDR
$METASTOREPRINCIPAL
  halt_after: 30s
  metrics_addr: "$METRICS"
filesystems:
  hdfs:
    - $SRCFS
    - $DRFS$MOREFS
replication:
  databases:
$DATABASES
  source_roots: ["$SRC/warehouse", "$SRC/external"]
  path_mappings:
    - {source: "$SRC/", target: "$DRTARGET"}
$KERBEROS
$EXTRA
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
	p.tail = startHivedrEnv(p.t, "tail", p.roleEnv["tail"], "tail", "-config", p.conf)
}

func (p *pipeline) startCopyd() {
	p.copyd = startHivedrEnv(p.t, "copyd", p.roleEnv["copyd"], "copyd", "-config", p.conf, "-state-dir", filepath.Join(p.state, "copyd"))
}

func (p *pipeline) startApply(extra ...string) {
	args := append([]string{"apply", "-config", p.conf, "-state-dir", filepath.Join(p.state, "applier")}, extra...)
	p.apply = startHivedrEnv(p.t, "apply", p.roleEnv["apply"], args...)
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

// pipelineFS returns the source and DR HDFS as the workload package reads
// them: as user hivedr on the plain stack, as the tests' own principal on
// the secured one.
func pipelineFS(t *testing.T, env *testenv.Env) (src, dr *fs.HDFS) {
	t.Helper()
	var kc *krb.Client
	if env.Secure() {
		kc = env.Krb(t, testenv.TestPrincipal)
	}
	mk := func(site testenv.Site) *fs.HDFS {
		h, err := fs.NewHDFS(env.HDFSConfig(t, site, kc))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		return h
	}
	return mk(testenv.Source), mk(testenv.DR)
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
	var lastKey string
	var settled time.Time // since when the group is at the topics' end with last's differences
	deadline := time.Now().Add(d)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	why := fmt.Sprintf("in %s", d)
	for ; time.Now().Before(deadline); <-tick.C {
		p.checkAlive()
		diffs, err := wl.Compare(ctx, src, dr, srcFS, drFS, p.dbs, p.mapLocation)
		if err == nil && len(diffs) == 0 {
			return
		}
		if err != nil {
			p.t.Logf("compare: %v", err)
		}
		key := fmt.Sprint(diffs)
		switch {
		case err != nil || key != lastKey || !p.caughtUp(ctx):
			settled = time.Time{}
		case settled.IsZero():
			settled = time.Now()
		case time.Since(settled) >= convergeSettled:
			// Nothing left to apply and nothing changing: waiting out the
			// deadline would only delay the report (and the tests after).
			why = fmt.Sprintf("(the applier group at the topics' end with the same differences for %s)", convergeSettled)
			deadline = time.Now()
		}
		last, lastKey = diffs, key
	}
	var b strings.Builder
	for _, d := range last {
		b.WriteString("\n  " + d.String())
	}
	p.t.Errorf("DR did not converge with the source %s; %d differences:%s\napplier:\n%s", why, len(last), b.String(),
		tail(p.apply.out.String(), 40))
	p.trace(last)
	p.t.FailNow()
}

// convergeSettled is how long converge goes on once the applier group has
// consumed every topic to its end and the differences stay the same.
const convergeSettled = 3 * time.Minute

// trace logs, for the first differences that name a file, the records
// of its database's topic about that file or its partition, and the copy
// completions of their tasks: what tells a snapshot's listing, a copy
// and the applier's choice apart when a test did not converge.
func (p *pipeline) trace(diffs []wl.Diff) {
	p.t.Helper()
	s := serde(p.t, p.env)
	var comps []decoded
	for i, d := range diffs {
		if i == 3 {
			break
		}
		obj, file, ok := strings.Cut(d.Object, " file ")
		if !ok {
			continue
		}
		dbTable, part, _ := strings.Cut(obj, " partition ")
		db, table, _ := strings.Cut(dbTable, ".")
		vals := strings.Fields(strings.Trim(part, "[]"))
		names := func(text string) bool {
			for _, v := range vals {
				if !strings.Contains(text, v) {
					return false
				}
			}
			return true
		}
		var lines []string
		tasks := map[string]bool{}
		for _, e := range events(readTopic(p.t, p.env, s, kafka.Topics{Prefix: p.prefix}.Events(db))) {
			if !strings.EqualFold(e.Table, table) && e.Snapshot == nil {
				continue
			}
			var named []string
			for _, f := range e.Files {
				if filepath.Base(f.URI) == file && names(f.URI) {
					named = append(named, f.URI+" task "+f.TaskID)
					tasks[f.TaskID] = true
				}
			}
			if len(named) == 0 && (!strings.EqualFold(e.Table, table) || len(vals) == 0 || !names(fmt.Sprint(e.Payload))) {
				continue
			}
			line := fmt.Sprintf("event %d %s", e.EventID, e.EventType)
			if e.Snapshot != nil {
				line += fmt.Sprintf(" (bootstrap %s seq %d stamp %d)", e.Snapshot.BootstrapID, e.Snapshot.Seq, e.Snapshot.StampEventID)
			}
			line += fmt.Sprintf(": %d files, the file %v, errors %v", len(e.Files), named, e.Errors)
			lines = append(lines, line)
		}
		if len(tasks) > 0 && comps == nil {
			comps = readTopic(p.t, p.env, s, kafka.Topics{Prefix: p.prefix}.Completions())
		}
		for _, c := range comps {
			if cc, ok := c.value.(*schemas.CopyCompletion); ok && tasks[cc.TaskID] {
				lines = append(lines, fmt.Sprintf("completion of task %s: %s %s -> %s %s", cc.TaskID, cc.Status, cc.SourceURI, cc.TargetURI, cc.Error))
			}
		}
		if len(lines) > 40 {
			lines = append(lines[:40], fmt.Sprintf("(%d more)", len(lines)-40))
		}
		p.t.Logf("what the topics say of %s:\n  %s", d.Object, strings.Join(lines, "\n  "))
	}
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

// Sizes of the bulk work each round of TestPipelineKill9 adds to its share
// of the scenario: a partitioned table, partitions with a file each,
// inserts into some of them (an alter and an INSERT event, a file), and
// columns added one alter at a time to it and a second table in turn. A
// round is some 60 events of one database and 50 copy tasks.
const (
	bulkPartitions = 32
	bulkInserts    = 12
	bulkColumns    = 30
)

// bulkSteps is round r's bulk work on db.
func bulkSteps(db string, r int) []workloadStep {
	table := fmt.Sprintf("bulk_%d", r)
	spec := wl.TableSpec{Columns: []string{"id bigint", "v string"}, PartitionKeys: []string{"dt"}}
	var parts [][]string
	for i := range bulkPartitions {
		parts = append(parts, []string{fmt.Sprintf("2026-11-%02d", i+1)})
	}
	return []workloadStep{
		{"create " + table, func(ctx context.Context, s *wl.Source) error { return s.CreateTable(ctx, db, table, spec) }},
		{fmt.Sprintf("add %d partitions with files to %s", len(parts), table), func(ctx context.Context, s *wl.Source) error {
			_, err := s.AddPartitions(ctx, db, table, parts, 20)
			return err
		}},
		{fmt.Sprintf("insert into %d partitions of %s", bulkInserts, table), func(ctx context.Context, s *wl.Source) error {
			for _, vals := range parts[:bulkInserts] {
				if _, err := s.Insert(ctx, db, table, vals, 10); err != nil {
					return err
				}
			}
			return nil
		}},
		// Alternating between two tables: the applier plans consecutive
		// events of one table as one run, so a round of one table's
		// alters could be applied whole before the kill lands.
		{fmt.Sprintf("add %d columns to %s and %s_side, in turn", bulkColumns, table, table), func(ctx context.Context, s *wl.Source) error {
			if err := s.CreateTable(ctx, db, table+"_side", wl.TableSpec{Columns: []string{"id bigint"}}); err != nil {
				return err
			}
			for i := range bulkColumns {
				t := table
				if i%2 == 1 {
					t += "_side"
				}
				if err := s.AlterTableAddColumn(ctx, db, t, fmt.Sprintf("c%d string", i)); err != nil {
					return err
				}
			}
			return nil
		}},
	}
}

// TestPipelineKill9 runs the scenario, with bulk work added, in six rounds,
// each aimed at one daemon: the tailer, the copy daemon and the applier in
// turn. The daemon is stopped while its round is written to the source, so
// that the whole round waits for it; started again, it is killed with
// SIGKILL once it has done a random part of the first third of the round
// (observed: the tailer's checkpoint, the copy daemon's finished tasks,
// the DR database's position), the test checks that the kill left the
// round unfinished, and the daemon restarts at once (the applier's
// completion cache deleted at its second restart). Then the DR must still
// converge to the source, every event must be on its topic once, and
// every copy task must have exactly one completion.
func TestPipelineKill9(t *testing.T) {
	u := uniq(t)
	db1, db2 := "pk_sales_"+u, "pk_archive_"+u
	p := startPipeline(t, 15*time.Minute, db1, db2)
	ctx, env := p.ctx, p.env
	s := serde(t, env)
	rng := testRand(t)
	topics := kafka.Topics{Prefix: p.prefix}

	// Restarted here, the tailer publishes one event per transaction, so
	// that a round takes it many transactions; it and the copy daemon
	// serve /metrics (the applier does at p.metrics).
	conf, err := os.ReadFile(p.conf)
	if err != nil {
		t.Fatal(err)
	}
	const batch = "\n  batch_size: 200\n"
	if strings.Count(string(conf), batch) != 1 {
		t.Fatalf("the pipeline's YAML changed shape; cannot set tailer.batch_size:\n%s", conf)
	}
	tailConf := writeFile(t, "pipeline-tail.yaml", strings.Replace(string(conf), batch, "\n  batch_size: 1\n", 1))
	tailAddr, copydAddr := "127.0.0.1:"+itoa(int64(freePort(t))), ""
	for copydAddr == "" || copydAddr == tailAddr {
		copydAddr = "127.0.0.1:" + itoa(int64(freePort(t)))
	}
	tailMetrics, copydMetrics := "http://"+tailAddr+"/metrics", "http://"+copydAddr+"/metrics"
	startTail := func() {
		p.tail = startHivedr(t, "tail", "tail", "-config", tailConf, "-metrics-addr", tailAddr)
	}
	startCopyd := func() {
		p.copyd = startHivedr(t, "copyd", "copyd", "-config", p.conf, "-state-dir", filepath.Join(p.state, "copyd"),
			"-metrics-addr", copydAddr)
	}
	checkpoint := func() int64 { return lastCheckpoint(t, env, s, topics.Checkpoints(), p.prefix) }
	// committedPast waits until the committed checkpoint reaches id, which
	// the tailer reported published: a read_committed reader sees a
	// transaction once its markers are written, a moment after the commit.
	committedPast := func(id int64) int64 {
		t.Helper()
		var cp int64
		eventually(t, time.Minute, fmt.Sprintf("the committed checkpoint at event %d", id), func() bool {
			cp = checkpoint()
			return cp >= id
		})
		return cp
	}
	waitPublished := func(id int64) {
		t.Helper()
		eventually(t, 5*time.Minute, fmt.Sprintf("the tailer's checkpoint at event %d", id), func() bool {
			p.checkAlive()
			return checkpoint() >= id
		})
	}
	// waitMetric polls a daemon's metrics until cond holds: 5 ms apart, so
	// that a kill lands close to the progress that fires it.
	waitMetric := func(url, what string, cond func(m map[string]float64) bool) {
		t.Helper()
		poll(t, 5*time.Minute, 5*time.Millisecond, what, func() bool {
			p.checkAlive()
			m, ok := scrape(url)
			return ok && cond(m)
		})
	}
	head := func() int64 { return currentEventID(t, ctx, p.src) }

	// The tailer's round: killed once its checkpoint passes a random event
	// of the first third of the round; its committed checkpoint must then
	// be short of the round's end.
	tailerRound := func(r int, round []workloadStep) {
		p.tail.stop(t)
		p.tail = nil // not checked while down
		lo := max(checkpoint(), p.start)
		p.runSteps(round, nil)
		hi := head()
		at := lo + 1 + rng.Int64N(max(1, (hi-lo)/3))
		startTail()
		waitMetric(tailMetrics, fmt.Sprintf("round %d: the tailer past event %d", r, at), func(m map[string]float64) bool {
			return m["hivedr_tailer_last_published_event_id"] >= float64(at)
		})
		p.tail.kill9()
		cp := committedPast(at)
		if cp < at || cp >= hi {
			t.Fatalf("round %d: the tailer was killed once it reported event %d published, and its committed checkpoint is %d: want it in [%d, %d), the round (source events %d-%d) unfinished",
				r, at, cp, at, hi, lo+1, hi)
		}
		t.Logf("round %d (tailer): source events %d-%d; killed past event %d, committed checkpoint %d", r, lo+1, hi, at, cp)
		startTail()
	}
	// The copy daemon's round: killed once it has finished a random number
	// of tasks, up to a third of the round's, with copies in flight; some
	// of the round's tasks must then be without a completion. (Finished,
	// not committed: the daemon commits completions every 200 ms, and a
	// fast machine may finish a round within that.)
	copydRound := func(r int, round []workloadStep) {
		p.copyd.stop(t)
		p.copyd = nil
		lo := head()
		p.runSteps(round, nil)
		hi := head()
		waitPublished(hi)
		var ids []string
		for _, d := range readTopic(t, env, s, topics.Manifests()) {
			if task, ok := d.value.(*schemas.CopyTask); ok && task.EventID > lo && task.EventID <= hi {
				ids = append(ids, task.TaskID)
			}
		}
		if len(ids) < bulkPartitions+bulkInserts {
			t.Fatalf("round %d (source events %d-%d) has %d copy tasks, want at least %d", r, lo+1, hi, len(ids), bulkPartitions+bulkInserts)
		}
		want := 1 + rng.IntN(len(ids)/3)
		startCopyd()
		var inFlight float64
		waitMetric(copydMetrics, fmt.Sprintf("round %d: copyd to finish %d tasks with copies in flight", r, want), func(m map[string]float64) bool {
			inFlight = m["hivedr_copyd_tasks_in_flight"]
			return metricSum(m, "hivedr_copyd_files_total") >= float64(want) && inFlight >= 1
		})
		p.copyd.kill9()
		done := map[string]bool{}
		for _, d := range readTopic(t, env, s, topics.Completions()) {
			if c, ok := d.value.(*schemas.CopyCompletion); ok {
				done[c.TaskID] = true
			}
		}
		n := 0
		for _, id := range ids {
			if done[id] {
				n++
			}
		}
		if n >= len(ids) {
			t.Fatalf("round %d: copyd was killed after finishing %d tasks with %.0f copies in flight, yet all %d of the round's tasks have completions: want some unfinished, the kill mid-round",
				r, want, inFlight, len(ids))
		}
		t.Logf("round %d (copyd): %d copy tasks; killed after %d finished with %.0f in flight, %d of the round's completions committed", r, len(ids), want, inFlight, n)
		startCopyd()
	}
	// The applier's round: killed once it has applied a random event of
	// the first third of the round's events of db1; the DR database's
	// position must then be inside the round.
	lostState := false
	applierRound := func(r int, round []workloadStep) {
		p.apply.stop(t)
		p.apply = nil
		lo := head()
		p.runSteps(round, nil)
		hi := head()
		waitPublished(hi)
		var ids []int64
		for _, e := range events(readTopic(t, env, s, topics.Events(db1))) {
			if e.EventID > lo && e.EventID <= hi {
				ids = append(ids, e.EventID)
			}
		}
		if len(ids) < bulkColumns {
			t.Fatalf("round %d (source events %d-%d) has %d events of %s, want at least %d", r, lo+1, hi, len(ids), db1, bulkColumns)
		}
		at := ids[rng.IntN(len(ids)/3)]
		p.startApply()
		series := `hivedr_applier_last_event_id{db="` + db1 + `"}`
		waitMetric("http://"+p.metrics+"/metrics", fmt.Sprintf("round %d: the applier past event %d of %s", r, at, db1), func(m map[string]float64) bool {
			return m[series] >= float64(at)
		})
		p.apply.kill9()
		d, err := p.dr.GetDatabase(ctx, db1)
		if err != nil {
			t.Fatalf("round %d: DR database %s after the kill: %v", r, db1, err)
		}
		pos, _ := strconv.ParseInt(d.Parameters[drparam.LastID], 10, 64)
		if pos < ids[0] || pos >= ids[len(ids)-1] {
			t.Fatalf("round %d: the applier was killed once it reported event %d applied, and DR %s is at event %d (%s): want it in [%d, %d), the round applied in part",
				r, at, db1, pos, drparam.LastID, ids[0], ids[len(ids)-1])
		}
		t.Logf("round %d (applier): %d events of %s (%d-%d); killed past event %d, DR at event %d", r, len(ids), db1, ids[0], ids[len(ids)-1], at, pos)
		if lostState {
			// The second time, its completion cache is lost too: that
			// must cost time only.
			if err := os.RemoveAll(filepath.Join(p.state, "applier")); err != nil {
				t.Fatal(err)
			}
		}
		lostState = true
		p.startApply()
	}

	steps := scenario(db1, db2)
	bounds := []int{0, 3, 5, 7, 9, 11, len(steps)}
	targets := []func(int, []workloadStep){tailerRound, copydRound, applierRound}
	kills := 0
	for r := 0; r+1 < len(bounds); r++ {
		round := append(append([]workloadStep(nil), steps[bounds[r]:bounds[r+1]]...), bulkSteps(db1, r)...)
		targets[r%len(targets)](r, round)
		kills++
	}
	p.converge(ctx, p.src, p.dr, p.srcFS, p.drFS, 5*time.Minute)
	eventually(t, time.Minute, "applier group committed to the end of the event topics", func() bool { return p.caughtUp(ctx) })

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
			// Keyed by target in canonical form (same-file tasks share a
			// partition), task ID in a header.
			key, err := location.Canonical(task.TargetURI)
			if err != nil || string(d.rec.Key) != key || !hasHeader(d.rec, kafka.HeaderTaskID, task.TaskID) {
				t.Errorf("copy task %s: key %q, headers %v; want key %s and %s=%s", task.TaskID, d.rec.Key, d.rec.Headers,
					key, kafka.HeaderTaskID, task.TaskID)
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
	t.Logf("%d events, %d copy tasks, converged after %d kills", len(seen), tasks, kills)
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
	if want := `hivedr_applier_halted{db="` + bad + `",pipeline="` + p.prefix + `",reason="path_outside_roots"} 1`; !strings.Contains(metrics, want) {
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
