package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hivedr/hivedr/internal/drill"
	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/internal/failover"
	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/hms"
)

// scratchDatabases are the drills' scratch databases on c that belong to
// the pipeline of source (on the source: drill.OwnerParam; on DR: its
// replica marks).
func scratchDatabases(t *testing.T, p *pipelineTest, c *hms.Client, prefix, source string) []string {
	t.Helper()
	names, err := c.GetDatabases(p.ctx, prefix+"*")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range names {
		d, err := c.GetDatabase(p.ctx, n)
		if err != nil {
			continue // dropped meanwhile
		}
		mark := drparam.TargetMark(source)
		if d.Parameters[drill.OwnerParam] == source || d.Parameters[drparam.Target] == mark || d.Parameters[drparam.FailoverTarget] == mark {
			out = append(out, strings.ToLower(n))
		}
	}
	slices.Sort(out)
	return out
}

// TestDrill: a drill of the pipeline is killed once it has failed its
// scratch database over (its leftovers stay on both sites); then a whole
// drill runs with the reverse pipeline's daemons already running. It
// drops the killed drill's leftovers first, writes data files on both
// sides (every file checksummed by its verifies), reaches RPO 0, moves
// the one table written on DR back, and drops its scratch database on
// both sites. Afterwards production is as before: a dry-run failover of
// the whole policy passes (the drills' databases left out), status and
// verify of the policy are clean, the forward applier has no halt and is
// ready. Then `drill -dry-run` passes on a replicated database, a drill
// without a reverse pipeline is INCOMPLETE, not PASSED, and `drill
// -dry-run` of a database with a partition dropped on DR fails (exit 1)
// at its verify step and changes nothing.
func TestDrill(t *testing.T) {
	u := uniq(t)
	db1, db2 := "dr_sales_"+u, "dr_crm_"+u
	// The test's drills have a prefix of their own: the stack's metastores
	// are shared, and drills of other tests' pipelines must not be in this
	// one's scope (nor theirs in its).
	prefix := failover.DrillPrefix + u + "_"
	p := startPipeline(t, 20*time.Minute, db1, db2, prefix+"*")
	p.runSteps(failoverSteps(db1, db2), nil)
	p.converge(p.ctx, p.src, p.dr, p.srcFS, p.drFS, 3*time.Minute)
	source := p.cfg.Source.Name

	// A drill killed half-way: its scratch database failed over on DR.
	killed := startHivedr(t, "killed drill", "drill", "-config", p.conf, "-scratch-prefix", prefix, "-timeout", "3m")
	var leftover string
	poll(t, 5*time.Minute, 100*time.Millisecond, "the first drill's failover", func() bool {
		if killed.exited() {
			t.Fatalf("the drill to kill ended first:\n%s", killed.out.String())
		}
		for _, n := range scratchDatabases(t, p, p.dr, prefix, source) {
			if d, err := p.dr.GetDatabase(p.ctx, n); err == nil && d.Parameters[drparam.FailedOverAt] != "" {
				leftover = n
				return true
			}
		}
		return false
	})
	killed.kill9()
	if got := scratchDatabases(t, p, p.src, prefix, source); !slices.Equal(got, []string{leftover}) {
		t.Fatalf("the killed drill left %v on the source, want %s", got, leftover)
	}

	// The reverse pipeline, for the drill's scratch databases only, runs
	// from before the drill.
	rev := reverseOf(t, p.pipeline, currentEventID(t, p.ctx, p.dr), prefix+"*")
	rev.startAll()

	rep, _ := runDrill(t, p.conf, rev, prefix)
	if !slices.Equal(rep.Leftovers, []string{leftover}) {
		t.Errorf("leftovers dropped %v, want [%s]", rep.Leftovers, leftover)
	}

	// Nothing of either drill is left on either site.
	for _, side := range []*hms.Client{p.src, p.dr} {
		if got := scratchDatabases(t, p, side, prefix, source); len(got) > 0 {
			t.Errorf("scratch databases left on %s: %v", side.Addr(), got)
		}
	}
	for _, db := range []string{rep.Database, leftover} {
		dir := strings.TrimSuffix(p.cfg.Replication.SourceRoots[0], "/") + "/" + db + ".db"
		drDir, err := p.mapLocation(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, site := range []struct {
			fs  *fs.HDFS
			dir string
		}{{p.srcFS, dir}, {p.drFS, drDir}} {
			var left []string
			err := site.fs.Walk(p.ctx, site.dir, func(loc string, _ int64) error { left = append(left, loc); return nil })
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				t.Fatal(err)
			}
			if len(left) > 0 {
				t.Errorf("files of %s left: %v", db, left)
			}
		}
	}

	// Production as before: the whole policy could fail over, the drills'
	// databases left out; no applier halt; status and verify clean.
	fo, errOut, code := runFailover(t, p.conf, "-all", "-dry-run")
	if code != 0 {
		t.Fatalf("failover -all -dry-run after the drill exited %d:\n%s", code, errOut)
	}
	var ready []string
	for _, d := range fo.Databases {
		ready = append(ready, d.Database)
	}
	var left []string
	for _, s := range fo.Skipped {
		left = append(left, s.Database)
		if s.Why != failover.WhyDrill {
			t.Errorf("left out %s: %s, want %q", s.Database, s.Why, failover.WhyDrill)
		}
	}
	if want := sorted([]string{db1, db2}); !slices.Equal(ready, want) || !slices.Equal(left, sorted([]string{rep.Database, leftover})) {
		t.Errorf("failover -all -dry-run: could fail over %v, left out %v; want %v and the two drills", ready, left, want)
	}
	if m, ok := scrape("http://" + p.metrics + "/metrics"); !ok {
		t.Error("the forward applier's metrics do not answer")
	} else if n := metricSum(m, "hivedr_applier_halted"); n != 0 {
		t.Errorf("the forward applier has %v halted databases after the drill", n)
	}
	// A dropped scratch database stops aging: its series goes at the
	// applier's next lag report once nothing of it is queued.
	var aging string
	eventually(t, time.Minute, "no replica_age series of a dropped scratch database", func() bool {
		m, ok := scrape("http://" + p.metrics + "/metrics")
		if !ok {
			return false
		}
		aging = ""
		for series := range m {
			if strings.HasPrefix(series, "hivedr_replica_age_seconds{") && strings.Contains(series, failover.DrillPrefix) {
				aging = series
			}
		}
		return aging == ""
	})
	if code, body := probe(p.metrics, "/readyz"); code != 200 {
		t.Errorf("the forward applier is not ready after the drill: %d %s", code, body)
	}
	eventually(t, 2*time.Minute, "hivedr status of the policy clean", func() bool {
		out, _, code := runTool(t, time.Minute, "status", "-config", p.conf)
		if code != 0 {
			t.Logf("status exited %d:\n%s", code, out)
		}
		return code == 0
	})
	if out, errOut, code := runTool(t, 2*time.Minute, "verify", "-config", p.conf, "-sample", "1"); code != 0 {
		t.Errorf("verify of the policy after the drill exited %d:\n%s\n%s", code, out, errOut)
	}

	// Readiness of a real database: nothing changes.
	before, _ := p.dr.GetDatabase(p.ctx, db1)
	text, errOut, code := runTool(t, 2*time.Minute, "drill", "-config", p.conf, "-dry-run", "-db", db1)
	if code != 0 || !strings.Contains(text, "PASSED") {
		t.Fatalf("drill -dry-run exited %d:\n%s\n%s", code, text, errOut)
	}
	t.Logf("drill -dry-run:\n%s", text)
	after, _ := p.dr.GetDatabase(p.ctx, db1)
	if fmt.Sprint(before.Parameters) != fmt.Sprint(after.Parameters) {
		t.Errorf("the dry run changed the DR database: %v -> %v", before.Parameters, after.Parameters)
	}

	// Without a reverse pipeline the drill says it is not a full one.
	text, errOut, code = runTool(t, 8*time.Minute, "drill", "-config", p.conf, "-scratch-prefix", prefix, "-timeout", "3m")
	t.Logf("drill without -reverse-config, exit %d:\n%s", code, text)
	if code != 1 || !strings.Contains(text, "INCOMPLETE: NOT a full rehearsal, not run: failback (no -reverse-config)") ||
		strings.Contains(text, "PASSED") || strings.Contains(text, "failed:") {
		t.Errorf("drill without -reverse-config exited %d:\n%s\n%s", code, text, errOut)
	}
	if got := scratchDatabases(t, p, p.dr, prefix, source); len(got) > 0 {
		t.Errorf("the incomplete drill left %v on DR", got)
	}

	// A database that is not ready: a partition dropped on DR behind the
	// applier's back. The dry run fails at its verify step, naming the
	// partition, exits 1, and changes nothing (the partition stays
	// missing, the DR database's parameters stay as they were).
	if _, err := p.dr.DropPartition(p.ctx, db1, "orders", []string{"2026-12-01"}, false); err != nil {
		t.Fatal(err)
	}
	before, _ = p.dr.GetDatabase(p.ctx, db1)
	partsBefore, err := p.dr.GetPartitionNames(p.ctx, db1, "orders", -1)
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runTool(t, 2*time.Minute, "drill", "-config", p.conf, "-dry-run", "-db", db1, "-json")
	var dry drill.Report
	if err := json.Unmarshal([]byte(out), &dry); err != nil {
		t.Fatalf("drill -dry-run -json exited %d: %v\n%s\n%s", code, err, out, errOut)
	}
	t.Logf("drill -dry-run of a database with a partition dropped on DR: exit %d, %s", code, dry.Verdict)
	for _, s := range dry.Steps {
		t.Logf("  %-24s %s (%s)", s.Name, s.Outcome, s.Detail)
	}
	if code != 1 || dry.OK || dry.Verdict != drill.Failed || len(dry.Steps) != 3 {
		t.Fatalf("drill -dry-run exited %d, %s with %d steps; want 1, FAILED, 3 steps\n%s", code, dry.Verdict, len(dry.Steps), out)
	}
	for i, s := range dry.Steps {
		if i < 2 && s.Outcome != "ok" {
			t.Errorf("step %s: %s; want ok (only the verify is at fault)", s.Name, s.Outcome)
		}
	}
	if v := dry.Steps[2]; v.Name != "verify a sample" || !strings.HasPrefix(v.Outcome, "failed: 1 diverged") ||
		!strings.Contains(v.Outcome, db1+".orders partition dt=2026-12-01: missing on DR") {
		t.Errorf("step %s: %s; want verify failed naming %s.orders partition dt=2026-12-01", v.Name, v.Outcome, db1)
	}
	after, _ = p.dr.GetDatabase(p.ctx, db1)
	if fmt.Sprint(before.Parameters) != fmt.Sprint(after.Parameters) {
		t.Errorf("the failing dry run changed the DR database: %v -> %v", before.Parameters, after.Parameters)
	}
	if partsAfter, err := p.dr.GetPartitionNames(p.ctx, db1, "orders", -1); err != nil || !slices.Equal(partsAfter, partsBefore) {
		t.Errorf("the failing dry run changed the DR partitions: %v -> %v (%v)", partsBefore, partsAfter, err)
	}
}

