package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/iceberg"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/internal/testenv"
)

// icebergTool is the reference Iceberg implementation (Apache Iceberg's
// Java library with its Hive catalog: e2e/stack/iceberg/IcebergTool.java),
// compiled once for the test and run as one JVM serving the test's
// commands in turn (a JVM per command spent seconds on each start).
type icebergTool struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string // the tool's stdout, a line each; closed when it exits
	stderr *tailBuffer
}

// newIcebergTool compiles the tool against the classpath the stack
// resolved (make stack-up) and starts it; it stops when the test ends.
func newIcebergTool(t *testing.T, env *testenv.Env) *icebergTool {
	t.Helper()
	return newIcebergTools(t, env, 1)[0]
}

// newIcebergTools compiles the tool once and starts n of it, for commands
// that run at once (a writer and a reader).
func newIcebergTools(t *testing.T, env *testenv.Env, n int) []*icebergTool {
	t.Helper()
	cpFile, java := env.Get(t, "HIVEDR_ICEBERG_CLASSPATH"), env.Get(t, "HIVEDR_JAVA17")
	b, err := os.ReadFile(cpFile)
	if err != nil {
		t.Fatalf("the Iceberg tool's classpath (make stack-up resolves it): %v", err)
	}
	cp := strings.TrimSpace(string(b))
	classes := t.TempDir()
	javac := filepath.Join(filepath.Dir(java), "javac")
	if out, err := exec.Command(javac, "-d", classes, "-cp", cp, "stack/iceberg/IcebergTool.java").CombinedOutput(); err != nil {
		t.Fatalf("compiling the Iceberg tool: %v\n%s", err, out)
	}
	var tools []*icebergTool
	for range n {
		tools = append(tools, startIcebergTool(t, java, classes+string(os.PathListSeparator)+cp))
	}
	return tools
}

func startIcebergTool(t *testing.T, java, cp string) *icebergTool {
	t.Helper()
	it := &icebergTool{
		cmd:    exec.Command(java, "-cp", cp, "IcebergTool", "serve"),
		lines:  make(chan string, 64),
		stderr: &tailBuffer{max: 64 << 10},
	}
	it.cmd.Stderr = it.stderr
	var err error
	if it.stdin, err = it.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := it.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := it.cmd.Start(); err != nil {
		t.Fatalf("starting the Iceberg tool: %v", err)
	}
	go func() {
		defer close(it.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			it.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		it.stdin.Close() // the end of its stdin ends it
		done := make(chan error, 1)
		go func() { done <- it.cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			it.cmd.Process.Kill()
			<-done
		}
	})
	return it
}

// run runs one command of the tool and returns the JSON lines it
// printed; the test fails at once if the command failed.
func (it *icebergTool) run(ctx context.Context, t *testing.T, args ...string) []map[string]any {
	t.Helper()
	lines, err := it.do(ctx, args...)
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

// do runs one command of the tool and returns the JSON lines it printed,
// or why it failed (with the tail of the tool's log). One goroutine at a
// time.
func (it *icebergTool) do(ctx context.Context, args ...string) ([]map[string]any, error) {
	fail := func(format string, a ...any) error {
		return fmt.Errorf("IcebergTool %s: %s\n%s", strings.Join(args, " "), fmt.Sprintf(format, a...), tail(it.stderr.String(), 30))
	}
	req, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	if _, err := it.stdin.Write(append(req, '\n')); err != nil {
		return nil, fail("writing the command: %v", err)
	}
	timeout := time.NewTimer(3 * time.Minute)
	defer timeout.Stop()
	var lines []map[string]any
	for {
		var text string
		var ok bool
		select {
		case text, ok = <-it.lines:
		case <-timeout.C:
			return nil, fail("no end after 3 minutes")
		case <-ctx.Done():
			return nil, fail("%v", ctx.Err())
		}
		if !ok {
			return nil, fail("the tool exited")
		}
		var l map[string]any
		dec := json.NewDecoder(strings.NewReader(text))
		dec.UseNumber()
		if err := dec.Decode(&l); err != nil {
			return nil, fail("printed %q: %v", text, err)
		}
		if l["end"] == true {
			if e, failed := l["error"]; failed {
				return nil, fail("%v", e)
			}
			return lines, nil
		}
		lines = append(lines, l)
	}
}

// tailBuffer keeps the last max bytes written to it; safe for concurrent
// use (a process writes while a test reads).
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (tb *tailBuffer) Write(p []byte) (int, error) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.b = append(tb.b, p...)
	if over := len(tb.b) - tb.max; over > 0 {
		tb.b = append(tb.b[:0], tb.b[over:]...)
	}
	return len(p), nil
}

