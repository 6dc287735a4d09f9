package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/internal/testenv"
	"github.com/hivedr/hivedr/schemas"
)

// capturedRows are the notification rows the capture program recorded from
// the real source metastore (internal/hmsevent/testdata/events): real messages, in
// the order the metastore wrote them.
func capturedRows(t testing.TB) []synthRow {
	t.Helper()
	files, err := filepath.Glob("../internal/hmsevent/testdata/events/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no captured events in ../internal/hmsevent/testdata/events: %v", err)
	}
	sort.Strings(files)
	var rows []synthRow
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var e struct {
			EventType, DbName, TableName, MessageFormat, Message string
		}
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		rows = append(rows, synthRow{Type: e.EventType, DB: e.DbName, Table: e.TableName, Format: e.MessageFormat, Message: e.Message})
	}
	return rows
}

// repeatRows returns n rows cycling through the captured ones.
func repeatRows(rows []synthRow, n int) []synthRow {
	out := make([]synthRow, n)
	for i := range out {
		out[i] = rows[i%len(rows)]
	}
	return out
}

// tailerConf is the YAML of a tailer reading a test's own log into its own
// topics (a fresh prefix per test, so tests never see each other's records)
// with a transactional ID of its own (the default, from the source name
// alone, would let runs of a test on a shared stack fence each other).
type tailerConf struct {
	prefix, source   string
	kind, postgres   string
	batch            int
	start            string
	databases        string // YAML list items under replication.databases
	metricsAddr      string
	heartbeatSeconds int
}

func (c tailerConf) write(t *testing.T, env *testenv.Env) string {
	t.Helper()
	if c.kind == "" {
		c.kind = "thrift"
	}
	if c.batch == 0 {
		c.batch = 100
	}
	if c.start == "" {
		c.start = "earliest"
	}
	if c.heartbeatSeconds == 0 {
		c.heartbeatSeconds = 1
	}
	src := "hdfs://" + env.Get(t, "HIVEDR_HDFS_SRC_NAMENODE")
	dr := "hdfs://" + env.Get(t, "HIVEDR_HDFS_DR_NAMENODE")
	y := strings.NewReplacer(
		"$SOURCE", c.source, "$KIND", c.kind, "$HMS", env.Get(t, "HIVEDR_HMS_SRC"), "$PG", c.postgres,
		"$BROKERS", strings.Join(env.KafkaBrokers(t), ","), "$PREFIX", c.prefix,
		"$REGISTRY", env.Get(t, "HIVEDR_SCHEMA_REGISTRY"), "$BATCH", fmt.Sprint(c.batch),
		"${HEARTBEAT}", fmt.Sprint(c.heartbeatSeconds), "$START", c.start, "$METRICS", c.metricsAddr,
		"$DATABASES", c.databases, "$SRCNN", env.Get(t, "HIVEDR_HDFS_SRC_NAMENODE"), "$SRCWEB", env.Get(t, "HIVEDR_HDFS_SRC_HTTP"),
		"$SRC", src, "$DR", dr,
	).Replace(`
source:
  name: $SOURCE
  kind: $KIND
  metastore: $HMS
  postgres_dsn: "$PG"
kafka:
  brokers: [$BROKERS]
  topic_prefix: $PREFIX
  replication_factor: 1
  manifest_partitions: 3
schema_registry: $REGISTRY
tailer:
  transactional_id: hivedr-tailer-$PREFIX-$SOURCE
  batch_size: $BATCH
  poll_interval: 200ms
  heartbeat_interval: ${HEARTBEAT}s
  start_event_id: "$START"
  metrics_addr: "$METRICS"
replication:
  databases:
$DATABASES
  source_roots: ["$SRC/warehouse", "$SRC/external"]
  path_mappings:
    - {source: "$SRC/", target: "$DR/"}
filesystems:
  hdfs:
    - {namenodes: [$SRCNN], webhdfs: $SRCWEB, user: hivedr}
`)
	return writeFile(t, "tailer.yaml", y)
}

// waitCheckpoint waits until the tailer's committed checkpoint reaches id.
func waitCheckpoint(t *testing.T, env *testenv.Env, s *schemas.Serde, c tailerConf, id int64, p *proc, d time.Duration) {
	t.Helper()
	topic := kafka.Topics{Prefix: c.prefix}.Checkpoints()
	eventually(t, d, fmt.Sprintf("checkpoint %d on %s", id, topic), func() bool {
		if p != nil && p.exited() {
			t.Fatalf("tailer exited early:\n%s", tail(p.out.String(), 40))
		}
		return lastCheckpoint(t, env, s, topic, c.source) >= id
	})
}

