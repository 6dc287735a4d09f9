package e2e

import (
	"context"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/internal/testenv"
	"github.com/hivedr/hivedr/schemas"

	wl "github.com/hivedr/hivedr/e2e/workload"
)

// The tailer lists the directories of external tables (the metastore
// names their files in no event). These tests show that scope and root
// checks come before any listing, that a directory that cannot be listed
// becomes an error on its own event (PATH_OUTSIDE_ROOTS, LISTING_FAILED)
// instead of stopping every database, and that file:/ paths are local
// paths where local files are enabled.

// listingTailer is a tailer of the source metastore on a test's own
// topics, with the roots and filesystems the test gives.
type listingTailer struct {
	t      *testing.T
	env    *testenv.Env
	prefix string
	conf   string
	proc   *proc
	serde  *schemas.Serde
}

// listingSetup is what a listing test varies in the tailer's
// configuration.
type listingSetup struct {
	databases    []string // in scope
	roots        []string // besides the source HDFS's /warehouse and /external
	mappings     string   // YAML items, besides the source HDFS's
	local        bool
	srcNameNode  string // default: the stack's source NameNode
	srcAuthority string // the authority the source HDFS is configured under; default: its NameNode's
	retryFor     string // tailer.list_retry_for; default 30s
}

func startListingTailer(t *testing.T, env *testenv.Env, s listingSetup) *listingTailer {
	t.Helper()
	lt := &listingTailer{t: t, env: env, prefix: "l" + uniq(t), serde: serde(t, env)}
	srcAuth := env.Get(t, "HIVEDR_HDFS_SRC_NAMENODE")
	src := "hdfs://" + srcAuth
	nn := s.srcNameNode
	if nn == "" {
		nn = srcAuth
	}
	if s.retryFor == "" {
		s.retryFor = "30s"
	}
	auth := s.srcAuthority
	if auth == "" {
		auth = srcAuth
	}
	var scope, roots strings.Builder
	for _, db := range s.databases {
		fmt.Fprintf(&scope, "    - {name: %s}\n", db)
	}
	for _, r := range append([]string{src + "/warehouse/", src + "/external/"}, s.roots...) {
		fmt.Fprintf(&roots, "    - %q\n", r)
	}
	y := strings.NewReplacer(
		"$PREFIX", lt.prefix, "$HMS", env.Get(t, "HIVEDR_HMS_SRC"), "$BROKERS", strings.Join(env.KafkaBrokers(t), ","),
		"$REGISTRY", env.Get(t, "HIVEDR_SCHEMA_REGISTRY"), "$START", fmt.Sprint(currentEventID(t, ctxFor(t, time.Minute), env.HMS(t, testenv.Source))),
		"$DATABASES", scope.String(), "$ROOTS", roots.String(), "$MAPPINGS", s.mappings, "$LOCAL", fmt.Sprint(s.local),
		"$SRCAUTH", auth, "$SRCNN", nn, "$SRCWEB", env.Get(t, "HIVEDR_HDFS_SRC_HTTP"), "$RETRY", s.retryFor,
		"$SRC", src, "$DR", "hdfs://"+env.Get(t, "HIVEDR_HDFS_DR_NAMENODE"),
	).Replace(`
source:
  name: $PREFIX
  metastore: $HMS
kafka:
  brokers: [$BROKERS]
  topic_prefix: $PREFIX
  replication_factor: 1
  manifest_partitions: 2
schema_registry: $REGISTRY
tailer:
  poll_interval: 200ms
  heartbeat_interval: 1s
  start_event_id: "$START"
  metrics_addr: ""
  list_retry_for: $RETRY
replication:
  databases:
$DATABASES
  source_roots:
$ROOTS
  path_mappings:
    - {source: "$SRC/", target: "$DR/"}
$MAPPINGS
filesystems:
  local: $LOCAL
  hdfs:
    - {authority: "$SRCAUTH", namenodes: [$SRCNN], webhdfs: $SRCWEB, user: hivedr}
`)
	lt.conf = writeFile(t, "tailer.yaml", y)
	lt.proc = startHivedr(t, "tail", "tail", "-config", lt.conf)
	return lt
}