func (tb *tailBuffer) String() string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return string(tb.b)
}

// commit runs a writing command of the tool on table db.t1 through the
// source metastore and returns the metadata location it committed.
func (it *icebergTool) commit(ctx context.Context, t *testing.T, env *testenv.Env, db string, args ...string) string {
	t.Helper()
	return fmt.Sprint(it.commitLine(ctx, t, env, db, args...)["metadata_location"])
}

// icebergHistory is a short history of commits: a table created, rows
// appended, one row deleted (a position delete), the partition spec
// evolved, more rows appended.
var icebergHistory = [][]string{{"create"}, {"append", "30", "1"}, {"delete", "1000004"}, {"evolve-spec", "4"}, {"append", "20", "2"}}

// commitAll runs commits in turn on db.t1 (commit) and returns the last
// pointer.
func (it *icebergTool) commitAll(ctx context.Context, t *testing.T, env *testenv.Env, db string, commits [][]string) string {
	t.Helper()
	var last string
	for _, c := range commits {
		last = it.commit(ctx, t, env, db, c...)
	}
	return last
}

// commitLine is commit returning the whole line the tool printed (an
// expiry's names the files it deleted).
func (it *icebergTool) commitLine(ctx context.Context, t *testing.T, env *testenv.Env, db string, args ...string) map[string]any {
	t.Helper()
	out := it.run(ctx, t, append([]string{args[0], env.Get(t, "HIVEDR_HMS_SRC"), env.Get(t, "HIVEDR_HMS_SRC_WAREHOUSE"), db, "t1"}, args[1:]...)...)
	if len(out) != 1 || out[0]["metadata_location"] == nil {
		t.Fatalf("IcebergTool %v printed %v", args, out)
	}
	return out[0]
}