// lastCheckpoint is the newest committed checkpoint of source; -1 for none.
func lastCheckpoint(t *testing.T, env *testenv.Env, s *schemas.Serde, topic, source string) int64 {
	t.Helper()
	best := int64(-1)
	td, err := env.KafkaAdmin(t).ListTopics(ctxFor(t, 30*time.Second), topic)
	if err != nil || td.Error() != nil {
		return best // not created yet
	}
	for _, d := range readTopic(t, env, s, topic) {
		if cp, ok := d.value.(*schemas.TailerCheckpoint); ok && cp.Source == source {
			best = max(best, cp.LastEventID)
		}
	}
	return best
}

// published is what a tailer run left on its topics: event IDs per database
// topic and copy task IDs.
type published struct {
	events map[string][]int64
	tasks  []string
}

func readPublished(t *testing.T, env *testenv.Env, s *schemas.Serde, prefix string, dbs []string) published {
	t.Helper()
	topics := kafka.Topics{Prefix: prefix}
	p := published{events: map[string][]int64{}}
	for _, db := range dbs {
		for _, e := range events(readTopic(t, env, s, topics.Events(db))) {
			p.events[db] = append(p.events[db], e.EventID)
		}
	}
	for _, d := range readTopic(t, env, s, topics.Manifests()) {
		if task, ok := d.value.(*schemas.CopyTask); ok {
			p.tasks = append(p.tasks, task.TaskID)
		}
	}
	sort.Strings(p.tasks)
	return p
}

// TestTailerKill9ExactlyOnce kills the tailer with SIGKILL at random points
// while it publishes a log of 50,000 real captured events in batches of 40,
// restarting it each time; each kill fires when the tailer's checkpoint
// passes a random event and must leave the checkpoint short of the end. What a read_committed consumer then sees must be
// exactly what an undisturbed tailer publishes from the same log: every
// event once, in order, and every copy task once.
func TestTailerKill9ExactlyOnce(t *testing.T) {
	env := testenv.Require(t)
	s := serde(t, env)
	log := newSynthLog(t, env)
	first, last := log.append(t, repeatRows(capturedRows(t), 50000))
	dbs := []string{"cap_sales", "cap_archive"}
	policy := "    - {name: cap_sales}\n    - {name: cap_archive}"

	// The reference: one clean run.
	ref := tailerConf{prefix: "t" + uniq(t), source: "ref", kind: "postgres", postgres: log.DSN, batch: 40, databases: policy}
	p := startHivedr(t, "reference tailer", "tail", "-config", ref.write(t, env))
	waitCheckpoint(t, env, s, ref, last, p, 4*time.Minute)
	p.stop(t)
	want := readPublished(t, env, s, ref.prefix, dbs)
	for _, db := range dbs {
		ids := want.events[db]
		if len(ids) == 0 {
			t.Fatalf("reference run published nothing for %s", db)
		}
		for i := 1; i < len(ids); i++ {
			if ids[i] <= ids[i-1] {
				t.Fatalf("reference run: %s has event %d after %d", db, ids[i], ids[i-1])
			}
		}
	}
	for i := 1; i < len(want.tasks); i++ {
		if want.tasks[i] == want.tasks[i-1] {
			t.Fatalf("reference run published copy task %s twice", want.tasks[i])
		}
	}

	// The crash run: same log, its own prefix and transactional ID. Each
	// run is killed once its checkpoint (the metrics endpoint's
	// last_published_event_id) passes a random event: a random share of
	// what is left of the first 80% of the log, so that every run makes
	// progress and the last kill leaves a fifth of the log unpublished,
	// however fast the machine.
	crash := ref
	crash.prefix, crash.source = "t"+uniq(t), "crash"
	crash.metricsAddr = "127.0.0.1:" + itoa(int64(freePort(t)))
	cfg := crash.write(t, env)
	metrics := "http://" + crash.metricsAddr + "/metrics"
	cpTopic := kafka.Topics{Prefix: crash.prefix}.Checkpoints()
	rng := testRand(t)
	const runs = 6
	limit := first + (last-first)*8/10
	from := first - 1 // the checkpoint each run starts from
	kills := 0
	for i := 0; i < runs; i++ {
		room := (limit - from) / int64(runs-i)
		if room < 1 {
			t.Fatalf("run %d starts at checkpoint %d, past 80%% of the log (%d of %d): the earlier kills overshot their thresholds", i, from, limit, last)
		}
		at := from + 1 + rng.Int64N(room)
		p := startHivedr(t, fmt.Sprintf("tailer run %d", i), "tail", "-config", cfg)
		poll(t, 4*time.Minute, 5*time.Millisecond, fmt.Sprintf("tailer run %d to publish up to event %d", i, at), func() bool {
			if p.exited() {
				t.Fatalf("tailer run %d exited on its own:\n%s", i, tail(p.out.String(), 40))
			}
			m, ok := scrape(metrics)
			return ok && m["hivedr_tailer_last_published_event_id"] >= float64(at)
		})
		p.kill9()
		kills++
		// A read_committed reader sees a transaction once its markers are
		// written, a moment after its commit returned.
		var cp int64
		eventually(t, time.Minute, fmt.Sprintf("the committed checkpoint of run %d at event %d", i, at), func() bool {
			cp = lastCheckpoint(t, env, s, cpTopic, crash.source)
			return cp >= at
		})
		if cp >= last {
			t.Fatalf("tailer run %d was killed once it reported event %d published, and the committed checkpoint is %d: want it short of the end (%d), the kill mid-stream",
				i, at, cp, last)
		}
		t.Logf("tailer run %d: killed once past event %d; committed checkpoint %d of %d", i, at, cp, last)
		from = cp
	}
	mid := lastCheckpoint(t, env, s, cpTopic, crash.source)
	if mid >= last {
		t.Fatalf("the killed runs finished the whole log (checkpoint %d of %d): the kills did not land mid-stream; make the log longer", mid, last)
	}
	p = startHivedr(t, "tailer after kills", "tail", "-config", cfg)
	waitCheckpoint(t, env, s, crash, last, p, 4*time.Minute)
	p.stop(t)
	got := readPublished(t, env, s, crash.prefix, dbs)
	for _, db := range dbs {
		if !slices.Equal(got.events[db], want.events[db]) {
			t.Errorf("%s after %d kills: %d events, reference %d; first difference at %d",
				db, kills, len(got.events[db]), len(want.events[db]), firstDiff(got.events[db], want.events[db]))
		}
	}
	if !slices.Equal(got.tasks, want.tasks) {
		t.Errorf("copy tasks after %d kills: %d, reference %d", kills, len(got.tasks), len(want.tasks))
	}
	t.Logf("%d kills (checkpoint %d of %d before the last restart): %v events per database, %d copy tasks, identical to the reference",
		kills, mid, last, map[string]int{dbs[0]: len(got.events[dbs[0]]), dbs[1]: len(got.events[dbs[1]])}, len(got.tasks))
}

