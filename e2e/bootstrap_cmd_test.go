package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/internal/testenv"
)

// `hivedr bootstrap` end to end: the command writes its request, the
// running tailer publishes the snapshot, copyd copies its files, the
// applier applies it, and the command follows all three to the end.

// existing is what a test puts on the source before replication starts:
// its tables, partitions and files (the workload's).
type existing struct {
	tables, partitions int
}

// seedSource creates db on the source with a partitioned table of parts
// partitions, another of a few, and an unpartitioned one, each with files.
func seedSource(t *testing.T, ctx context.Context, w *wl.Source, db string, parts int) existing {
	t.Helper()
	spec := wl.TableSpec{Columns: []string{"id bigint", "amount double", "note string"}, PartitionKeys: []string{"dt"}}
	if err := w.CreateDatabase(ctx, db); err != nil {
		t.Fatal(err)
	}
	values := func(n int) [][]string {
		var vs [][]string
		for i := range n {
			vs = append(vs, []string{fmt.Sprintf("2026-%02d-%02d", 1+i/28, 1+i%28)})
		}
		return vs
	}
	for _, tb := range []struct {
		name  string
		parts int
	}{{"orders", parts}, {"events", 3}} {
		if err := w.CreateTable(ctx, db, tb.name, spec); err != nil {
			t.Fatal(err)
		}
		if _, err := w.AddPartitions(ctx, db, tb.name, values(tb.parts), 20); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.CreateTable(ctx, db, "accounts", wl.TableSpec{Columns: []string{"id bigint", "owner string"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Insert(ctx, db, "accounts", nil, 30); err != nil {
		t.Fatal(err)
	}
	return existing{tables: 3, partitions: parts + 3}
}

// dbStatus runs `hivedr status -json` on db and returns its row and the
// exit code.
func dbStatus(t *testing.T, conf, db string) (statusDB, int) {
	t.Helper()
	out, code := runStatus(t, "-config", conf, "-db", db, "-json", "-timeout", "30s")
	// The JSON object is what stdout holds; stderr may hold a line before.
	if i := strings.Index(out, "{"); i >= 0 {
		out = out[i:]
	}
	var rep statusJSON
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Databases) != 1 {
		t.Fatalf("hivedr status -json: %v, %d databases:\n%s", err, len(rep.Databases), out)
	}
	return rep.Databases[0], code
}

// TestBootstrapCommand: a database with tables, partitions and files on
// the source before replication starts; tail and apply running, copyd not
// yet. `hivedr bootstrap -db` is run; status shows the database
// bootstrapping (the snapshot cannot be applied before its files are
// copied, so it stays so until copyd starts, which it does once status
// has said so). The command is killed then and run again: the second run
// exits 0 with the figures, the DR equals the source, a later change
// replicates, and status says ok.
func TestBootstrapCommand(t *testing.T) {
	env := testenv.Require(t)
	ctx := ctxFor(t, 10*time.Minute)
	src, dr := env.HMS(t, testenv.Source), env.HMS(t, testenv.DR)
	srcFS, drFS := pipelineFS(t, env)
	w := wl.NewSource(src, srcFS, env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL"))
	rng := testRand(t)
	db := "bcmd_" + uniq(t)
	seeded := seedSource(t, ctx, w, db, 20+rng.IntN(30))
	t.Logf("source database %s: %d tables, %d partitions, %d files", db, seeded.tables, seeded.partitions, len(w.LiveFiles()))

	// Replication starts after the database exists: its events are not
	// published, as with any warehouse that predates hivedr.
	p := newPipeline(t, env, []string{db}, currentEventID(t, ctx, src))
	p.startTail()
	p.startApply()
	b := startHivedr(t, "bootstrap", "bootstrap", "-config", p.conf, "-db", db)

	var row statusDB
	poll(t, 3*time.Minute, time.Second, "hivedr status showing "+db+" bootstrapping", func() bool {
		p.checkAlive()
		if b.exited() {
			t.Fatalf("hivedr bootstrap exited before copyd started:\n%s", tail(b.out.String(), 30))
		}
		var code int
		row, code = dbStatus(t, p.conf, db)
		if row.State == "bootstrapping" && code != 1 {
			t.Errorf("status -db %s exited %d while it bootstraps, want 1 (not caught up)", db, code)
		}
		return row.State == "bootstrapping" && row.Bootstrap != nil && row.Bootstrap.TablesTotal > 0
	})
	if bs := row.Bootstrap; !strings.HasPrefix(bs.BootstrapID, db+"-") || bs.TablesTotal != int64(seeded.tables) || bs.Phase == "" {
		t.Errorf("status's bootstrap figures %+v: want %d tables and the bootstrap's ID", *bs, seeded.tables)
	}
	text, _ := runStatus(t, "-config", p.conf, "-db", db, "-timeout", "30s")
	if !strings.Contains(text, "bootstrapping") || !strings.Contains(text, row.Bootstrap.BootstrapID) {
		t.Errorf("status text does not show the bootstrap:\n%s", text)
	}

	// The command is only a follower: killed, and run again, it follows
	// the first run's bootstrap when the tailer is still publishing it, or
	// the bootstrap the tailer starts for the new request (a re-bootstrap
	// converges all the same).
	b.kill9()
	b = startHivedr(t, "bootstrap again", "bootstrap", "-config", p.conf, "-db", db)
	poll(t, time.Minute, 200*time.Millisecond, "the second request written", func() bool {
		return b.exited() || strings.Contains(b.out.String(), "written to")
	})
	p.startCopyd()
	start := time.Now()
	if code := b.wait(t, 5*time.Minute); code != 0 {
		t.Fatalf("hivedr bootstrap exited %d:\n%s", code, tail(b.out.String(), 40))
	}
	out := b.out.String()
	t.Logf("hivedr bootstrap done %s after copyd started; its output:\n%s", time.Since(start).Round(time.Millisecond), tail(out, 12))
	files := len(w.LiveFiles())
	for _, want := range []string{
		"request r", "written to " + kafka.Topics{Prefix: p.prefix}.Control(),
		fmt.Sprintf("tables %d/%d", seeded.tables, seeded.tables),
		fmt.Sprintf("partitions %d/%d", seeded.partitions, seeded.partitions),
		fmt.Sprintf("files copied %d/%d", files, files),
		"bootstrap done in ", fmt.Sprintf("1 databases, %d tables, %d partitions, %d files", seeded.tables, seeded.partitions, files),
		"msg=\"bootstrap: ", "progress=\"tables=", // the log line (not a terminal)
	} {
		if !strings.Contains(out, want) {
			t.Errorf("hivedr bootstrap's output lacks %q", want)
		}
	}
	p.converge(ctx, src, dr, srcFS, drFS, 2*time.Minute)
	if d, err := dr.GetDatabase(ctx, db); err != nil || !strings.Contains(out, d.Parameters["hivedr.bootstrap.done"]+" done") {
		t.Errorf("the DR database's hivedr.bootstrap.done (%v, %v) is not the bootstrap the command followed", d.Parameters["hivedr.bootstrap.done"], err)
	}

	// The database now replicates as any other.
	if _, err := w.AddPartitions(ctx, db, "orders", [][]string{{"2027-01-01"}}, 5); err != nil {
		t.Fatal(err)
	}
	p.converge(ctx, src, dr, srcFS, drFS, 2*time.Minute)
	poll(t, time.Minute, time.Second, "hivedr status -db "+db+" ok", func() bool {
		row, code := dbStatus(t, p.conf, db)
		return code == 0 && row.State == "ok" && row.Bootstrap == nil
	})
}

// TestBootstrapCommandScale: a database of 500 partitions with files
// (4 tables of 125), the three daemons running, bootstrapped by the
// command; its wall time and the command's peak RSS are logged (the
// command keeps one entry per copy task it saw completed).
func TestBootstrapCommandScale(t *testing.T) {
	env := testenv.Require(t)
	ctx := ctxFor(t, 15*time.Minute)
	src, dr := env.HMS(t, testenv.Source), env.HMS(t, testenv.DR)
	srcFS, drFS := pipelineFS(t, env)
	w := wl.NewSource(src, srcFS, env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL"))
	db := "bcmdscale_" + uniq(t)
	if err := w.CreateDatabase(ctx, db); err != nil {
		t.Fatal(err)
	}
	spec := wl.TableSpec{Columns: []string{"id bigint", "note string"}, PartitionKeys: []string{"dt"}}
	const tables, per = 4, 125
	seeding := time.Now()
	for i := range tables {
		name := fmt.Sprintf("t%d", i)
		if err := w.CreateTable(ctx, db, name, spec); err != nil {
			t.Fatal(err)
		}
		var vals [][]string
		for j := range per {
			vals = append(vals, []string{fmt.Sprintf("p%04d", j)})
		}
		if _, err := w.AddPartitions(ctx, db, name, vals, 2); err != nil {
			t.Fatal(err)
		}
	}
	files := len(w.LiveFiles())
	t.Logf("seeded %s: %d tables, %d partitions, %d files in %s", db, tables, tables*per, files, time.Since(seeding).Round(time.Second))
	p := newPipeline(t, env, []string{db}, currentEventID(t, ctx, src))
	p.startAll()
	start := time.Now()
	// On a terminal (script(1) gives it one), the command draws bars.
	b := startOnTerminal(t, "bootstrap", "bootstrap", "-config", p.conf, "-db", db)
	peak := peakRSSBelow(b.cmd.Process.Pid, hivedrBin(t), b.done)
	if code := b.wait(t, 10*time.Minute); code != 0 {
		t.Fatalf("hivedr bootstrap exited %d:\n%s", code, tail(b.out.String(), 30))
	}
	took := time.Since(start)
	out := b.out.String()
	// A frame is a header, 4 bars and 1 database: the next goes 6 up.
	for _, want := range []string{"\x1b[2Kpartitions [", "\x1b[2Kbytes      [", "/s eta ", "\x1b[6A"} {
		if !strings.Contains(out, want) {
			t.Errorf("the bars on a terminal lack %q:\n%q", want, tail(out, 12))
		}
	}
	if strings.Contains(out, "msg=\"bootstrap: ") {
		t.Errorf("on a terminal the command logged its progress instead of drawing it")
	}
	if want := fmt.Sprintf("1 databases, %d tables, %d partitions, %d files", tables, tables*per, files); !strings.Contains(out, want) {
		t.Errorf("the output lacks %q:\n%s", want, tail(out, 10))
	}
	// The command's own peak (VmHWM), read while it ran: the rusage of
	// script's tree counted more than the command on a long test run.
	rss := <-peak / 1024 // KiB
	t.Logf("hivedr bootstrap of %d partitions and %d files: %s (%.0f partitions/s), the command's peak RSS %d MiB; its log:\n%s",
		tables*per, files, took.Round(100*time.Millisecond), float64(tables*per)/took.Seconds(), rss/1024, tail(out, 8))
	if rss == 0 || rss > 300*1024 {
		t.Errorf("the command's peak RSS %d KiB: want it measured and under 300 MiB", rss)
	}
	p.converge(ctx, src, dr, srcFS, drFS, 3*time.Minute)
}

// TestBootstrapCommandNotAReplica: the DR site already has a database of
// the same name that is not a replica (a user's). The applier refuses to
// write into it (not_a_replica) and, the database not being its own,
// records the halt only in its metric; `hivedr bootstrap` reads that and
// exits 1 naming the database and the reason, and the user's database is
// untouched.
func TestBootstrapCommandNotAReplica(t *testing.T) {
	env := testenv.Require(t)
	ctx := ctxFor(t, 5*time.Minute)
	src, dr := env.HMS(t, testenv.Source), env.HMS(t, testenv.DR)
	srcFS, drFS := pipelineFS(t, env)
	db := "bcmdnar_" + uniq(t)
	seedSource(t, ctx, wl.NewSource(src, srcFS, env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL")), db, 2)
	if err := wl.NewSource(dr, drFS, env.Get(t, "HIVEDR_HMS_DR_EXTERNAL")).CreateDatabase(ctx, db); err != nil {
		t.Fatal(err)
	}
	p := newPipeline(t, env, []string{db}, currentEventID(t, ctx, src))
	p.startAll()
	start := time.Now()
	b := startHivedr(t, "bootstrap", "bootstrap", "-config", p.conf, "-db", db)
	if code := b.wait(t, 3*time.Minute); code != 1 {
		t.Fatalf("hivedr bootstrap into a user's DR database exited %d, want 1:\n%s", code, tail(b.out.String(), 20))
	}
	out := b.out.String()
	t.Logf("hivedr bootstrap exited 1 after %s:\n%s", time.Since(start).Round(time.Millisecond), tail(out, 6))
	for _, want := range []string{"database " + db + " halted on DR", `reason="not_a_replica"`} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q:\n%s", want, tail(out, 10))
		}
	}
	d, err := dr.GetDatabase(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Parameters) != 0 {
		t.Errorf("the user's DR database was written: %v", d.Parameters)
	}
}

// TestBootstrapCommandRepairChain: a database replicated by a first
// bootstrap; the tailer is stopped, the source changes (a table dropped,
// one created, partitions added) and its log is purged past the tailer's
// checkpoint, so the restarted tailer stops CHAIN_BROKEN. `hivedr
// bootstrap` without -repair-chain refuses and names it; with it, the
// restarted tailer resumes after the gap, bootstraps the scope, and the
// DR converges (the dropped table removed) while the command follows to
// exit 0.
//
// The log is a synthetic one (the real metastore's must not be purged
// under other tests): the tailer reads its events from it and the
// database's objects from the real source metastore.
func TestBootstrapCommandRepairChain(t *testing.T) {
	env := testenv.Require(t)
	ctx := ctxFor(t, 10*time.Minute)
	src, dr := env.HMS(t, testenv.Source), env.HMS(t, testenv.DR)
	srcFS, drFS := pipelineFS(t, env)
	w := wl.NewSource(src, srcFS, env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL"))
	db := "bcmdrep_" + uniq(t)
	seedSource(t, ctx, w, db, 8)

	log := newSynthLog(t, env)
	log.addDatabases(t, db)
	rows := capturedRows(t) // of other databases: out of the scope
	_, first := log.append(t, rows)
	p := newPipeline(t, env, []string{db}, 0)
	usePostgresSource(t, p, log.DSN)
	p.startAll()
	s := serde(t, env)
	cpTopic := kafka.Topics{Prefix: p.prefix}.Checkpoints()
	poll(t, 2*time.Minute, 500*time.Millisecond, "the tailer's checkpoint at the synthetic log's end", func() bool {
		p.checkAlive()
		return lastCheckpoint(t, env, s, cpTopic, p.prefix) >= first
	})
	boot := startHivedr(t, "first bootstrap", "bootstrap", "-config", p.conf, "-db", db)
	if code := boot.wait(t, 5*time.Minute); code != 0 {
		t.Fatalf("the first bootstrap exited %d:\n%s", code, tail(boot.out.String(), 30))
	}
	p.converge(ctx, src, dr, srcFS, drFS, 2*time.Minute)

	// The outage: changes the tailer will never see as events.
	p.tail.stop(t)
	p.tail = nil
	if err := w.DropTable(ctx, db, "events", false); err != nil {
		t.Fatal(err)
	}
	if err := w.CreateTable(ctx, db, "late", wl.TableSpec{Columns: []string{"id bigint"}, PartitionKeys: []string{"dt"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.AddPartitions(ctx, db, "late", [][]string{{"a"}, {"b"}}, 10); err != nil {
		t.Fatal(err)
	}
	if _, err := w.AddPartitions(ctx, db, "orders", [][]string{{"2027-02-01"}}, 10); err != nil {
		t.Fatal(err)
	}
	from, _ := log.append(t, rows)
	log.purge(t, from, from+4)
	broken := startHivedr(t, "tailer after purge", "tail", "-config", p.conf)
	if code := broken.wait(t, 2*time.Minute); code != 3 {
		t.Fatalf("tailer exited %d after a purge, want 3 (CHAIN_BROKEN):\n%s", code, tail(broken.out.String(), 20))
	}
	if out := broken.out.String(); !strings.Contains(out, "hivedr bootstrap -repair-chain") {
		t.Errorf("the tailer's CHAIN_BROKEN error does not name the repair:\n%s", tail(out, 10))
	}
	text, code := runStatus(t, "-config", p.conf, "-db", db, "-timeout", "30s")
	if code != 1 || !strings.Contains(text, "chain_broken") || !strings.Contains(text, "hivedr bootstrap -repair-chain") {
		t.Errorf("hivedr status exited %d, want 1 naming chain_broken and the repair:\n%s", code, text)
	}

	// A plain bootstrap cannot run behind the broken chain.
	plain := startHivedr(t, "plain bootstrap", "bootstrap", "-config", p.conf, "-db", db)
	if code := plain.wait(t, time.Minute); code != 1 || !strings.Contains(plain.out.String(), "-repair-chain") {
		t.Errorf("a plain bootstrap behind CHAIN_BROKEN exited %d, want 1 naming -repair-chain:\n%s", code, plain.out.String())
	}

	repair := startHivedr(t, "repair", "bootstrap", "-config", p.conf, "-repair-chain")
	poll(t, time.Minute, 200*time.Millisecond, "the repair request written", func() bool {
		if repair.exited() {
			t.Fatalf("hivedr bootstrap -repair-chain exited early:\n%s", repair.out.String())
		}
		return strings.Contains(repair.out.String(), "restart hivedr tail now")
	})
	p.startTail()
	if code := repair.wait(t, 5*time.Minute); code != 0 {
		t.Fatalf("hivedr bootstrap -repair-chain exited %d:\n%s\ntailer:\n%s", code, tail(repair.out.String(), 30), tail(p.tail.out.String(), 30))
	}
	out := repair.out.String()
	t.Logf("hivedr bootstrap -repair-chain, after the tailer's restart:\n%s", tail(out, 4))
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(db) + ` (\S+) done: tables (\d+)/(\d+)`).FindStringSubmatch(out)
	if m == nil || m[2] != "3" || m[3] != "3" {
		t.Errorf("the repair's output lacks %s done with 3 tables:\n%s", db, tail(out, 15))
	}
	if !strings.Contains(out, "chain_broken: every database in scope") {
		t.Errorf("the repair's output does not name its reason and scope:\n%s", tail(out, 15))
	}
	p.converge(ctx, src, dr, srcFS, drFS, 2*time.Minute)
	if _, err := dr.GetTable(ctx, db, "events"); err == nil {
		t.Errorf("%s.events, dropped during the outage, is still on DR", db)
	}
	poll(t, time.Minute, time.Second, "hivedr status -db "+db+" ok after the repair", func() bool {
		row, code := dbStatus(t, p.conf, db)
		return code == 0 && row.State == "ok"
	})
}

// usePostgresSource points a pipeline's tailer at a synthetic log (postgres
// kind) while bootstraps still read the real source metastore.
func usePostgresSource(t *testing.T, p *pipeline, dsn string) {
	t.Helper()
	b, err := os.ReadFile(p.conf)
	if err != nil {
		t.Fatal(err)
	}
	y := strings.Replace(string(b), "  kind: thrift\n", fmt.Sprintf("  kind: postgres\n  postgres_dsn: %q\n", dsn), 1)
	if y == string(b) {
		t.Fatal("the pipeline's configuration has no source kind to replace")
	}
	if err := os.WriteFile(p.conf, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
}

// startOnTerminal runs `hivedr args...` with a pseudo-terminal as its
// stdout and stderr, through script(1) (util-linux; Debian's bsdutils,
// an essential package). A machine without it fails the test: the
// terminal's progress bars would go unchecked.
func startOnTerminal(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	sc, err := exec.LookPath("script")
	if err != nil {
		t.Fatalf("script(1), which gives %s a terminal, is not installed (Debian: bsdutils): %v", name, err)
	}
	line := shellQuote(hivedrBin(t))
	for _, a := range args {
		line += " " + shellQuote(a)
	}
	p := &proc{name: name, cmd: exec.Command(sc, "-qefc", line, "/dev/null"), out: &syncBuffer{}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.kill9()
		if t.Failed() {
			t.Logf("output of %s:\n%s", name, tail(p.out.String(), 60))
		}
	})
	return p
}

// peakRSSBelow follows the processes below pid until done closes, and
// then sends the largest peak resident set (VmHWM, bytes) seen of one
// running the executable bin among them (0: none seen).
func peakRSSBelow(pid int, bin string, done <-chan struct{}) <-chan int64 {
	out := make(chan int64, 1)
	go func() {
		var peak int64
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			for _, d := range descendants(pid) {
				if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", d)); err == nil && exe == bin {
					peak = max(peak, vmHWM(d))
				}
			}
			select {
			case <-done:
				out <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return out
}

// descendants are the processes below pid, from /proc.
func descendants(pid int) []int {
	parent := map[int]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", n))
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 {
			parent[n], _ = strconv.Atoi(f[1])
		}
	}
	var out []int
	for n := range parent {
		for p := parent[n]; p > 1; p = parent[p] {
			if p == pid {
				out = append(out, n)
				break
			}
		}
	}
	return out
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