// published waits until the tailer published an event of db of type typ
// naming table (its table or its after-image's), and returns it with the
// copy tasks published for it.
func (lt *listingTailer) published(db string, typ schemas.EventType, table string) (*schemas.Event, []schemas.CopyTask) {
	lt.t.Helper()
	topic := kafka.Topics{Prefix: lt.prefix}.Events(db)
	var ev *schemas.Event
	eventually(lt.t, 2*time.Minute, fmt.Sprintf("%s of %s.%s on %s", typ, db, table, topic), func() bool {
		if lt.proc.exited() {
			lt.t.Fatalf("the tailer exited:\n%s", tail(lt.proc.out.String(), 40))
		}
		if !topicExists(lt.t, lt.env, topic) {
			return false
		}
		for _, e := range events(readTopic(lt.t, lt.env, lt.serde, topic)) {
			if e.EventType == typ && strings.EqualFold(e.Table, table) {
				ev = e
				return true
			}
		}
		return false
	})
	var tasks []schemas.CopyTask
	for _, d := range readTopic(lt.t, lt.env, lt.serde, lt.prefix+".manifests") {
		if c, ok := d.value.(*schemas.CopyTask); ok && c.EventID == ev.EventID {
			tasks = append(tasks, *c)
		}
	}
	return ev, tasks
}

func topicExists(t *testing.T, env *testenv.Env, topic string) bool {
	td, err := env.KafkaAdmin(t).ListTopics(ctxFor(t, 30*time.Second), topic)
	if err != nil {
		return false
	}
	d, ok := td[topic]
	return ok && d.Err == nil
}

// putHDFS writes a small file at loc on fsys.
func putHDFS(t *testing.T, ctx context.Context, fsys fs.FS, loc, body string) {
	t.Helper()
	w, err := fsys.Create(ctx, loc, int64(len(body)))
	if err != nil {
		t.Fatalf("create %s: %v", loc, err)
	}
	if _, err := w.Write([]byte(body)); err != nil {
		t.Fatalf("write %s: %v", loc, err)
	}
	if err := w.Commit(ctx, crc32.Checksum([]byte(body), castagnoli)); err != nil {
		t.Fatalf("commit %s: %v", loc, err)
	}
}

// oneError fails unless ev carries exactly one error, of kind, naming dir.
func oneError(t *testing.T, ev *schemas.Event, kind schemas.EventErrorKind, dir, says string) {
	t.Helper()
	if len(ev.Errors) != 1 || ev.Errors[0].Kind != kind || ev.Errors[0].Path != dir || !strings.Contains(ev.Errors[0].Message, says) {
		t.Fatalf("event %d %s errors %+v; want one %s naming %s and saying %q", ev.EventID, ev.EventType, ev.Errors, kind, dir, says)
	}
}