// TestIcebergPathRewrite rewrites an Iceberg table written by the
// reference implementation (internal/iceberg/testdata/t1, from the
// stack's source HDFS) for other roots, a local directory, with
// internal/iceberg, and reads the copy with the reference
// implementation from its metadata file alone: every snapshot has the
// row count and row hash the reference read of the source table, and
// every manifest, data file, delete file and position delete row it
// reads names the new roots (the source's files are not reachable from
// the copy).
func TestIcebergPathRewrite(t *testing.T) {
	env := testenv.Require(t)
	tool := newIcebergTool(t, env)
	ctx := context.Background()
	const srcRoot = "hdfs://127.0.0.1:18020/warehouse/icefix.db/t1"
	fixture := filepath.Join("..", "internal", "iceberg", "testdata")
	dir := t.TempDir()
	drRoot := "file://" + filepath.ToSlash(dir) + "/t1"
	m := func(p string) (string, error) {
		rel, ok := strings.CutPrefix(p, srcRoot)
		if !ok {
			return "", fmt.Errorf("%s is outside %s", p, srcRoot)
		}
		return drRoot + rel, nil
	}
	read := func(_ context.Context, p string) ([]byte, error) {
		rel, ok := strings.CutPrefix(p, srcRoot+"/")
		if !ok {
			return nil, fmt.Errorf("%s is outside %s", p, srcRoot)
		}
		return os.ReadFile(filepath.Join(fixture, "t1", filepath.FromSlash(rel)))
	}
	metas, _ := filepath.Glob(filepath.Join(fixture, "t1", "metadata", "00007-*.metadata.json"))
	if len(metas) != 1 {
		t.Fatalf("the fixture's current metadata: %v", metas)
	}
	metaPath := srcRoot + "/metadata/" + filepath.Base(metas[0])
	metaBytes, err := read(ctx, metaPath)
	if err != nil {
		t.Fatal(err)
	}
	meta, err := iceberg.ParseMetadata(metaBytes)
	if err != nil {
		t.Fatal(err)
	}
	files, err := iceberg.Added(ctx, nil, meta, read)
	if err != nil {
		t.Fatal(err)
	}
	rw := &iceberg.Rewriter{Map: m, Read: read}
	write := func(src string, b []byte) {
		to, err := m(src)
		if err != nil {
			t.Fatal(err)
		}
		p := strings.TrimPrefix(to, "file://")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range files {
		b, err := rw.Rewrite(ctx, f.Path, f.Kind)
		if err != nil {
			t.Fatal(err)
		}
		write(f.Path, b)
	}
	b, err := rw.Rewrite(ctx, metaPath, iceberg.KindMetadata)
	if err != nil {
		t.Fatal(err)
	}
	write(metaPath, b)
	drMeta, _ := m(metaPath)
	t.Logf("%d files rewritten or copied under %s", len(files)+1, drRoot)

	// Every snapshot reads as the reference read the source.
	want := map[string]string{}
	countsFile, err := os.ReadFile(filepath.Join(fixture, "counts.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(countsFile)), "\n") {
		var c struct {
			Snapshot json.Number `json:"snapshot_id"`
			Count    int64       `json:"count"`
			Hash     string      `json:"hash"`
		}
		if err := json.Unmarshal([]byte(l), &c); err != nil {
			t.Fatal(err)
		}
		want[c.Snapshot.String()] = fmt.Sprintf("%d rows, hash %s", c.Count, c.Hash)
	}
	static := "static:" + drMeta
	got := map[string]string{}
	for _, l := range tool.run(ctx, t, "count-all", static, "x", "icefix", "t1") {
		got[fmt.Sprint(l["snapshot_id"])] = fmt.Sprintf("%v rows, hash %v", l["count"], l["hash"])
	}
	if len(want) != len(meta.Snapshots) || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the rewritten copy's snapshots read\n%v\nthe source's (as the reference read them)\n%v", got, want)
	}
	// Everything the reference reads of the copy is under the new root.
	outside := func(what string, v any) {
		if s := fmt.Sprint(v); !strings.HasPrefix(s, drRoot+"/") {
			t.Errorf("%s %s is not under %s", what, s, drRoot)
		}
	}
	listed := 0
	for _, l := range tool.run(ctx, t, "files", static, "x", "icefix", "t1") {
		for _, k := range []string{"metadata_location", "manifest_list", "manifest", "data_file", "delete_file"} {
			if v, ok := l[k]; ok {
				outside(k, v)
				listed++
			}
		}
	}
	rows := 0
	for _, l := range tool.run(ctx, t, "posdeletes", static, "x", "icefix", "t1") {
		outside("position delete file", l["delete_file"])
		outside("position delete row's file_path", l["file_path"])
		rows++
	}
	if listed == 0 || rows == 0 {
		t.Errorf("the reference listed %d paths and %d position delete rows of the copy, want some of each", listed, rows)
	}
	t.Logf("the reference read %d snapshots of the copy as of the source; %d paths and %d position delete rows, all under the new root", len(got), listed, rows)
}

// TestIcebergReplicates runs the pipeline while the reference
// implementation, through the source metastore, creates an Iceberg table
// and commits to it: appends, position deletes, a schema change, a
// partition-spec change, a partition overwrite, then expires all but the
// last two snapshots (deleting their files on the source) and appends
// again; meanwhile an icebergWatch reads DR's table (see there). At the
// end DR points at the source's last metadata, reads every snapshot the
// source keeps alike, everything it reads of the DR table is on DR, and
// the DR copies of the files the expiry deleted on the source are gone.
func TestIcebergReplicates(t *testing.T) {
	env := testenv.Require(t)
	tools := newIcebergTools(t, env, 2)
	ctx := ctxFor(t, 15*time.Minute)
	src, dr := env.HMS(t, testenv.Source), env.HMS(t, testenv.DR)
	db := "ice_" + uniq(t)
	p := newPipeline(t, env, []string{db}, currentEventID(t, ctx, src))
	p.startAll()
	w := watchIceberg(ctx, t, env, tools[0], tools[1], db)
	defer w.stopReading()

	w.commit("create")
	w.commit("append", "30", "1")
	w.commit("delete", "1000004")
	w.commit("evolve-schema", "note")
	w.commit("evolve-spec", "4")
	w.commit("append", "20", "2")
	w.commit("overwrite", "2", "3")
	w.commit("delete", "2000002")
	// Expiry removes files on the source: DR has copied every file the
	// expired snapshots reach first (a copy of a file removed before it
	// was copied waits: docs/iceberg.md).
	waitIcebergPointer(ctx, t, p, dr, db, w.last())
	expired := w.commit("expire", "2")
	w.commit("append", "10", "4")
	waitIcebergPointer(ctx, t, p, dr, db, w.last())
	w.check(p)
	icebergDREqual(ctx, t, tools[0], env, db)

	// What the expiry deleted on the source is gone on DR too.
	_, drFS := pipelineFS(t, env)
	deleted, _ := expired["deleted_files"].([]any)
	if len(deleted) == 0 {
		t.Fatalf("the expiry deleted nothing on the source: %v", expired)
	}
	for _, f := range deleted {
		loc, err := p.mapLocation(fmt.Sprint(f))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := drFS.Stat(ctx, loc); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s, deleted on the source by the expiry, is still on DR (stat: %v)", loc, err)
		}
	}
	t.Logf("the %d files the expiry deleted on the source are gone on DR", len(deleted))
}