// runDrill runs a whole drill of the pipeline of conf, its scratch
// databases named prefix..., with the reverse pipeline rev running, and
// checks that it PASSED: every step ok, RPO 0 (events and seconds), an
// RTO, one table moved back, and at least 12 files checksummed (3 verified
// after replication, 4 after the failover, 5 after the failback). It
// returns the report and the drill's output.
func runDrill(t *testing.T, conf string, rev *pipeline, prefix string) (drill.Report, string) {
	t.Helper()
	out, errOut, code := runTool(t, 12*time.Minute, "drill", "-config", conf, "-reverse-config", rev.conf, "-scratch-prefix", prefix, "-json", "-timeout", "3m")
	var rep drill.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("drill exited %d; -json: %v\n%s\n%s", code, err, out, errOut)
	}
	t.Logf("drill of %s: %s, RPO %d events %.1fs, RTO %.1fs, %d files checksummed, %.1fs in all", rep.Database, rep.Verdict, rep.RPOEvents,
		rep.RPOSeconds, rep.RTOSeconds, rep.Checksummed, rep.Seconds)
	for _, s := range rep.Steps {
		t.Logf("  %-22s %6.1fs %s (%s)", s.Name, s.Seconds, s.Outcome, s.Detail)
	}
	if code != 0 || !rep.OK || rep.Verdict != drill.Passed || len(rep.Steps) != 9 {
		t.Fatalf("drill exited %d: %s with %d steps\n%s\nreverse applier:\n%s", code, rep.Verdict, len(rep.Steps), errOut, tail(rev.apply.out.String(), 30))
	}
	for _, s := range rep.Steps {
		if s.Outcome != "ok" {
			t.Errorf("step %s: %s", s.Name, s.Outcome)
		}
	}
	if rep.RPOEvents != 0 || rep.RPOSeconds != 0 || rep.RTOSeconds <= 0 || rep.MovedTables != 1 {
		t.Errorf("RPO %d events %.1fs, RTO %.1fs, moved %d; want 0, 0, > 0, 1", rep.RPOEvents, rep.RPOSeconds, rep.RTOSeconds, rep.MovedTables)
	}
	if rep.Checksummed < 12 {
		t.Errorf("%d files checksummed, want at least 12", rep.Checksummed)
	}
	return rep, out + errOut
}