// TestTailerListingOutsideRoots: an external table's directory outside
// the source roots is never listed: its event carries one
// PATH_OUTSIDE_ROOTS naming the directory (not the files in it, which a
// listing would have found), and the tailer goes on with the next event.
func TestTailerListingOutsideRoots(t *testing.T) {
	env := testenv.Require(t)
	ctx := ctxFor(t, 5*time.Minute)
	u := uniq(t)
	db, other := "lo_"+u, "lo_other_"+u
	srcFS, _ := pipelineFS(t, env)
	w := wl.NewSource(env.HMS(t, testenv.Source), srcFS, env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL"))
	lt := startListingTailer(t, env, listingSetup{databases: []string{db, other}})
	outside := "hdfs://" + env.Get(t, "HIVEDR_HDFS_SRC_NAMENODE") + "/elsewhere/" + u + "/t_out"
	putHDFS(t, ctx, srcFS, outside+"/000000_0", "a file a listing would find\n")
	if err := w.CreateDatabase(ctx, db); err != nil {
		t.Fatal(err)
	}
	if err := w.CreateDatabase(ctx, other); err != nil {
		t.Fatal(err)
	}
	if err := w.CreateTable(ctx, db, "t_out", wl.TableSpec{Columns: []string{"id bigint"}, Location: outside}); err != nil {
		t.Fatal(err)
	}
	if err := w.CreateTable(ctx, other, "t", wl.TableSpec{Columns: []string{"id bigint"}}); err != nil {
		t.Fatal(err)
	}
	ev, tasks := lt.published(db, schemas.EventCreateTable, "t_out")
	oneError(t, ev, schemas.ErrPathOutsideRoots, outside, "directory not listed")
	if len(ev.Files) != 0 || len(tasks) != 0 {
		t.Errorf("the directory outside the roots was listed: files %v, tasks %v", ev.Files, tasks)
	}
	lt.published(other, schemas.EventCreateTable, "t") // the next database's event is not held up
}

// TestTailerListingOutOfScope: a database out of scope is never listed,
// whatever its tables' locations; nothing of it is published, and the
// tailer does not stall on it.
func TestTailerListingOutOfScope(t *testing.T) {
	env := testenv.Require(t)
	ctx := ctxFor(t, 5*time.Minute)
	u := uniq(t)
	in, out := "ls_in_"+u, "ls_out_"+u
	base := t.TempDir()
	local := filepath.Join(base, "t")
	if err := os.MkdirAll(local, 0o755); err != nil {
		t.Fatal(err)
	}
	srcFS, _ := pipelineFS(t, env)
	w := wl.NewSource(env.HMS(t, testenv.Source), srcFS, env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL"))
	// The directory is inside the roots but local files are not enabled:
	// listing it would fail loudly (LISTING_FAILED, logged). Out of scope,
	// it is not tried.
	lt := startListingTailer(t, env, listingSetup{databases: []string{in}, roots: []string{"file:" + base + "/"},
		mappings: fmt.Sprintf("    - {source: %q, target: %q}\n", "file:"+base+"/", "file:"+base+"-dr/")})
	for _, step := range []func() error{
		func() error { return w.CreateDatabase(ctx, out) },
		func() error {
			return w.CreateTable(ctx, out, "t", wl.TableSpec{Columns: []string{"id bigint"}, Location: "file:" + local})
		},
		func() error { return w.CreateDatabase(ctx, in) },
		func() error { return w.CreateTable(ctx, in, "t", wl.TableSpec{Columns: []string{"id bigint"}}) },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	ev, _ := lt.published(in, schemas.EventCreateTable, "t")
	if len(ev.Errors) != 0 {
		t.Errorf("in-scope event carries errors: %+v", ev.Errors)
	}
	if topicExists(t, env, kafka.Topics{Prefix: lt.prefix}.Events(out)) {
		t.Errorf("a topic was created for the out-of-scope database %s", out)
	}
	if log := lt.proc.out.String(); strings.Contains(log, local) {
		t.Errorf("the tailer tried to list an out-of-scope directory:\n%s", tail(log, 20))
	}
}

// TestTailerListingNoStore: a directory inside the roots on a store the
// configuration does not enable (local files, here) cannot be listed by
// any retry: its event carries LISTING_FAILED at once, and other events
// go on.
func TestTailerListingNoStore(t *testing.T) {
	env := testenv.Require(t)
	ctx := ctxFor(t, 5*time.Minute)
	u := uniq(t)
	db := "ln_" + u
	base := t.TempDir()
	local := filepath.Join(base, "t")
	if err := os.MkdirAll(local, 0o755); err != nil {
		t.Fatal(err)
	}
	srcFS, _ := pipelineFS(t, env)
	w := wl.NewSource(env.HMS(t, testenv.Source), srcFS, env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL"))
	lt := startListingTailer(t, env, listingSetup{databases: []string{db}, roots: []string{"file:" + base + "/"},
		mappings: fmt.Sprintf("    - {source: %q, target: %q}\n", "file:"+base+"/", "file:"+base+"-dr/")})
	if err := w.CreateDatabase(ctx, db); err != nil {
		t.Fatal(err)
	}
	if err := w.CreateTable(ctx, db, "t_local", wl.TableSpec{Columns: []string{"id bigint"}, Location: "file:" + local}); err != nil {
		t.Fatal(err)
	}
	if err := w.CreateTable(ctx, db, "t_next", wl.TableSpec{Columns: []string{"id bigint"}}); err != nil {
		t.Fatal(err)
	}
	ev, _ := lt.published(db, schemas.EventCreateTable, "t_local")
	oneError(t, ev, schemas.ErrListingFailed, "file:"+local, "the local filesystem is not enabled")
	lt.published(db, schemas.EventCreateTable, "t_next")
	if log := lt.proc.out.String(); strings.Contains(log, "listing a directory failed; retrying") {
		t.Errorf("the tailer retried a listing no retry can mend:\n%s", tail(log, 20))
	}
}

// TestTailerListingFileScheme: where local files are enabled, file:/p (as
// Hadoop's Path and the metastore write local locations) is the local
// path /p: the directory is listed and its files become copy tasks.
func TestTailerListingFileScheme(t *testing.T) {
	env := testenv.Require(t)
	ctx := ctxFor(t, 5*time.Minute)
	db := "lf_" + uniq(t)
	base := t.TempDir()
	local := filepath.Join(base, "t")
	if err := os.MkdirAll(local, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"000000_0", "000001_0", "_SUCCESS"} {
		if err := os.WriteFile(filepath.Join(local, name), []byte(name+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srcFS, _ := pipelineFS(t, env)
	w := wl.NewSource(env.HMS(t, testenv.Source), srcFS, env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL"))
	lt := startListingTailer(t, env, listingSetup{databases: []string{db}, local: true, roots: []string{"file:" + base + "/"},
		mappings: fmt.Sprintf("    - {source: %q, target: %q}\n", "file:"+base+"/", "file:"+base+"-dr/")})
	if err := w.CreateDatabase(ctx, db); err != nil {
		t.Fatal(err)
	}
	if err := w.CreateTable(ctx, db, "t", wl.TableSpec{Columns: []string{"id bigint"}, Location: "file:" + local}); err != nil {
		t.Fatal(err)
	}
	ev, tasks := lt.published(db, schemas.EventCreateTable, "t")
	if len(ev.Errors) != 0 {
		t.Fatalf("errors %+v", ev.Errors)
	}
	got := map[string]string{}
	for _, task := range tasks {
		got[task.SourceURI] = task.TargetURI
	}
	want := map[string]string{
		local + "/000000_0": "file:" + base + "-dr/t/000000_0",
		local + "/000001_0": "file:" + base + "-dr/t/000001_0",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("copy tasks %v, want %v (the data files, _SUCCESS skipped)", got, want)
	}
}

// TestTailerListingDotDot: a location whose ".." segments lead out of the
// roots is never listed, whichever spelling the metastore keeps (it may
// resolve the segments itself): its event carries PATH_OUTSIDE_ROOTS
// naming the location as published, the file there becomes no copy
// task, and the next event of the database is published after it.
func TestTailerListingDotDot(t *testing.T) {
	env := testenv.Require(t)
	ctx := ctxFor(t, 5*time.Minute)
	u := uniq(t)
	db := "ld_" + u
	srcFS, _ := pipelineFS(t, env)
	w := wl.NewSource(env.HMS(t, testenv.Source), srcFS, env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL"))
	lt := startListingTailer(t, env, listingSetup{databases: []string{db}})
	src := "hdfs://" + env.Get(t, "HIVEDR_HDFS_SRC_NAMENODE")
	putHDFS(t, ctx, srcFS, src+"/elsewhere/"+u+"/t_up/000000_0", "a file a listing would find\n")
	escaping := src + "/external/" + u + "/../../elsewhere/" + u + "/t_up"
	if err := w.CreateDatabase(ctx, db); err != nil {
		t.Fatal(err)
	}
	if err := w.CreateTable(ctx, db, "t_up", wl.TableSpec{Columns: []string{"id bigint"}, Location: escaping}); err != nil {
		t.Fatal(err)
	}
	if err := w.CreateTable(ctx, db, "t_next", wl.TableSpec{Columns: []string{"id bigint"}}); err != nil {
		t.Fatal(err)
	}
	ev, tasks := lt.published(db, schemas.EventCreateTable, "t_up")
	tc, ok := ev.Payload.(*schemas.TableChange)
	if !ok || tc.After == nil {
		t.Fatalf("CREATE_TABLE payload %T", ev.Payload)
	}
	t.Logf("the metastore kept the location %s (asked for %s)", tc.After.Location, escaping)
	oneError(t, ev, schemas.ErrPathOutsideRoots, tc.After.Location, "")
	if len(ev.Files) != 0 || len(tasks) != 0 {
		t.Errorf("a directory outside the roots was listed: files %v, tasks %v", ev.Files, tasks)
	}
	lt.published(db, schemas.EventCreateTable, "t_next")
}

// TestTailerListingUnknownCluster: a directory inside the roots on an
// HDFS cluster the configuration does not name (here the source cluster,
// configured under another authority) cannot be listed by any retry: its
// event carries LISTING_FAILED naming the directory at once, without
// retries, and the next event goes on.
func TestTailerListingUnknownCluster(t *testing.T) {
	env := testenv.Require(t)
	ctx := ctxFor(t, 5*time.Minute)
	u := uniq(t)
	db := "lu_" + u
	srcFS, _ := pipelineFS(t, env)
	w := wl.NewSource(env.HMS(t, testenv.Source), srcFS, env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL"))
	lt := startListingTailer(t, env, listingSetup{databases: []string{db}, srcAuthority: "other-cluster:8020"})
	ext := env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL") + "/" + db + ".db"
	putHDFS(t, ctx, srcFS, ext+"/t_unknown/000000_0", "a file a listing would find\n")
	if err := w.CreateDatabase(ctx, db); err != nil {
		t.Fatal(err)
	}
	if err := w.CreateTable(ctx, db, "t_unknown", wl.TableSpec{Columns: []string{"id bigint"}}); err != nil {
		t.Fatal(err)
	}
	if err := w.CreateTable(ctx, db, "t_next", wl.TableSpec{Columns: []string{"id bigint"}}); err != nil {
		t.Fatal(err)
	}
	ev, tasks := lt.published(db, schemas.EventCreateTable, "t_unknown")
	oneError(t, ev, schemas.ErrListingFailed, ext+"/t_unknown", "no HDFS cluster is configured")
	if len(tasks) != 0 {
		t.Errorf("tasks %v for a directory on an unknown cluster", tasks)
	}
	lt.published(db, schemas.EventCreateTable, "t_next")
	if log := lt.proc.out.String(); strings.Contains(log, "listing a directory failed; retrying") {
		t.Errorf("the tailer retried a listing no retry can mend:\n%s", tail(log, 20))
	}
}

// TestTailerListingTransient: a source NameNode that cannot be reached is
// retried for tailer.list_retry_for, then the event carries
// LISTING_FAILED and the tailer goes on; once the NameNode is back, the
// next table's directory is listed as usual.
func TestTailerListingTransient(t *testing.T) {
	env := testenv.Require(t)
	ctx := ctxFor(t, 5*time.Minute)
	u := uniq(t)
	db := "lt_" + u
	srcFS, _ := pipelineFS(t, env)
	w := wl.NewSource(env.HMS(t, testenv.Source), srcFS, env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL"))
	// The tailer reaches the source NameNode through a forwarder of the
	// test's own, which the test takes away and brings back.
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	nn := env.Get(t, "HIVEDR_HDFS_SRC_NAMENODE")
	fwd := forwardTCP(t, addr, nn)
	lt := startListingTailer(t, env, listingSetup{databases: []string{db}, srcNameNode: addr, retryFor: "3s"})
	ext := env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL") + "/" + db + ".db"
	for _, name := range []string{"t_down", "t_up"} {
		putHDFS(t, ctx, srcFS, ext+"/"+name+"/000000_0", name+"\n")
	}
	if err := w.CreateDatabase(ctx, db); err != nil {
		t.Fatal(err)
	}
	lt.published(db, schemas.EventCreateDatabase, "") // the tailer is past its start
	fwd.close()
	if err := w.CreateTable(ctx, db, "t_down", wl.TableSpec{Columns: []string{"id bigint"}}); err != nil {
		t.Fatal(err)
	}
	ev, tasks := lt.published(db, schemas.EventCreateTable, "t_down")
	oneError(t, ev, schemas.ErrListingFailed, ext+"/t_down", "attempts")
	if len(tasks) != 0 {
		t.Errorf("tasks %v for a directory that could not be listed", tasks)
	}
	if log := lt.proc.out.String(); !strings.Contains(log, "listing a directory failed; retrying") || !strings.Contains(log, "cannot list a directory") {
		t.Errorf("the tailer did not say it retried and then gave up:\n%s", tail(log, 20))
	}
	forwardTCP(t, addr, nn)
	if err := w.CreateTable(ctx, db, "t_up", wl.TableSpec{Columns: []string{"id bigint"}}); err != nil {
		t.Fatal(err)
	}
	ev, tasks = lt.published(db, schemas.EventCreateTable, "t_up")
	if len(ev.Errors) != 0 || len(tasks) != 1 || !strings.HasSuffix(tasks[0].SourceURI, "/t_up/000000_0") {
		t.Errorf("after the NameNode came back: errors %+v, tasks %v; want the one file's task", ev.Errors, tasks)
	}
}

// TestTailerListingHaltsOnlyItsDatabase runs the whole pipeline: a
// partition whose directory lies outside the roots halts its database in
// the applier (the tailer published the event with the error and went
// on), while another database keeps replicating.
func TestTailerListingHaltsOnlyItsDatabase(t *testing.T) {
	u := uniq(t)
	bad, good := "lh_bad_"+u, "lh_good_"+u
	p := startPipeline(t, 6*time.Minute, bad, good)
	outside := "hdfs://" + p.env.Get(t, "HIVEDR_HDFS_SRC_NAMENODE") + "/elsewhere/" + u + "/orders"
	spec := wl.TableSpec{Columns: []string{"id bigint"}, PartitionKeys: []string{"dt"}, Location: outside}
	for _, step := range []func() error{
		func() error { return p.w.CreateDatabase(p.ctx, bad) },
		func() error { return p.w.CreateDatabase(p.ctx, good) },
		func() error { return p.w.CreateTable(p.ctx, bad, "orders", spec) },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	// The CREATE_TABLE of a table outside the roots halts already; the
	// partition's listing is refused in any case.
	if _, err := p.w.AddPartitions(p.ctx, bad, "orders", [][]string{{"2026-12-01"}}, 5); err != nil {
		t.Fatal(err)
	}
	if err := p.w.CreateTable(p.ctx, good, "t", wl.TableSpec{Columns: []string{"id bigint"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, good+".t on DR", func() bool { p.checkAlive(); return p.drTableExists(good, "t") })
	eventually(t, 2*time.Minute, bad+" halted on DR", func() bool {
		p.checkAlive()
		return strings.Contains(p.drParam(t, bad, "hivedr.halted"), "path_outside_roots")
	})
	if h := p.drParam(t, bad, "hivedr.halted"); !strings.Contains(h, outside) {
		t.Errorf("hivedr.halted = %q: want the location outside the roots named", h)
	}
	out, code := runStatus(t, "-config", p.conf, "-db", bad+","+good, "-timeout", "30s")
	if code != 1 || !strings.Contains(out, " halted\n") {
		t.Errorf("hivedr status exited %d, want 1 with %s halted:\n%s", code, bad, out)
	}
}