// TestIcebergKill9 kills each daemon (-9) in the middle of a commit's
// copy and starts it again: copyd's bandwidth is limited so that a
// commit's data files take seconds to copy, and each kill comes once the
// commit's first completion is committed, checked to be before DR's
// pointer moved. The order of the kills is drawn from the test's seed.
// Throughout, an icebergWatch reads DR's table: its reader only ever
// reads complete snapshots the source had, read alike, and DR's pointer
// only names DR copies of the source's pointers; at the end DR reads
// every snapshot as the source does.
func TestIcebergKill9(t *testing.T) {
	env := testenv.Require(t)
	rng := testRand(t)
	tools := newIcebergTools(t, env, 2)
	ctx := ctxFor(t, 15*time.Minute)
	src, dr := env.HMS(t, testenv.Source), env.HMS(t, testenv.DR)
	db := "icek_" + uniq(t)
	p := newPipeline(t, env, []string{db}, currentEventID(t, ctx, src))
	// About 1 KiB a data file, a dozen files a commit: some 10 s of copy.
	p.editConfig("\ncopyd:\n", "\ncopyd:\n  bytes_per_second: 1536\n")
	p.startAll()
	adm := env.KafkaAdmin(t)
	completions := kafka.Topics{Prefix: p.prefix}.Completions()
	w := watchIceberg(ctx, t, env, tools[0], tools[1], db)
	defer w.stopReading()

	w.commit("create")
	w.commit("evolve-spec", "4") // day x bucket(4, id): up to 12 data files an append
	waitIcebergPointer(ctx, t, p, dr, db, w.last())
	daemons := []string{"tail", "copyd", "apply"}
	rng.Shuffle(len(daemons), func(i, j int) { daemons[i], daemons[j] = daemons[j], daemons[i] })
	for i, d := range daemons {
		before, err := p.mapLocation(w.last())
		if err != nil {
			t.Fatal(err)
		}
		done := committedEnd(ctx, adm, completions)
		w.commit("append", "60", fmt.Sprint(10+i))
		poll(t, 5*time.Minute, 5*time.Millisecond, "the commit's first completion", func() bool {
			p.checkAlive()
			return committedEnd(ctx, adm, completions) > done
		})
		r, err := dr.GetTableReq(ctx, &hive_metastore.GetTableRequest{DbName: db, TblName: "t1"})
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Table.Parameters["metadata_location"]; got != before {
			t.Errorf("round %d: DR already pointed at %s, not the previous %s, when %s was to be killed: the kill tested nothing", i, got, before, d)
		}
		switch d {
		case "tail":
			p.tail.kill9()
			p.startTail()
		case "copyd":
			p.copyd.kill9()
			p.startCopyd()
		case "apply":
			p.apply.kill9()
			p.startApply()
		}
		t.Logf("round %d: %s killed mid-copy and restarted", i, d)
		waitIcebergPointer(ctx, t, p, dr, db, w.last())
	}
	w.check(p)
	icebergDREqual(ctx, t, tools[0], env, db)
}