func firstDiff(a, b []int64) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestTailerChainBroken deletes events past the tailer's checkpoint while it
// is stopped, as the metastore's cleaner does to a log left behind too long.
// The tailer must stop with CHAIN_BROKEN naming the expected and found IDs,
// and publish nothing after the gap. Before it exits 3 it lingers
// (tailer.chain_broken_linger, here 10m) serving its metrics, so a scrape
// reads hivedr_tailer_state{state="CHAIN_BROKEN"} 1 (the HivedrChainBroken
// alert), /readyz fails "running" and /healthz answers; a SIGTERM ends the
// linger at once, still with exit code 3.
func TestTailerChainBroken(t *testing.T) {
	env := testenv.Require(t)
	s := serde(t, env)
	log := newSynthLog(t, env)
	rows := capturedRows(t)
	_, first := log.append(t, rows)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	conf := tailerConf{prefix: "t" + uniq(t), source: "gap", kind: "postgres", postgres: log.DSN,
		databases: "    - {name: cap_sales}\n    - {name: cap_archive}", metricsAddr: addr}
	cfg := conf.write(t, env)
	p := startHivedr(t, "tailer", "tail", "-config", cfg)
	waitCheckpoint(t, env, s, conf, first, p, 2*time.Minute)
	p.stop(t)

	from, to := log.append(t, rows)
	log.purge(t, from, from+4)
	p = startHivedr(t, "tailer after purge", "tail", "-config", cfg, "-chain-broken-linger", "10m")
	// The linger starts once the CHAIN_BROKEN checkpoint is written and the
	// tailer has stopped: a SIGTERM before it would interrupt that write.
	poll(t, 2*time.Minute, 200*time.Millisecond, "the tailer lingering on CHAIN_BROKEN", func() bool {
		if p.exited() {
			t.Fatalf("the tailer exited before lingering on CHAIN_BROKEN:\n%s", tail(p.out.String(), 20))
		}
		return strings.Contains(p.out.String(), "CHAIN_BROKEN: serving metrics and probes before exiting 3")
	})
	m, ok := scrape("http://" + addr + "/metrics")
	if !ok || m[`hivedr_tailer_state{state="CHAIN_BROKEN"}`] != 1 || m[`hivedr_tailer_state{state="RUNNING"}`] != 0 {
		t.Errorf("/metrics of the lingering tailer (answered: %v): CHAIN_BROKEN %v RUNNING %v, want 1 and 0", ok,
			m[`hivedr_tailer_state{state="CHAIN_BROKEN"}`], m[`hivedr_tailer_state{state="RUNNING"}`])
	}
	if code, body := probe(addr, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "fail running: state is CHAIN_BROKEN, want RUNNING") {
		t.Errorf("/readyz of the lingering tailer: %d %q, want 503 failing running", code, body)
	}
	if code, body := probe(addr, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz of the lingering tailer: %d %q, want 200", code, body)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(t, 2*time.Minute); code != 3 {
		t.Fatalf("tailer exited %d after a purge and a SIGTERM in its linger, want 3 (CHAIN_BROKEN):\n%s", code, tail(p.out.String(), 20))
	}
	out := p.out.String()
	for _, want := range []string{"CHAIN_BROKEN", fmt.Sprintf("expected event %d", from), fmt.Sprintf("event %d next", from+5), "bootstrap"} {
		if !strings.Contains(out, want) {
			t.Errorf("tailer output does not say %q:\n%s", want, tail(out, 20))
		}
	}
	if cp := lastCheckpoint(t, env, s, kafka.Topics{Prefix: conf.prefix}.Checkpoints(), conf.source); cp != first {
		t.Errorf("checkpoint moved to %d past the gap (want %d)", cp, first)
	}
	for _, db := range []string{"cap_sales", "cap_archive"} {
		for _, e := range events(readTopic(t, env, s, kafka.Topics{Prefix: conf.prefix}.Events(db))) {
			if e.EventID > first {
				t.Errorf("%s: event %d published after the gap (log ends at %d)", db, e.EventID, to)
			}
		}
	}
}

