//go:build benchscale

package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/testenv"
)

// TestBenchScale is `make bench-scale`: thousands of databases (one event
// topic each) and a hundred thousand tables on a synthetic source, the
// three daemons over them, and what an operator runs beside them. It
// measures, against the targets of docs/benchmarks.md "Thousands of
// databases": each daemon's peak RSS and idle CPU; a new database's first
// event applied with every topic present; an applier stopped by SIGTERM
// and started again, back to applying; `hivedr status` over every
// database; and `hivedr verify -db` of one database with one database
// replicated and again with all of them (it must not depend on how many
// others exist).
func TestBenchScale(t *testing.T) {
	if spec := os.Getenv(idlePeerEnv); spec != "" {
		runIdlePeer(t, spec)
		return
	}
	ndb := int(envNumber(t, "BENCH_SCALE_DBS", 2000))
	tables := int(envNumber(t, "BENCH_SCALE_TABLES", 100_000))
	nNew := int(envNumber(t, "BENCH_SCALE_NEWDBS", 20))
	window := time.Duration(envNumber(t, "BENCH_SCALE_IDLE_SECONDS", 60) * float64(time.Second))
	if ndb < 2 || nNew < 2 {
		t.Fatalf("BENCH_SCALE_DBS %d and BENCH_SCALE_NEWDBS %d: at least 2 each", ndb, nNew)
	}
	u := uniq(t)
	var dbs, fresh []string
	for i := range ndb {
		dbs = append(dbs, fmt.Sprintf("bs%04d_%s", i, u))
	}
	for i := range nNew {
		fresh = append(fresh, fmt.Sprintf("bsn%02d_%s", i, u))
	}
	ctx := ctxFor(t, 3*time.Hour)
	loadStart := loadAverage()
	ss := newSynthSource(t, wl.SynthSpec{Databases: append(append([]string{}, dbs...), fresh...), TablesPerDB: (tables + ndb - 1) / ndb, Rows: 1})
	p := ss.p
	// (The clients the clean-up uses are made first: cleaned up last.)
	p.env.KafkaAdmin(t)
	p.env.HMS(t, testenv.DR)
	t.Cleanup(func() {
		deleteTopics(t, p)
		dropDR(t, p.env, append(append([]string{}, dbs...), fresh...))
	})
	p.userDefaults()
	tailMetrics := p.withTailerMetrics()
	p.startAll()
	applyURL := "http://" + p.metrics + "/metrics"

	setup := ss.s.Setup(int32(time.Now().Unix()))
	byDB := map[string][]*wl.SynthStep{}
	for _, st := range setup {
		byDB[st.DB] = append(byDB[st.DB], st)
	}
	// Counted from the applier's metrics: the idle applier runs at its
	// default level, without a line per event.
	var lookAheadPeak, gatedAt float64 // the applier's look-ahead at its largest; looks with fetching held
	waitCounted := func(n int, what string) {
		t.Helper()
		poll(t, 2*time.Hour, time.Second, what, func() bool {
			p.checkAlive()
			m, ok := scrape(applyURL)
			if ok && metricSum(m, "hivedr_applier_halted") > 0 {
				t.Fatalf("the applier halted a database:\n%s", tail(p.apply.out.String(), 20))
			}
			if ok {
				lookAheadPeak = max(lookAheadPeak, metricSum(m, "hivedr_applier_look_ahead_bytes"))
				gatedAt += metricSum(m, "hivedr_applier_fetch_held")
			}
			return ok && eventsApplied(m) >= float64(n)
		})
	}
	verifyDB := func() (time.Duration, string) {
		t.Helper()
		start := time.Now()
		out, err := exec.CommandContext(ctx, hivedrBin(t), "verify", "-config", p.conf, "-db", dbs[0], "-sample", "0").CombinedOutput()
		took := time.Since(start)
		if err != nil {
			t.Fatalf("hivedr verify -db %s: %v\n%s", dbs[0], err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		return took, lines[len(lines)-1]
	}

	// One database replicated: verify's figure with no other. The
	// synthetic source logs events without a metastore behind them, so
	// the source metastore is given that database's objects, for verify
	// to compare with what the applier made of the events.
	src := ss.env.HMS(t, testenv.Source)
	d, dtables := ss.s.Objects(dbs[0])
	if err := src.CreateDatabase(ctx, d); err != nil {
		t.Fatalf("create %s on the source metastore: %v", dbs[0], err)
	}
	t.Cleanup(func() {
		if err := src.DropDatabase(context.Background(), dbs[0], true, true); err != nil {
			t.Logf("drop %s on the source metastore: %v", dbs[0], err)
		}
	})
	for _, tb := range dtables {
		if err := src.CreateTable(ctx, tb); err != nil {
			t.Fatalf("create %s.%s on the source metastore: %v", dbs[0], tb.TableName, err)
		}
	}
	first := ss.appendAll(ctx, synthRows(byDB[dbs[0]], time.Now(), 1000), 1000)
	waitCounted(len(first), dbs[0]+"'s set-up applied")
	verify1, verify1Out := verifyDB()

	// All the others.
	var rest []*wl.SynthStep
	for _, db := range dbs[1:] {
		rest = append(rest, byDB[db]...)
	}
	setupStart := time.Now()
	evs := ss.appendAll(ctx, synthRows(rest, time.Now(), 1000), 1000)
	total := len(first) + len(evs)
	waitCounted(total, fmt.Sprintf("the set-up's %d events applied", total))
	setupTook := time.Since(setupStart)
	t.Logf("set-up: %d databases, %d tables replicated in %s", ndb, ndb*((tables+ndb-1)/ndb), setupTook.Round(time.Second))
	// The floor under the applier's idle CPU: a bare Kafka consumer of
	// the same topics, idle beside it. Settle: the set-up's last
	// heartbeats are handled, and the peer has read the topics.
	peer := startIdlePeer(t, ss.env.KafkaBrokers(t), "^"+regexp.QuoteMeta(p.prefix+".events.")+"bsn?[0-9]+_"+u+"$", "bench-scale-peer-"+u)
	time.Sleep(10 * time.Second)

	procs := []*proc{p.tail, p.copyd, p.apply}
	peerBefore := cpuTime(peer.Process.Pid)
	used, idleFor := idleCPU(p, window, map[string]string{"tail": strings.TrimSuffix(strings.TrimPrefix(tailMetrics, "http://"), "/metrics")})
	peerUsed := cpuTime(peer.Process.Pid) - peerBefore
	_ = peer.Process.Kill()

	// hivedr status over every database.
	statusStart := time.Now()
	out, code := runStatus(t, "-config", p.conf, "-json", "-timeout", "5m")
	statusTook := time.Since(statusStart)
	var st statusJSON
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("hivedr status -json exited %d: %v\n%s", code, err, tail(out, 20))
	}
	if len(st.Databases) < ndb {
		t.Fatalf("hivedr status -json lists %d databases, want %d (exit %d)", len(st.Databases), ndb, code)
	}

	// verify -db with every database there.
	verifyAll, verifyAllOut := verifyDB()

	// The applier stopped by SIGTERM, a new database's first event
	// published meanwhile, and the applier started again (at debug
	// level, for a line per event): back to applying when that event is.
	applyHWM := p.apply.peakRSS()
	stopStart := time.Now()
	p.apply.stop(t)
	stopTook := time.Since(stopStart)
	firstOf := func(db string) synthEvent {
		t.Helper()
		evs := ss.appendRows(ctx, synthRows(byDB[db], time.Now(), 1000))
		return evs[0]
	}
	waiting := firstOf(fresh[0])
	restartAt := time.Now()
	p.startApply("-log-level", "debug")
	tr := newDoneTracker(p.apply)
	waitDone := func(e synthEvent, d time.Duration) doneRec {
		t.Helper()
		var r doneRec
		poll(t, d, 20*time.Millisecond, fmt.Sprintf("event %d of %s applied", e.id, e.db), func() bool {
			p.checkAlive()
			done := tr.update()
			if len(tr.halted) > 0 {
				t.Fatalf("the applier halted: %s", tr.halted[0])
			}
			var ok bool
			r, ok = done[e.id]
			return ok
		})
		return r
	}
	restartTook := waitDone(waiting, 10*time.Minute).at.Sub(restartAt)

	// New databases, one after the other, with every topic present: from
	// the first event's record (Kafka timestamp) to applied.
	s := serde(t, ss.env)
	var lags []float64
	for _, db := range fresh[1:] {
		e := firstOf(db)
		r := waitDone(e, 5*time.Minute)
		recs := readTopic(t, ss.env, s, p.prefix+".events."+db)
		if len(recs) == 0 {
			t.Fatalf("%s: applied but its topic holds no record", db)
		}
		lags = append(lags, r.at.Sub(recs[0].rec.Timestamp).Seconds())
	}
	applyHWM = max(applyHWM, p.apply.peakRSS())

	var b strings.Builder
	pf := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	verdict := func(ok bool) string {
		if ok {
			return "MET"
		}
		return "MISSED"
	}
	pf("")
	pf("=== make bench-scale: %d databases (an event topic each), %d tables, the three daemons and the operator's commands ===", ndb, ndb*((tables+ndb-1)/ndb))
	pf("conditions  synthetic source (tailer poll 1 s, heartbeat 5 s, batch 1000; copyd 8 workers); set-up replicated in %s;", setupTook.Round(time.Second))
	pf("            %d CPUs; load average %s before, %s after (shared machine)", runtime.NumCPU(), loadStart, loadAverage())
	for _, pr := range procs {
		hwm := pr.peakRSS()
		if pr.name == "apply" {
			hwm = applyHWM
		}
		share := 100 * used[pr.name].Seconds() / idleFor.Seconds()
		pf("daemon      %-6s peak RSS %6.1f MiB (target < 300 MiB: %s); idle %.2f%% of one core over %.0f s (target < 1%%: %s)",
			pr.name, mib(hwm), verdict(mib(hwm) < 300), share, idleFor.Seconds(), verdict(share < 1))
	}
	pf("look-ahead  during the set-up, sampled each second: peak %.1f MiB (applier.look_ahead_bytes %d MiB); fetching held back at %.0f of the samples",
		lookAheadPeak/(1<<20), config.DefaultLookAheadBytes>>20, gatedAt)
	pf("peer        a bare franz-go group consumer of the same topics, fetching as the applier does: idle %.2f%% of one core (the floor under the applier's)",
		100*peerUsed.Seconds()/idleFor.Seconds())
	pf("new db      first event published -> applied, %d databases one after the other: min %s  p50 %s  p99 %s  max %s (target p99 < 1 s: %s)",
		len(lags), fmtSec(pct(lags, 0)), fmtSec(pct(lags, .5)), fmtSec(pct(lags, .99)), fmtSec(pct(lags, 1)), verdict(pct(lags, .99) < 1))
	pf("restart     SIGTERM to exit %s (target < 10 s: %s); start to the waiting event applied %s (target < 30 s: %s)",
		fmtSec(stopTook.Seconds()), verdict(stopTook < 10*time.Second), fmtSec(restartTook.Seconds()), verdict(restartTook < 30*time.Second))
	pf("status      hivedr status -json over %d databases: %s, exit %d (target < 5 s: %s); its steps: %s",
		len(st.Databases), fmtSec(statusTook.Seconds()), code, verdict(statusTook < 5*time.Second), phases(st.Phases))
	// Independent of the others: within twice its time alone, or a
	// second more (its own calls vary by that much).
	indep := verifyAll <= max(2*verify1, verify1+time.Second)
	pf("verify -db  one database of 1: %s; of %d: %s (target: independent of the others, within 2x or +1 s: %s)",
		fmtSec(verify1.Seconds()), ndb, fmtSec(verifyAll.Seconds()), verdict(indep))
	pf("            %s", verify1Out)
	pf("            %s", verifyAllOut)
	pf("===")
	fmt.Print(b.String())
}

// dropDR drops the benchmark's databases on DR, one at a time on one
// connection (drop_database CASCADE calls in parallel deadlock a
// metastore with a small database pool: see dropScale), reporting
// progress: thousands of databases take minutes.
func dropDR(t *testing.T, env *testenv.Env, dbs []string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	c := env.HMS(t, testenv.DR)
	start := time.Now()
	for i, db := range dbs {
		if err := c.DropDatabase(ctx, db, true, true); err != nil && !hms.Answered(err) {
			t.Logf("drop DR database %s: %v (the rest are left)", db, err)
			return
		}
		if (i+1)%200 == 0 {
			t.Logf("dropped %d of %d DR databases in %s", i+1, len(dbs), time.Since(start).Round(time.Second))
		}
	}
}

// phases prints status's steps, slowest first.
func phases(p map[string]float64) string {
	names := slices.Collect(maps.Keys(p))
	slices.SortFunc(names, func(a, b string) int { return cmp.Compare(p[b], p[a]) })
	var parts []string
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s %.2f s", n, p[n]))
	}
	return strings.Join(parts, ", ")
}