// icebergWatch is the writer and the readers of the Iceberg tests: the
// writer commits to db.t1 through the source metastore and records every
// pointer it made and, after each commit, the row count and row hash the
// source reads of the new current snapshot; meanwhile a DR reader (the
// reference implementation in another JVM, reading through the DR
// metastore) reads DR's table over and over, and a sampler reads DR's
// pointer every 200 ms. check says that the reader only ever read
// snapshots the source had, each as the source read it, and never failed
// once it had read the table (a snapshot missing a file fails the read),
// and that every pointer sampled is the DR path of a source pointer.
type icebergWatch struct {
	ctx      context.Context
	t        *testing.T
	env      *testenv.Env
	tool, rd *icebergTool
	db       string
	pointers []string // the writer's; the test goroutine only

	stop chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	src  map[string]string         // snapshot ID -> "N rows, hash H"
	dr   map[string]map[string]int // snapshot ID -> what DR read of it -> times
	errs []string                  // the reader's, after its first read
	seen map[string]int            // DR pointer -> samples
}

func watchIceberg(ctx context.Context, t *testing.T, env *testenv.Env, writer, reader *icebergTool, db string) *icebergWatch {
	w := &icebergWatch{ctx: ctx, t: t, env: env, tool: writer, rd: reader, db: db, stop: make(chan struct{}),
		src: map[string]string{}, dr: map[string]map[string]int{}, seen: map[string]int{}}
	drHMS, drWH := env.Get(t, "HIVEDR_HMS_DR"), env.Get(t, "HIVEDR_HMS_DR_WAREHOUSE")
	w.wg.Add(2)
	go func() {
		defer w.wg.Done()
		first := true
		for !w.stopped() {
			out, err := reader.do(ctx, "count", drHMS, drWH, db, "t1")
			switch {
			case err != nil && first:
				w.pace(200 * time.Millisecond) // not on DR yet
			case err != nil:
				w.mu.Lock()
				w.errs = append(w.errs, err.Error())
				w.mu.Unlock()
			case len(out) == 1:
				first = false
				id, r := icebergRead(out[0])
				w.mu.Lock()
				if w.dr[id] == nil {
					w.dr[id] = map[string]int{}
				}
				w.dr[id][r]++
				w.mu.Unlock()
			}
		}
	}()
	sampler := env.HMS(t, testenv.DR) // a connection of its own
	go func() {
		defer w.wg.Done()
		for w.pace(200 * time.Millisecond) {
			r, err := sampler.GetTableReq(ctx, &hive_metastore.GetTableRequest{DbName: db, TblName: "t1"})
			if err != nil {
				continue // not there yet
			}
			w.mu.Lock()
			w.seen[r.Table.Parameters["metadata_location"]]++
			w.mu.Unlock()
		}
	}()
	return w
}

func icebergRead(l map[string]any) (snapshot, read string) {
	return fmt.Sprint(l["snapshot_id"]), fmt.Sprintf("%v rows, hash %v", l["count"], l["hash"])
}

// pace paces a reading loop: it waits d and says whether to go on (false
// once the readers are stopped).
func (w *icebergWatch) pace(d time.Duration) bool {
	select {
	case <-w.stop:
		return false
	case <-time.After(d):
		return true
	}
}

func (w *icebergWatch) stopped() bool {
	select {
	case <-w.stop:
		return true
	default:
		return false
	}
}

// commit runs a writing command of the tool and records its pointer and
// what the source reads of the table after it.
func (w *icebergWatch) commit(args ...string) map[string]any {
	w.t.Helper()
	line := w.tool.commitLine(w.ctx, w.t, w.env, w.db, args...)
	w.pointers = append(w.pointers, fmt.Sprint(line["metadata_location"]))
	out := w.tool.run(w.ctx, w.t, "count", w.env.Get(w.t, "HIVEDR_HMS_SRC"), w.env.Get(w.t, "HIVEDR_HMS_SRC_WAREHOUSE"), w.db, "t1")
	if len(out) != 1 {
		w.t.Fatalf("count printed %v", out)
	}
	id, r := icebergRead(out[0])
	w.mu.Lock()
	w.src[id] = r
	w.mu.Unlock()
	return line
}

// last is the last pointer the writer made.
func (w *icebergWatch) last() string { return w.pointers[len(w.pointers)-1] }

// stopReading stops the reader and the sampler (again: nothing).
func (w *icebergWatch) stopReading() {
	if !w.stopped() {
		close(w.stop)
	}
	w.wg.Wait()
}

