package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/beltran/gohive/hive_metastore"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/internal/failover"
	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/testenv"
	"github.com/hivedr/hivedr/schemas"
)

// runTool runs a hivedr operator command to its end and returns its
// stdout, stderr and exit code.
func runTool(t *testing.T, d time.Duration, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, hivedrBin(t), args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("hivedr %s: %v\n%s", strings.Join(args, " "), err, e.String())
	}
	return o.String(), e.String(), code
}

// failoverSteps is a small workload on two databases: tables, partitions
// with files, inserts.
func failoverSteps(db1, db2 string) []workloadStep {
	orders := wl.TableSpec{Columns: []string{"id bigint", "amount double"}, PartitionKeys: []string{"dt"}}
	accounts := wl.TableSpec{Columns: []string{"id bigint", "owner string"}}
	return []workloadStep{
		{"create databases", func(ctx context.Context, s *wl.Source) error {
			if err := s.CreateDatabase(ctx, db1); err != nil {
				return err
			}
			return s.CreateDatabase(ctx, db2)
		}},
		{"create tables", func(ctx context.Context, s *wl.Source) error {
			for _, db := range []string{db1, db2} {
				if err := s.CreateTable(ctx, db, "orders", orders); err != nil {
					return err
				}
				if err := s.CreateTable(ctx, db, "accounts", accounts); err != nil {
					return err
				}
			}
			return nil
		}},
		{"partitions and inserts", func(ctx context.Context, s *wl.Source) error {
			for _, db := range []string{db1, db2} {
				if _, err := s.AddPartitions(ctx, db, "orders", [][]string{{"2026-12-01"}, {"2026-12-02"}}, 20); err != nil {
					return err
				}
				if _, err := s.Insert(ctx, db, "accounts", nil, 10); err != nil {
					return err
				}
			}
			return nil
		}},
	}
}

// runFailover runs `hivedr failover -json` and decodes its report.
func runFailover(t *testing.T, conf string, args ...string) (*failover.Report, string, int) {
	t.Helper()
	out, errOut, code := runTool(t, 4*time.Minute, append([]string{"failover", "-config", conf, "-json"}, args...)...)
	if code != 0 {
		return nil, errOut, code
	}
	var rep failover.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("failover -json output: %v\n%s", err, out)
	}
	return &rep, errOut, code
}