// TestTailerMalformedMessage puts undecodable and unknown rows in the log.
// Each is published with its raw message and the reason, and the events
// after them still flow.
func TestTailerMalformedMessage(t *testing.T) {
	env := testenv.Require(t)
	s := serde(t, env)
	log := newSynthLog(t, env)
	rows := capturedRows(t)
	bad := []synthRow{
		{Type: "CREATE_TABLE", DB: "cap_sales", Table: "broken", Format: "gzip(json-2.0)", Message: "this is not base64 gzip"},
		{Type: "CREATE_TABLE", DB: "cap_sales", Table: "broken", Format: "json-0.2", Message: `{"db":"cap_sales","tableObjJson":"{not tjson"}`},
		{Type: "FROBNICATE_TABLE", DB: "cap_sales", Table: "x", Format: "json-0.2", Message: `{"db":"cap_sales"}`},
	}
	_, last := log.append(t, append(append(rows[:5:5], bad...), rows[5:]...))
	conf := tailerConf{prefix: "t" + uniq(t), source: "bad", kind: "postgres", postgres: log.DSN,
		databases: "    - {name: cap_sales}\n    - {name: cap_archive}"}
	p := startHivedr(t, "tailer", "tail", "-config", conf.write(t, env))
	waitCheckpoint(t, env, s, conf, last, p, 2*time.Minute)
	p.stop(t)

	evs := events(readTopic(t, env, s, kafka.Topics{Prefix: conf.prefix}.Events("cap_sales")))
	byID := map[int64]*schemas.Event{}
	for _, e := range evs {
		byID[e.EventID] = e
	}
	for i, want := range []schemas.EventErrorKind{schemas.ErrDecode, schemas.ErrDecode, schemas.ErrUnknownEventType} {
		id := int64(6 + i)
		e := byID[id]
		if e == nil {
			t.Fatalf("bad event %d (%s) was not published", id, bad[i].Type)
		}
		if len(e.Errors) == 0 || e.Errors[0].Kind != want || e.Message != bad[i].Message || e.Payload != nil {
			t.Errorf("event %d: errors %+v, message %q; want %s with the raw message kept", id, e.Errors, e.Message, want)
		}
		t.Logf("event %d published with %s: %s", id, e.Errors[0].Kind, e.Errors[0].Message)
	}
	if evs[len(evs)-1].EventID <= 8 {
		t.Fatalf("no event after the malformed ones was published (last %d)", evs[len(evs)-1].EventID)
	}
	for _, e := range evs {
		if e.EventID > 8 && len(e.Errors) > 0 && e.Errors[0].Kind != schemas.ErrPathOutsideRoots {
			t.Errorf("event %d after the bad ones has errors %+v", e.EventID, e.Errors)
		}
	}
}