// check stops the readers and checks what they read.
func (w *icebergWatch) check(p *pipeline) {
	t := w.t
	t.Helper()
	w.stopReading()
	allowed := map[string]bool{}
	for _, ptr := range w.pointers {
		m, err := p.mapLocation(ptr)
		if err != nil {
			t.Fatal(err)
		}
		allowed[m] = true
	}
	if len(w.seen) == 0 {
		t.Error("the sampler never read DR's table: the check of its pointers saw nothing")
	}
	samples := 0
	for ptr, n := range w.seen {
		samples += n
		if !allowed[ptr] {
			t.Errorf("DR pointed at %s (%d samples), not a DR path of any pointer the source had", ptr, n)
		}
	}
	t.Logf("%d commits; DR showed %d of their pointers over %d samples", len(w.pointers), len(w.seen), samples)
	reads := 0
	for id, got := range w.dr {
		want, ok := w.src[id]
		for r, n := range got {
			reads += n
			switch {
			case !ok:
				t.Errorf("DR's reader read snapshot %s (%s, %d times), which the source never had", id, r, n)
			case r != want:
				t.Errorf("DR's reader read snapshot %s as %s (%d times); the source read it as %s", id, r, n, want)
			}
		}
	}
	if len(w.dr) == 0 {
		t.Error("DR's reader never read the table")
	}
	for i, e := range w.errs {
		if i == 3 {
			t.Errorf("... and %d more failed reads", len(w.errs)-i)
			break
		}
		t.Errorf("DR's reader failed after it had read the table (%d failed reads): %s", len(w.errs), e)
	}
	t.Logf("DR's reader read %d of the source's %d snapshots in %d reads", len(w.dr), len(w.src), reads)
}

// icebergDREqual checks that the reference implementation reads every
// snapshot of table db.t1 through the DR metastore with the row count and
// row hash it reads through the source's, and that everything it reads
// of the DR table (metadata, manifest lists, manifests, data and delete
// files, position delete rows) is under DR's warehouse.
func icebergDREqual(ctx context.Context, t *testing.T, tool *icebergTool, env *testenv.Env, db string) {
	t.Helper()
	drWH := env.Get(t, "HIVEDR_HMS_DR_WAREHOUSE")
	icebergSiteEqual(ctx, t, tool, env, db, "DR", env.Get(t, "HIVEDR_HMS_DR"), drWH, drWH)
}

// icebergSiteEqual is icebergDREqual for a DR site: its metastore drHMS
// (the catalog's warehouse drWH), and the root every path it names must
// be under.
func icebergSiteEqual(ctx context.Context, t *testing.T, tool *icebergTool, env *testenv.Env, db, site, drHMS, drWH, root string) {
	t.Helper()
	srcHMS, srcWH := env.Get(t, "HIVEDR_HMS_SRC"), env.Get(t, "HIVEDR_HMS_SRC_WAREHOUSE")
	counts := func(hms, wh string) map[string]string {
		out := map[string]string{}
		for _, l := range tool.run(ctx, t, "count-all", hms, wh, db, "t1") {
			out[fmt.Sprint(l["snapshot_id"])] = fmt.Sprintf("%v rows, hash %v", l["count"], l["hash"])
		}
		return out
	}
	want, got := counts(srcHMS, srcWH), counts(drHMS, drWH)
	if len(want) == 0 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s's snapshots read\n%v\nthe source's\n%v", site, got, want)
	}
	drRoot := strings.TrimSuffix(root, "/") + "/"
	for _, l := range tool.run(ctx, t, "files", drHMS, drWH, db, "t1") {
		for _, k := range []string{"metadata_location", "manifest_list", "manifest", "data_file", "delete_file"} {
			if v, ok := l[k]; ok && !strings.HasPrefix(fmt.Sprint(v), drRoot) {
				t.Errorf("%s's table names %s %v, not under %s", site, k, v, drRoot)
			}
		}
	}
	for _, l := range tool.run(ctx, t, "posdeletes", drHMS, drWH, db, "t1") {
		if v := fmt.Sprint(l["file_path"]); !strings.HasPrefix(v, drRoot) {
			t.Errorf("a position delete on %s names %s", site, v)
		}
	}
	t.Logf("%s reads %d snapshots as the source does", site, len(got))
}