// checkFailedOver asserts a DR database carries the failover's marks and
// no replica marker, and returns its parameters.
func checkFailedOver(t *testing.T, ctx context.Context, dr *hms.Client, db, mode string, reached int64) map[string]string {
	t.Helper()
	d, err := dr.GetDatabase(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	p := d.Parameters
	if p[drparam.FailedOverAt] == "" || p[drparam.FailoverMode] != mode || p[drparam.FailoverEventID] != fmt.Sprint(reached) {
		t.Errorf("DR database %s after the failover: %v; want %s=%s at event %d", db, p, drparam.FailoverMode, mode, reached)
	}
	if _, ok := p[drparam.Target]; ok {
		t.Errorf("DR database %s still carries %s: not writable", db, drparam.Target)
	}
	return p
}

// writeAndRefuse shows the failed-over database is writable on DR, and
// that the still running applier refuses to write into it: a change on
// the source halts it failed_over and does not reach DR.
func writeAndRefuse(t *testing.T, p *pipelineTest, db string) {
	t.Helper()
	env := testenv.Require(t)
	drw := wl.NewSource(p.dr, p.drFS, env.Get(t, "HIVEDR_HMS_DR_EXTERNAL"))
	if err := drw.CreateTable(p.ctx, db, "written_on_dr", wl.TableSpec{Columns: []string{"id bigint"}}); err != nil {
		t.Fatalf("create a table on the failed-over DR database: %v", err)
	}
	if _, err := drw.Insert(p.ctx, db, "written_on_dr", nil, 5); err != nil {
		t.Fatalf("insert into the failed-over DR database: %v", err)
	}
	if p.apply == nil || p.apply.exited() {
		return
	}
	if err := p.w.CreateTable(p.ctx, db, "late_on_source", wl.TableSpec{Columns: []string{"id bigint"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "the applier halts "+db+" failed_over", func() bool {
		return strings.Contains(grepLines(p.apply.out.String(), "db="+db), "reason=failed_over")
	})
	if hasTable(t, p.ctx, p.dr, db, "late_on_source") {
		t.Errorf("the applier wrote late_on_source into the failed-over DR database %s", db)
	}
	d, err := p.dr.GetDatabase(p.ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if d.Parameters[drparam.Halted] != "" {
		t.Errorf("the applier wrote its halt into the failed-over database: %s", d.Parameters[drparam.Halted])
	}
}

// TestFailoverPlanned: with the source up, a planned failover of two
// databases waits for DR to have everything (RPO 0), marks both (verify
// clean), leaves them writable on DR, makes the running applier refuse
// them, and refuses to run again.
func TestFailoverPlanned(t *testing.T) {
	u := uniq(t)
	db1, db2 := "fo_sales_"+u, "fo_crm_"+u
	p := startPipeline(t, 8*time.Minute, db1, db2)
	p.runSteps(failoverSteps(db1, db2), nil)
	// One more change, not waited for: the failover's wait must cover it.
	if _, err := p.w.Insert(p.ctx, db2, "accounts", nil, 7); err != nil {
		t.Fatal(err)
	}
	rep, errOut, code := runFailover(t, p.conf, "-db", db1+","+db2, "-planned", "-timeout", "3m")
	if code != 0 {
		t.Fatalf("failover exited %d:\n%s", code, errOut)
	}
	t.Logf("failover: cut %d, waited %.1fs, took %.1fs", rep.Cut, rep.WaitSeconds, rep.Seconds)
	if rep.Mode != failover.Planned || len(rep.Databases) != 2 || rep.SourceHead <= 0 || rep.TailerEventID < rep.SourceHead {
		t.Fatalf("report %+v", rep)
	}
	for _, d := range rep.Databases {
		if d.LostEvents != 0 || d.RPOSeconds != 0 || !d.CaughtUp {
			t.Errorf("%s: RPO %d events %.1fs caught up %v, want RPO 0", d.Database, d.LostEvents, d.RPOSeconds, d.CaughtUp)
		}
		if d.Reached < rep.Cut || d.Reached != rep.TailerEventID {
			t.Errorf("%s reached %d, want the tailer's checkpoint %d", d.Database, d.Reached, rep.TailerEventID)
		}
		checkFailedOver(t, p.ctx, p.dr, d.Database, "planned", d.Reached)
	}
	// Independently: DR equals the source, the unwaited insert included,
	// and hivedr verify says so (every file's checksum compared).
	if diffs, err := wl.Compare(p.ctx, p.src, p.dr, p.srcFS, p.drFS, p.dbs, p.mapLocation); err != nil || len(diffs) > 0 {
		t.Fatalf("DR differs from the source after a planned failover: %v %v", err, diffs)
	}
	verifyClean(t, p.conf, db1, db2)
	// Twice: refused, nothing changed.
	before, _ := p.dr.GetDatabase(p.ctx, db1)
	if _, errOut, code := runFailover(t, p.conf, "-db", db1, "-planned", "-timeout", "1m"); code != 1 || !strings.Contains(errOut, "failed over already") {
		t.Errorf("a second failover exited %d: %s", code, errOut)
	}
	after, _ := p.dr.GetDatabase(p.ctx, db1)
	if before.Parameters[drparam.FailedOverAt] != after.Parameters[drparam.FailedOverAt] {
		t.Error("the refused second failover changed the database")
	}
	writeAndRefuse(t, p, db1)
}

// stackDaemon runs `stack.sh stop|start DAEMON` on the stack the tests
// use (its directory and port offset from the env file).
func stackDaemon(t *testing.T, env *testenv.Env, action, daemon string) {
	t.Helper()
	start := time.Now()
	cmd := exec.Command("bash", filepath.Join("stack", "stack.sh"), action, daemon)
	cmd.Env = append(os.Environ(), "HIVEDR_STACK_DIR="+env.Get(t, "HIVEDR_STACK_DIR"), "HIVEDR_STACK_PORT_OFFSET="+env.Get(t, "HIVEDR_STACK_PORT_OFFSET"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("stack.sh %s %s: %v\n%s", action, daemon, err, out)
	}
	t.Logf("stack.sh %s %s: %s", action, daemon, time.Since(start).Round(100*time.Millisecond))
}

// sourceEventTime is the time the source log gives event id.
func sourceEventTime(t *testing.T, ctx context.Context, src *hms.Client, id int64) time.Time {
	t.Helper()
	one := int32(1)
	resp, err := src.GetNextNotification(ctx, &hive_metastore.NotificationEventRequest{LastEvent: id - 1, MaxEvents: &one})
	if err != nil || len(resp.Events) == 0 || resp.Events[0].EventId != id {
		t.Fatalf("event %d of the source log: %v %+v", id, err, resp)
	}
	return time.Unix(int64(resp.Events[0].EventTime), 0)
}

// TestFailoverUnplanned: the tailer stops first (the primary site fails),
// the test creates 3 tables in the source log (3 events it knows were
// never published), then the real source metastore of the shared stack
// is stopped and the failover runs with its configuration unchanged. DR
// applies what Kafka holds; the report says what it reflects and that
// the loss is unknown (the source is unreadable), and its RPO in seconds
// is the failover time minus the source log's own time of that event.
// The metastore comes back (at once, and in any case at the test's end);
// the old primary's tailer too, whose late event (one table the test
// creates) the applier refuses. Failback reads the old primary's log and
// splits it at the failover: exactly the test's 3 lost events, recorded
// on the DR database as its RPO in events, and the 1 written after. The
// reverse pipeline's daemons carry it out: the tables only the old
// primary has are dropped there, DR's table comes back, and verify of the
// reverse pipeline is clean.
func TestFailoverUnplanned(t *testing.T) {
	u := uniq(t)
	db1, db2 := "fu_sales_"+u, "fu_crm_"+u
	p := startPipeline(t, 12*time.Minute, db1, db2)
	env := testenv.Require(t)
	p.runSteps(failoverSteps(db1, db2), nil)
	p.converge(p.ctx, p.src, p.dr, p.srcFS, p.drFS, 3*time.Minute)
	// The last change before the site fails is in Kafka but not applied
	// (the applier is stopped meanwhile): the failover must apply it.
	p.apply.stop(t)
	if _, err := p.w.Insert(p.ctx, db2, "accounts", nil, 9); err != nil {
		t.Fatal(err)
	}
	head := currentEventID(t, p.ctx, p.src)
	eventually(t, time.Minute, "the tailer published the last change", func() bool { return tailerCheckpoint(t, p.pipeline) >= head })
	p.tail.stop(t)
	published := tailerCheckpoint(t, p.pipeline)
	stopped := time.Now()
	p.startApply()

	// Lost: written after the tailer stopped, counted in the source log.
	const lostTables = 3
	for i := range lostTables {
		if err := p.w.CreateTable(p.ctx, db1, fmt.Sprintf("lost_%d", i), wl.TableSpec{Columns: []string{"id bigint"}}); err != nil {
			t.Fatal(err)
		}
	}
	lost := sourceEventsAfter(t, p.ctx, p.src, published, db1)
	if lost != lostTables {
		t.Fatalf("independently counted %d events of %s after the tailer's checkpoint %d, want %d", lost, db1, published, lostTables)
	}
	reachedAt := sourceEventTime(t, p.ctx, p.src, published)

	// The primary site's metastore goes; it comes back right after the
	// failover, and at the test's end whatever happens (other tests share
	// the stack).
	down := true
	t.Cleanup(func() {
		if down {
			stackDaemon(t, env, "start", "hms-src")
		}
	})
	stackDaemon(t, env, "stop", "hms-src")
	rep, errOut, code := runFailover(t, p.conf, "-all", "-unplanned", "-timeout", "2m")
	stackDaemon(t, env, "start", "hms-src")
	down = false
	if code != 0 {
		t.Fatalf("unplanned failover exited %d:\n%s", code, errOut)
	}
	t.Logf("unplanned failover: cut %d, waited %.1fs, took %.1fs; notes %v", rep.Cut, rep.WaitSeconds, rep.Seconds, rep.Notes)
	if rep.SourceHead != -1 || rep.TailerEventID != published || rep.Cut != published {
		t.Errorf("report: source head %d, tailer %d, cut %d; want -1, %d, %d", rep.SourceHead, rep.TailerEventID, rep.Cut, published, published)
	}
	if len(rep.Notes) == 0 || !strings.Contains(strings.Join(rep.Notes, " "), "the source log cannot be read") {
		t.Errorf("notes %v: want the source log named unreadable", rep.Notes)
	}
	var ours int
	for _, d := range rep.Databases {
		if d.Database != db1 && d.Database != db2 {
			continue // -all: the prefix is the test's own, so only its databases
		}
		ours++
		// The RPO in seconds, independently: from the source log's own
		// time of the event DR reflects to the failover.
		want := rep.At.Sub(reachedAt).Seconds()
		if d.Reached != published || d.LostEvents != -1 || math.Abs(d.RPOSeconds-want) > 0.05 || d.RPOSeconds < rep.At.Sub(stopped).Seconds() {
			t.Errorf("%s: reached %d, lost %d, RPO %.2fs; want %d, unknown, %.2fs (the failover at %s minus event %d's source time %s)",
				d.Database, d.Reached, d.LostEvents, d.RPOSeconds, published, want, rep.At.Format(time.RFC3339Nano), published, reachedAt.Format(time.RFC3339))
		}
		p := checkFailedOver(t, p.ctx, p.dr, d.Database, "unplanned", published)
		if p[drparam.FailoverRPOEvents] != "unknown" {
			t.Errorf("%s: %s=%q", d.Database, drparam.FailoverRPOEvents, p[drparam.FailoverRPOEvents])
		}
	}
	if ours != 2 || len(rep.Databases) != 2 {
		t.Errorf("-all failed over %d databases, %d of the test", len(rep.Databases), ours)
	}
	// What DR has is the source as of the checkpoint: the lost tables are
	// not there, everything before them is.
	src := env.HMS(t, testenv.Source) // the metastore restarted: a new connection
	for i := range lostTables {
		if hasTable(t, p.ctx, p.dr, db1, fmt.Sprintf("lost_%d", i)) {
			t.Errorf("lost_%d is on DR though the tailer never published it", i)
		}
	}
	if diffs, err := wl.Compare(p.ctx, src, p.dr, p.srcFS, p.drFS, []string{db2}, p.mapLocation); err != nil || len(diffs) > 0 {
		t.Errorf("%s (nothing lost) differs from the source: %v %v", db2, err, diffs)
	}
	// The old primary's tailer comes back: what it publishes now (the
	// lost events first) is refused on DR. DR is written to.
	p.src = src
	p.w = wl.NewSource(src, p.srcFS, env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL"))
	p.startTail()
	writeAndRefuse(t, p, db1)

	// The old primary readable again, failback splits its events after
	// the one DR reflects at the failover: the test's own 3 lost (the
	// tables it created after the tailer stopped) and its 1 late
	// (late_on_source, created once the metastore was back), the RPO in
	// events recorded on the DR database.
	const lateTables = 1
	p.tail.stop(t)
	rev := reverseOf(t, p.pipeline, rep.Databases[0].DRLogHead, db1)
	out, errOut, code := runTool(t, 2*time.Minute, "failback", "-config", p.conf, "-reverse-config", rev.conf, "-db", db1, "-json")
	if code != 0 {
		t.Fatalf("failback exited %d:\n%s", code, errOut)
	}
	var back failover.BackReport
	if err := json.Unmarshal([]byte(out), &back); err != nil {
		t.Fatal(err)
	}
	b := back.Databases[0]
	if b.LostEvents != lostTables || b.LateEvents != lateTables || b.SourceEvents != lostTables+lateTables {
		t.Errorf("failback: %d lost and %d late of %d old-primary events after the failover's event %d; want the test's %d lost and %d late",
			b.LostEvents, b.LateEvents, b.SourceEvents, published, lostTables, lateTables)
	}
	if b.RecordedLost != -1 || !b.RPORecorded {
		t.Errorf("failback: the failover recorded %d lost, recorded now %v; want unknown, then recorded", b.RecordedLost, b.RPORecorded)
	}
	d, err := p.dr.GetDatabase(p.ctx, db1)
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Parameters[drparam.FailoverRPOEvents]; got != fmt.Sprint(lostTables) || d.Parameters[drparam.FailoverRPOCountedAt] == "" {
		t.Errorf("DR database %s after failback: %s=%q, %s=%q; want %d and a time", db1, drparam.FailoverRPOEvents, got,
			drparam.FailoverRPOCountedAt, d.Parameters[drparam.FailoverRPOCountedAt], lostTables)
	}
	if !slices.Equal(b.Moved, []string{"late_on_source", "lost_0", "lost_1", "lost_2", "written_on_dr"}) {
		t.Errorf("failback moves %v, want the 4 tables only the old primary has and the one written on DR", b.Moved)
	}
	t.Logf("lost in the unplanned failover, counted at failback: %d events (%d written after it); recorded %s=%s; moved %v",
		b.LostEvents, b.LateEvents, drparam.FailoverRPOEvents, d.Parameters[drparam.FailoverRPOEvents], b.Moved)

	// The reverse pipeline carries it out: the old primary's own tables
	// are gone, DR's came back; verify of the reverse pipeline is clean.
	rev.startAll()
	poll(t, 4*time.Minute, time.Second, "the old primary converging on the new one", func() bool {
		rev.checkAlive()
		diffs, err := wl.Compare(p.ctx, p.dr, src, p.drFS, p.srcFS, []string{db1}, rev.mapLocation)
		return err == nil && len(diffs) == 0
	})
	for _, tbl := range []string{"lost_0", "lost_1", "lost_2", "late_on_source"} {
		if hasTable(t, p.ctx, src, db1, tbl) {
			t.Errorf("%s, only on the old primary, is still there after failback", tbl)
		}
	}
	if !hasTable(t, p.ctx, src, db1, "written_on_dr") {
		t.Error("written_on_dr did not come back to the old primary")
	}
	verifyClean(t, rev.conf, db1)
}

// verifyClean runs `hivedr verify -sample 1` of dbs with configuration
// conf and fails the test unless it exits 0 with nothing in flight.
func verifyClean(t *testing.T, conf string, dbs ...string) {
	t.Helper()
	out, errOut, code := runTool(t, 3*time.Minute, "verify", "-config", conf, "-db", strings.Join(dbs, ","), "-sample", "1")
	if code != 0 || !strings.Contains(out, "clean:") || !strings.Contains(out, ": 0 diverged, 0 in flight") {
		t.Errorf("verify -config %s -db %v exited %d:\n%s\n%s", filepath.Base(conf), dbs, code, out, errOut)
		return
	}
	t.Logf("verify %v: %s", dbs, strings.TrimSpace(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:]))
}

// tailerCheckpoint is the last event of the pipeline's tailer's newest
// checkpoint.
func tailerCheckpoint(t *testing.T, p *pipeline) int64 {
	t.Helper()
	s := serde(t, p.env)
	var last int64 = -1
	for _, d := range readTopic(t, p.env, s, p.prefix+".tailer.checkpoints") {
		if cp, ok := d.value.(*schemas.TailerCheckpoint); ok {
			last = cp.LastEventID
		}
	}
	if last < 0 {
		t.Fatal("no tailer checkpoint")
	}
	return last
}

// sourceEventsAfter counts the source log's events of db after event
// after, read with the metastore's own API.
func sourceEventsAfter(t *testing.T, ctx context.Context, src *hms.Client, after int64, db string) int {
	t.Helper()
	n := 0
	for {
		max := int32(1000)
		resp, err := src.GetNextNotification(ctx, &hive_metastore.NotificationEventRequest{LastEvent: after, MaxEvents: &max})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Events) == 0 {
			return n
		}
		for _, e := range resp.Events {
			if e.DbName != nil && strings.EqualFold(*e.DbName, db) {
				n++
			}
			after = e.EventId
		}
	}
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// hasTable reports whether the metastore c has db.table.
func hasTable(t *testing.T, ctx context.Context, c *hms.Client, db, table string) bool {
	t.Helper()
	names, err := c.GetAllTables(ctx, db)
	if err != nil {
		t.Fatalf("tables of %s on %s: %v", db, c.Addr(), err)
	}
	for _, n := range names {
		if strings.EqualFold(n, table) {
			return true
		}
	}
	return false
}

// TestFailoverResume: a planned failover killed (-9) right after it
// marked its database and the applier confirmed the fence, before it
// recorded the figures, leaves the database writable on DR without them.
// Run again, the failover refuses it, naming -resume and changing
// nothing; with -resume it fences it again without waiting for it, keeps
// the first mark's time, and records the figures (RPO 0: every event was
// applied).
func TestFailoverResume(t *testing.T) {
	u := uniq(t)
	db1, db2 := "fores_sales_"+u, "fores_crm_"+u
	p := startPipeline(t, 8*time.Minute, db1, db2)
	p.runSteps(failoverSteps(db1, db2), nil)

	fo := startHivedrEnv(t, "failover", []string{failover.FaultEnv + "=" + failover.FaultFenced},
		"failover", "-config", p.conf, "-json", "-db", db1, "-timeout", "3m")
	poll(t, 4*time.Minute, 100*time.Millisecond, "the failover stopped after the fence", func() bool {
		if fo.exited() {
			t.Fatalf("the failover exited before its fault point:\n%s", fo.out.String())
		}
		return processStopped(t, fo.cmd.Process.Pid)
	})
	fo.kill9()
	d, err := p.dr.GetDatabase(p.ctx, db1)
	if err != nil {
		t.Fatal(err)
	}
	first := d.Parameters[drparam.FailedOverAt]
	if first == "" || d.Parameters[drparam.FailoverFenced] == "" || d.Parameters[drparam.FailoverEventID] != "" {
		t.Fatalf("DR database %s after the killed failover: %v; want marked and fenced, no figures", db1, d.Parameters)
	}

	if _, errOut, code := runFailover(t, p.conf, "-db", db1, "-timeout", "1m"); code != 1 || !strings.Contains(errOut, "-resume") ||
		!strings.Contains(errOut, failover.ErrCutShort.Error()) {
		t.Errorf("a failover of the cut-short database without -resume exited %d, want 1 naming -resume: %s", code, errOut)
	}
	if d, err := p.dr.GetDatabase(p.ctx, db1); err != nil || d.Parameters[drparam.FailoverEventID] != "" {
		t.Errorf("the refused failover changed %s: %v %v", db1, err, d.Parameters)
	}

	out, errOut, code := runTool(t, 6*time.Minute, "failover", "-config", p.conf, "-json", "-db", db1, "-resume", "-timeout", "3m")
	if code != 0 {
		t.Fatalf("failover -resume exited %d:\n%s%s", code, out, errOut)
	}
	var rep failover.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("failover -resume -json output: %v\n%s", err, out)
	}
	// (Its topic is not consumed to the end: the fence rewinds the fenced
	// worker's queue, and the halted worker reads none of it. It reached
	// its watermark or a heartbeat after it, and no source event of it
	// came later.)
	if len(rep.Databases) != 1 || rep.Databases[0].LostEvents != 0 || rep.Databases[0].Reached < rep.Databases[0].LastID {
		t.Fatalf("failover -resume report %+v, want %s at or past its watermark with RPO 0", rep, db1)
	}
	if !slices.ContainsFunc(rep.Notes, func(n string) bool { return strings.Contains(n, "resumed a failover cut short") }) {
		t.Errorf("the report's notes do not say the failover was resumed: %q", rep.Notes)
	}
	got := checkFailedOver(t, p.ctx, p.dr, db1, "planned", rep.Databases[0].Reached)
	if got[drparam.FailedOverAt] != first {
		t.Errorf("%s failed over at %s after -resume, want the first mark's %s", db1, got[drparam.FailedOverAt], first)
	}
	// The other database was never part of it: still a replica.
	if d, err := p.dr.GetDatabase(p.ctx, db2); err != nil || d.Parameters[drparam.FailedOverAt] != "" {
		t.Errorf("%s was changed: %v %v", db2, err, d.Parameters)
	}
	writeAndRefuse(t, p, db1)
}