// waitIcebergPointer waits until DR's db.t1 points at the DR path of the
// source pointer src.
func waitIcebergPointer(ctx context.Context, t *testing.T, p *pipeline, dr *hms.Client, db, src string) {
	t.Helper()
	want, err := p.mapLocation(src)
	if err != nil {
		t.Fatal(err)
	}
	var drPointer string
	defer func() {
		if t.Failed() {
			t.Logf("DR's pointer: %s (want %s)", drPointer, want)
		}
	}()
	eventually(t, 5*time.Minute, "DR's table to point at "+want, func() bool {
		p.checkAlive()
		failIfHalted(t, ctx, dr, db)
		r, err := dr.GetTableReq(ctx, &hive_metastore.GetTableRequest{DbName: db, TblName: "t1"})
		if err != nil {
			drPointer = err.Error()
			return false
		}
		drPointer = r.Table.Parameters["metadata_location"]
		return drPointer == want
	})
}

// TestIcebergBootstrap bootstraps two databases each holding an Iceberg
// table with several snapshots (appends, a position delete, a spec
// change), one of them with the policy external_data: metadata_only,
// which leaves external tables' files behind but not an Iceberg table's
// (its pointer names them): DR gets each table at the source's pointer
// with every snapshot the source has, read alike; a commit after the
// bootstrap follows.
func TestIcebergBootstrap(t *testing.T) {
	env := testenv.Require(t)
	tool := newIcebergTool(t, env)
	ctx := ctxFor(t, 15*time.Minute)
	src, dr := env.HMS(t, testenv.Source), env.HMS(t, testenv.DR)
	u := uniq(t)
	db, meta := "iceb_"+u, "icebm_"+u
	last := map[string]string{}
	for _, d := range []string{db, meta} {
		last[d] = tool.commitAll(ctx, t, env, d, icebergHistory)
	}

	p := newPipeline(t, env, []string{db, meta}, currentEventID(t, ctx, src))
	p.editConfig(fmt.Sprintf(`- {name: %s, exclude_tables: ["tmp_.*"]}`, meta),
		fmt.Sprintf(`- {name: %s, exclude_tables: ["tmp_.*"], external_data: metadata_only}`, meta))
	p.startAll()
	p.requestBootstrap([]string{db, meta}, nil)
	for _, d := range []string{db, meta} {
		eventually(t, 5*time.Minute, d+"'s bootstrap done on DR", func() bool {
			p.checkAlive()
			failIfHalted(t, ctx, dr, d)
			return bootstrapDone(ctx, dr, d) != ""
		})
		waitIcebergPointer(ctx, t, p, dr, d, last[d])
		icebergDREqual(ctx, t, tool, env, d)
	}

	l := tool.commit(ctx, t, env, db, "delete", "2000002")
	waitIcebergPointer(ctx, t, p, dr, db, l)
	icebergDREqual(ctx, t, tool, env, db)
}

// TestIcebergVerify: `hivedr verify` compares an Iceberg table by its
// snapshots. A table replicated by the pipeline (appends, position
// deletes, a spec change) is clean with every data file's checksum
// compared, though DR's metadata files are rewrites of the source's;
// then a data file of DR's current snapshot removed on DR is found
// diverged, naming it.
func TestIcebergVerify(t *testing.T) {
	env := testenv.Require(t)
	tool := newIcebergTool(t, env)
	ctx := ctxFor(t, 10*time.Minute)
	src, dr := env.HMS(t, testenv.Source), env.HMS(t, testenv.DR)
	_, drFS := pipelineFS(t, env)
	db := "icev_" + uniq(t)
	p := newPipeline(t, env, []string{db}, currentEventID(t, ctx, src))
	p.startAll()
	last := tool.commitAll(ctx, t, env, db, icebergHistory)
	waitIcebergPointer(ctx, t, p, dr, db, last)
	eventually(t, time.Minute, "the applier group commits every event", func() bool { return p.caughtUp(ctx) })
	v := p.runVerify("-db", db, "-sample", "1")
	if v.code != 0 || !v.summary.Clean || len(v.findings) != 0 || v.summary.Sampled == 0 {
		t.Fatalf("verify of a replicated Iceberg table: exit %d, %d findings, %d files sampled; want 0, none, some\n%s",
			v.code, len(v.findings), v.summary.Sampled, v.raw)
	}
	t.Logf("clean: %d files, %d sampled", v.summary.Files, v.summary.Sampled)

	var victim string
	for _, l := range tool.run(ctx, t, "files", env.Get(t, "HIVEDR_HMS_DR"), env.Get(t, "HIVEDR_HMS_DR_WAREHOUSE"), db, "t1") {
		if f, ok := l["data_file"]; ok {
			victim = fmt.Sprint(f)
			break
		}
	}
	if victim == "" {
		t.Fatal("DR's current snapshot names no data file")
	}
	if err := drFS.Remove(ctx, victim); err != nil {
		t.Fatal(err)
	}
	root := strings.TrimSuffix(env.Get(t, "HIVEDR_HMS_DR_WAREHOUSE"), "/") + "/" + db + ".db/t1/"
	wantOnly(t, p.runVerify("-db", db, "-sample", "1"), db+".t1 file "+strings.TrimPrefix(victim, root), "not on DR's file system")
}

// TestIcebergRecreate: an Iceberg table dropped on the source (its files
// kept, as a drop without purge keeps them) and created again under the
// same name and location, then committed to, replicates: DR's table is
// the new one, read through the DR metastore alike, its files all on DR.
func TestIcebergRecreate(t *testing.T) {
	env := testenv.Require(t)
	tool := newIcebergTool(t, env)
	ctx := ctxFor(t, 10*time.Minute)
	src, dr := env.HMS(t, testenv.Source), env.HMS(t, testenv.DR)
	db := "icer_" + uniq(t)
	p := newPipeline(t, env, []string{db}, currentEventID(t, ctx, src))
	p.startAll()
	tool.commit(ctx, t, env, db, "create")
	waitIcebergPointer(ctx, t, p, dr, db, tool.commit(ctx, t, env, db, "append", "30", "1"))
	out := tool.run(ctx, t, "drop", env.Get(t, "HIVEDR_HMS_SRC"), env.Get(t, "HIVEDR_HMS_SRC_WAREHOUSE"), db, "t1")
	if len(out) != 1 || out[0]["dropped"] != true {
		t.Fatalf("drop printed %v", out)
	}
	last := tool.commitAll(ctx, t, env, db, [][]string{{"create"}, {"append", "20", "2"}, {"delete", "2000003"}})
	waitIcebergPointer(ctx, t, p, dr, db, last)
	icebergDREqual(ctx, t, tool, env, db)
}

// TestIcebergFanOut: one tailer and two DR sites (the top-level one, and
// site west with the stack's second DR metastore and HDFS cluster under a
// path mapping of its own) replicate an Iceberg table's commits; each
// site's copy daemon rewrites the metadata for its own paths, so each
// site reads every snapshot as the source does and names only its own
// paths.
func TestIcebergFanOut(t *testing.T) {
	env := testenv.Require(t)
	tool := newIcebergTool(t, env)
	ctx := ctxFor(t, 10*time.Minute)
	src, dr, west := env.HMS(t, testenv.Source), env.HMS(t, testenv.DR), env.HMS(t, testenv.DR2)
	db := "icefo_" + uniq(t)
	withWest, westRoot := westSite(t, env, db)
	p := newPipeline(t, env, []string{db}, currentEventID(t, ctx, src), withWest)
	westConf, err := p.cfg.ForSite("west")
	if err != nil {
		t.Fatal(err)
	}
	p.startAll()
	westCopyd, westApply := p.startWest()

	last := tool.commitAll(ctx, t, env, db, icebergHistory)
	waitIcebergPointer(ctx, t, p, dr, db, last)
	want, err := westConf.Replication.MapPath(last)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Minute, "west's table to point at "+want, func() bool {
		for _, pr := range []*proc{westCopyd, westApply} {
			if pr.exited() {
				t.Fatalf("%s exited early:\n%s", pr.name, tail(pr.out.String(), 60))
			}
		}
		failIfHalted(t, ctx, west, db)
		r, err := west.GetTableReq(ctx, &hive_metastore.GetTableRequest{DbName: db, TblName: "t1"})
		return err == nil && r.Table.Parameters["metadata_location"] == want
	})
	icebergDREqual(ctx, t, tool, env, db)
	icebergSiteEqual(ctx, t, tool, env, db, "site west", env.Get(t, "HIVEDR_HMS_DR2"), env.Get(t, "HIVEDR_HMS_DR2_WAREHOUSE"), westRoot)
}
