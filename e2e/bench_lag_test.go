//go:build benchlag

package e2e

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/testenv"
	"github.com/hivedr/hivedr/schemas"
)

// TestPipelineLag is the end-to-end lag benchmark, run by `make bench-lag`
// only: it is built only with the benchlag tag, so `make test` neither
// runs nor skips it. It starts `hivedr tail`, `hivedr copyd` and `hivedr
// apply` as separate processes on topics and groups of their own, the
// tailer reading a synthetic source (workload.Synth in a notification log
// of its own, read with the tailer's Postgres source, as TestSynthWorkload
// shows honest), and writes its events at BENCH_LAG_RATE events/s
// (default 100) for BENCH_LAG_SECONDS (default 60) over BENCH_LAG_DBS
// databases (default 10) of BENCH_LAG_TABLES_PER_DB external partitioned
// tables each (default 4). Each step, on a random table, either adds a
// partition with a data file (one ADD_PARTITION event) or loads a file into
// a partition (ALTER_PARTITION with the statistics, then INSERT: two
// events), 40% and 60%, as the metastore logs them; every data file is on
// the source HDFS before its event (written before the run, not timed).
//
// Lag is measured per event, to the millisecond, with no hook in the
// daemons: the event happened when the transaction that appended it to
// the log committed (between sending COMMIT and its return, a few
// milliseconds), and it was applied when the applier logged it done (its
// debug "event done" line, written after the DR metastore calls
// returned). Where the time went is read from the records themselves: the
// Kafka timestamps of the event (tailer) and of its files' completions
// (copyd). The applier's own hivedr_applier_event_lag_seconds histogram
// (from the whole-second EVENT_TIME, so up to 1 s off) is reported beside
// it. Events not applied BENCH_LAG_DRAIN_SECONDS (default 120) after the
// workload stopped count with the lag they had then. Once drained, the DR
// side is compared with what the events describe.
func TestPipelineLag(t *testing.T) {
	rate := envNumber(t, "BENCH_LAG_RATE", 100)
	seconds := envNumber(t, "BENCH_LAG_SECONDS", 60)
	ndb := int(envNumber(t, "BENCH_LAG_DBS", 10))
	perDB := int(envNumber(t, "BENCH_LAG_TABLES_PER_DB", 4))
	drainFor := time.Duration(envNumber(t, "BENCH_LAG_DRAIN_SECONDS", 120) * float64(time.Second))
	fileShare := envShare(t, "BENCH_LAG_FILE_SHARE", 1)
	copyWorkers := int(envNumber(t, "BENCH_LAG_COPY_WORKERS", 8))
	atCopyRate := envShare(t, "BENCH_LAG_AT_COPY_RATE", 0)
	const rows, addShare, initialParts, targetP99 = 20, 0.4, 4, 5.0
	var copyRate float64 // hivedr copy's small files a second, when measured
	if atCopyRate > 0 {
		// The rate follows from hivedr copy's on these clusters: a step
		// that adds a partition is one event, a load two, and a share
		// fileShare of either brings one file.
		copyRate = copyFilesRate(t, int(envNumber(t, "BENCH_LAG_CALIBRATE_FILES", 1000)))
		filesPerEvent := fileShare / (addShare + 2*(1-addShare))
		if filesPerEvent <= 0 {
			t.Fatal("BENCH_LAG_AT_COPY_RATE needs BENCH_LAG_FILE_SHARE above 0")
		}
		rate = atCopyRate * copyRate / filesPerEvent
		t.Logf("hivedr copy moved %.0f files of 4 KiB a second here: offering files at %.0f%% of it, %.1f files/s = %.1f events/s", copyRate, 100*atCopyRate, atCopyRate*copyRate, rate)
	}
	u := uniq(t)
	var dbs []string
	for i := 0; i < ndb; i++ {
		dbs = append(dbs, fmt.Sprintf("bl%02d_%s", i, u))
	}
	ctx := ctxFor(t, time.Duration(seconds)*time.Second+drainFor+40*time.Minute)
	loadStart := loadAverage()
	ss := newSynthSource(t, wl.SynthSpec{Databases: dbs, TablesPerDB: perDB, InitialPartitions: initialParts, Rows: rows})
	t.Cleanup(func() { ss.removeData(context.Background()) })
	p := ss.p
	// The tailer's default batch (1,000), copyd with
	// BENCH_LAG_COPY_WORKERS workers (default 8, copyd's default); the
	// pipeline's 200 ms poll.
	p.editConfig("  batch_size: 200\n", "  batch_size: 1000\n")
	p.editConfig("  workers: 4\n", fmt.Sprintf("  workers: %d\n", copyWorkers))
	p.startTail()
	p.startCopyd()
	p.startApply("-log-level", "debug")

	// Set-up, not measured: databases, tables, their first partitions.
	setupStart := time.Now()
	setup := ss.s.Setup(int32(time.Now().Unix()))
	ss.stage(ctx, setup)
	setupEvs := ss.appendAll(ctx, synthRows(setup, time.Now(), 1000), 500)
	if _, missing := waitApplied(p, setupEvs, 10*time.Minute); missing > 0 {
		t.Fatalf("set-up: %d of %d events not applied after 10 minutes", missing, len(setupEvs))
	}
	t.Logf("set-up: %d events applied %s after the start", len(setupEvs), time.Since(setupStart).Round(time.Millisecond))

	// The run's steps, its files written before it starts.
	rng := testRand(t)
	var run []*wl.SynthStep
	tables := ss.s.Tables()
	for n := 0; n < int(rate*seconds); {
		st := ss.s.PlanStep(tables[rng.IntN(len(tables))], rng, addShare, fileShare, int32(time.Now().Unix()))
		run = append(run, st)
		n += len(st.Types)
	}
	staged := ss.stage(ctx, run)
	files := 0
	for _, st := range run {
		files += len(st.Files)
	}
	t.Logf("staged %d files for %d steps in %s", files, len(run), staged.Round(time.Millisecond))
	all := synthRows(run, time.Now(), rate)
	metricsURL := "http://" + p.metrics + "/metrics"
	before := scrapeMetrics(t, metricsURL)

	procs := []*proc{p.tail, p.copyd, p.apply}
	cpuBefore := map[string]time.Duration{}
	for _, pr := range procs {
		cpuBefore[pr.name] = cpuTime(pr.cmd.Process.Pid)
	}

	// The measured run: the rows due by now, every 10 ms (or as soon as
	// the previous append returned, when it took longer).
	runStart := time.Now()
	var (
		evs      []synthEvent
		latest   time.Duration // the most an append started behind schedule
		appended int
	)
	for appended < len(all) {
		due := min(len(all), int(rate*time.Since(runStart).Seconds())+1)
		if due > appended {
			sched := runStart.Add(time.Duration(float64(appended) / rate * float64(time.Second)))
			latest = max(latest, time.Since(sched))
			n := min(due-appended, 5000)
			evs = append(evs, ss.appendRows(ctx, all[appended:appended+n])...)
			appended += n
		}
		next := runStart.Add(time.Duration(float64(appended) / rate * float64(time.Second)))
		time.Sleep(max(10*time.Millisecond, time.Until(next)))
	}
	runEnd := evs[len(evs)-1].committed
	loadRun := loadAverage()
	p.checkAlive()

	done, unapplied := waitApplied(p, evs, drainFor)
	drainCheck := time.Now()
	var daemons []string
	for _, pr := range procs {
		daemons = append(daemons, fmt.Sprintf("%s %.1f s CPU (%.0f%% of a core), peak RSS %.0f MiB", pr.name,
			(cpuTime(pr.cmd.Process.Pid)-cpuBefore[pr.name]).Seconds(),
			100*(cpuTime(pr.cmd.Process.Pid)-cpuBefore[pr.name]).Seconds()/drainCheck.Sub(runStart).Seconds(), mib(pr.peakRSS())))
	}
	after := scrapeMetrics(t, metricsURL)
	loadEnd := loadAverage()

	// Per event: lag, and where it went.
	s := serde(t, ss.env)
	pubTime := map[int64]time.Time{}
	pub := map[int64]*schemas.Event{}
	for _, db := range dbs {
		for _, d := range readTopic(t, ss.env, s, p.prefix+".events."+db) {
			if e, ok := d.value.(*schemas.Event); ok {
				pub[e.EventID], pubTime[e.EventID] = e, d.rec.Timestamp
			}
		}
	}
	type compRec struct {
		c  *schemas.CopyCompletion
		ts time.Time
	}
	comps := map[string]compRec{}
	for _, d := range readTopic(t, ss.env, s, p.prefix+".completions") {
		if c, ok := d.value.(*schemas.CopyCompletion); ok {
			if old, seen := comps[c.TaskID]; !seen || d.rec.Timestamp.Before(old.ts) {
				comps[c.TaskID] = compRec{c, d.rec.Timestamp}
			}
		}
	}
	var (
		lagHi, lagLo, commit                           []float64
		tailer, copyStage, copyQueue, copyRun, copyPub []float64
		applyStage, applyQueued, applyOwn              []float64
		results                                        = map[string]int{}
		types                                          = map[string]int{}
		nfiles                                         int
		lastApplied                                    time.Time
		prevDone                                       = map[string]time.Time{}
		windows                                        = map[int][]float64{}
		perDBLag                                       = map[string][]float64{}
		missingPub, missingComp                        int
	)
	for _, e := range evs {
		types[e.typ]++
		d, ok := done[e.id]
		if !ok {
			// Not applied by the end: counted with the lag it has so far
			// (a lower bound), so the percentiles do not flatter.
			d = doneRec{at: drainCheck, result: "not_applied"}
		}
		results[d.result]++
		if d.at.After(lastApplied) {
			lastApplied = d.at
		}
		lag := d.at.Sub(e.committing).Seconds()
		lagHi = append(lagHi, lag)
		lagLo = append(lagLo, d.at.Sub(e.committed).Seconds())
		commit = append(commit, e.committed.Sub(e.committing).Seconds())
		perDBLag[e.db] = append(perDBLag[e.db], lag)
		w := int(e.committed.Sub(runStart) / (10 * time.Second))
		windows[w] = append(windows[w], lag)

		ev, pt := pub[e.id], pubTime[e.id]
		if ev == nil {
			missingPub++
			continue
		}
		tailer = append(tailer, pt.Sub(e.committed).Seconds())
		ready := pt
		var last compRec
		for _, f := range ev.Files {
			if f.TaskID == "" {
				continue
			}
			nfiles++
			c, ok := comps[f.TaskID]
			if !ok {
				missingComp++
				continue
			}
			if c.ts.After(last.ts) {
				last = c
			}
		}
		if last.c != nil {
			copyStage = append(copyStage, last.ts.Sub(pt).Seconds())
			copyQueue = append(copyQueue, last.c.Started.Sub(pt).Seconds())
			copyRun = append(copyRun, last.c.Finished.Sub(last.c.Started).Seconds())
			copyPub = append(copyPub, last.ts.Sub(last.c.Finished).Seconds())
			if last.ts.After(ready) {
				ready = last.ts
			}
		}
		if ok {
			applyStage = append(applyStage, d.at.Sub(ready).Seconds())
			start := ready
			if pd := prevDone[e.db]; pd.After(start) {
				start = pd
			}
			applyQueued = append(applyQueued, start.Sub(ready).Seconds())
			applyOwn = append(applyOwn, d.at.Sub(start).Seconds())
			prevDone[e.db] = d.at
		}
	}

	// Once drained, DR must hold what the events describe.
	verified := "not compared: not drained"
	if unapplied == 0 {
		vStart := time.Now()
		diffs := ss.diffDR(ctx)
		verified = fmt.Sprintf("DR equals what the events describe (%d databases, %d tables, every partition, parameter and file with its CRC32C; compared in %s)",
			len(dbs), len(tables), time.Since(vStart).Round(time.Second))
		if len(diffs) > 0 {
			verified = fmt.Sprintf("DR DIFFERS from what the events describe: %d differences, first: %v", len(diffs), diffs[0])
			t.Errorf("%s", verified)
		}
	}

	// The report.
	runDur := runEnd.Sub(runStart)
	achieved := float64(len(evs)) / runDur.Seconds()
	var b strings.Builder
	pf := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	pf("")
	pf("=== make bench-lag: end-to-end lag, source event committed to the log -> applied on the DR metastore ===")
	pf("conditions  target %.0f events/s for %.0f s over %d databases x %d external tables partitioned by (dt, region), synthetic source",
		rate, seconds, ndb, perDB)
	pf("            (a notification log in Postgres read by the tailer's postgres source; messages as the metastore's listener writes them);")
	pf("            steps on a random table: %.0f%% add a partition (ADD_PARTITION), %.0f%% load into one of its %d first partitions;",
		100*addShare, 100*(1-addShare), initialParts)
	pf("            %.0f%% of steps bring a file (the partition's; a load's ALTER_PARTITION + INSERT), the others none (an empty partition;",
		100*fileShare)
	pf("            a statistics-only ALTER_PARTITION); files of %d rows on the source HDFS, written before the run (%d files in %s, not timed)",
		rows, files, staged.Round(time.Second))
	pf("            tailer poll %s batch 1000, copyd %d workers over %d manifest partitions, applier one worker per database; %d CPUs",
		p.cfg.Tailer.PollInterval.Duration, copyWorkers, p.cfg.Kafka.ManifestPartitions, runtime.NumCPU())
	pf("            load average (1/5/15 min): %s before, %s after the run, %s after the drain (shared machine)", loadStart, loadRun, loadEnd)
	pf("workload    %d events in %.1f s = %.1f events/s achieved (target %.0f), %.1f per database; by type: %s",
		len(evs), runDur.Seconds(), achieved, rate, achieved/float64(ndb), fmtCounts(types))
	pf("            appends ran at most %s behind schedule; commit (visible) within %s of COMMIT sent (p99)", fmtSec(latest.Seconds()), fmtSec(pct(commit, .99)))
	pf("lag         per event, from its commit to the log to applied on DR (the applier's log line after the DR calls returned):")
	pf("            p50 %s  p95 %s  p99 %s  max %s   (n=%d; from COMMIT sent; from COMMIT returned: p50 %s p99 %s)",
		fmtSec(pct(lagHi, .50)), fmtSec(pct(lagHi, .95)), fmtSec(pct(lagHi, .99)), fmtSec(pct(lagHi, 1)), len(lagHi),
		fmtSec(pct(lagLo, .50)), fmtSec(pct(lagLo, .99)))
	var worst string
	var worstP99 float64
	for db, xs := range perDBLag {
		if v := pct(xs, .99); v > worstP99 {
			worst, worstP99 = db, v
		}
	}
	pf("            worst database %s: p99 %s over %d events", worst, fmtSec(worstP99), len(perDBLag[worst]))
	pf("            applier's histogram hivedr_applier_event_lag_seconds over the run (whole-second EVENT_TIME, +-1 s, bucket-interpolated):")
	pf("            p50 %s  p95 %s  p99 %s  (n=%.0f)", fmtSec(histQuantile(before, after, "hivedr_applier_event_lag_seconds", nil, .50)),
		fmtSec(histQuantile(before, after, "hivedr_applier_event_lag_seconds", nil, .95)),
		fmtSec(histQuantile(before, after, "hivedr_applier_event_lag_seconds", nil, .99)),
		histCount(before, after, "hivedr_applier_event_lag_seconds", nil))
	var win []string
	for i := 0; i <= int(runDur/(10*time.Second)); i++ {
		if xs := windows[i]; len(xs) > 0 {
			win = append(win, fmt.Sprintf("%d-%ds %s/%s", 10*i, 10*i+10, fmtSec(pct(xs, .5)), fmtSec(pct(xs, .99))))
		}
	}
	pf("kept up     lag p50/p99 by 10 s window of the run: %s", strings.Join(win, " | "))
	keptUp := unapplied == 0 && lastApplied.Sub(runEnd).Seconds() < targetP99
	switch {
	case unapplied == 0:
		pf("            drained: the last event was applied %.2f s after the workload stopped (kept up: %v); results %s",
			lastApplied.Sub(runEnd).Seconds(), keptUp, fmtCounts(results))
	default:
		pf("            NOT drained, did not keep up: %d of %d events not applied %s after the workload stopped; results %s",
			unapplied, len(evs), drainCheck.Sub(runEnd).Round(time.Second), fmtCounts(results))
	}
	if n := histCount(before, after, "hivedr_applier_apply_seconds", nil); n > 0 {
		mean := histSum(before, after, "hivedr_applier_apply_seconds", nil) / n
		pf("            applier: %s per event (mean apply_seconds) = %.1f events/s per database worker; offered %.1f per database",
			fmtSec(mean), 1/mean, achieved/float64(ndb))
	}
	if copyRate > 0 {
		offered := float64(files) / runDur.Seconds()
		verdict := "MISSED"
		if keptUp && pct(lagHi, .99) < targetP99 {
			verdict = "MET"
		}
		pf("            target with files at %.0f%% of hivedr copy's small-file rate (%.0f files/s measured before the run; offered %.1f files/s): p99 < %.0f s and kept up: %s",
			100*atCopyRate, copyRate, offered, targetP99, verdict)
	}
	switch {
	case achieved < 0.95*rate:
		pf("            target p99 < %.0f s at %.0f events/s: NOT MEASURED, the source reached only %.1f events/s", targetP99, rate, achieved)
	case pct(lagHi, .99) < targetP99 && unapplied == 0:
		pf("            target p99 < %.0f s at %.0f events/s over %d databases: MET", targetP99, rate, ndb)
	default:
		pf("            target p99 < %.0f s at %.0f events/s over %d databases: MISSED", targetP99, rate, ndb)
	}
	pf("daemons     from the run's start to the drain: %s", strings.Join(daemons, "; "))
	pf("verified    %s", verified)
	pf("breakdown   p50 / p95 / p99 / max (Kafka record timestamps: the tailer's and copyd's produce times)")
	pf("  tailer    committed to the log -> event produced to Kafka       %s", fmtDist(tailer))
	pf("  copyd     event produced -> its last file's completion produced %s  (%d events with files, %d files)", fmtDist(copyStage), len(copyStage), nfiles)
	pf("              queued (event produced -> copy started)            %s", fmtDist(copyQueue))
	pf("              copy (started -> finished, verified)               %s", fmtDist(copyRun))
	pf("              publish (finished -> completion produced)          %s", fmtDist(copyPub))
	pf("  applier   ready (event and files produced) -> applied          %s", fmtDist(applyStage))
	pf("              behind earlier events of its database              %s", fmtDist(applyQueued))
	pf("              its own turn (commit visible, fetch, wait, apply)  %s", fmtDist(applyOwn))
	for _, typ := range []string{"ADD_PARTITION", "ALTER_PARTITION", "INSERT"} {
		l := map[string]string{"type": typ}
		n := histCount(before, after, "hivedr_applier_apply_seconds", l)
		if n == 0 {
			continue
		}
		pf("  apply_seconds %-15s mean %s  p50 %s  p99 %s  (n=%.0f; DR metastore calls: read state, plan, run)", typ,
			fmtSec(histSum(before, after, "hivedr_applier_apply_seconds", l)/n),
			fmtSec(histQuantile(before, after, "hivedr_applier_apply_seconds", l, .5)),
			fmtSec(histQuantile(before, after, "hivedr_applier_apply_seconds", l, .99)), n)
	}
	pf("%s", drCalls(before, after, len(evs)))
	var waited float64
	for _, db := range dbs {
		k := fmt.Sprintf(`hivedr_applier_wait_seconds_total{db="%s",reason="waiting_for_files"}`, db)
		waited += after[k] - before[k]
	}
	pf("  waiting for files: %.1f s per database worker (mean) of the %.0f s from start to drain", waited/float64(ndb),
		drainCheck.Sub(runStart).Seconds())
	if missingPub+missingComp > 0 {
		pf("  (%d events not found in their topic, %d file completions not found)", missingPub, missingComp)
	}
	pf("===")
	fmt.Print(b.String())
}

func fmtDist(xs []float64) string {
	return fmt.Sprintf("%s / %s / %s / %s", fmtSec(pct(xs, .5)), fmtSec(pct(xs, .95)), fmtSec(pct(xs, .99)), fmtSec(pct(xs, 1)))
}

func fmtCounts(m map[string]int) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var out []string
	for _, k := range ks {
		out = append(out, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(out, ", ")
}

// TestBenchNewDatabase measures how soon a new database is replicated:
// for each of BENCH_NEWDB_COUNT databases (default 30) created one after
// the other on a synthetic source, the time from its first event published
// (the Kafka timestamp of the first record of its topic) to that event
// applied (the applier's "event done" line). The first third is created
// while the pipeline is otherwise quiet, the rest while BENCH_NEWDB_BUSY_DBS
// other databases (default 4) take BENCH_NEWDB_BUSY_RATE events/s (default
// 20: partition adds and statistics updates, no files). `make bench-newdb`
// runs it; issue 15's target is p99 < 1 s. (TestNewDatabaseAtOnce is the
// functional test of the mechanism, with a generous bound.)
func TestBenchNewDatabase(t *testing.T) {
	nNew := int(envNumber(t, "BENCH_NEWDB_COUNT", 30))
	nBusy := int(envNumber(t, "BENCH_NEWDB_BUSY_DBS", 4))
	busyRate := envNumber(t, "BENCH_NEWDB_BUSY_RATE", 20)
	u := uniq(t)
	var busy, fresh []string
	for i := 0; i < nBusy; i++ {
		busy = append(busy, fmt.Sprintf("bb%02d_%s", i, u))
	}
	for i := 0; i < nNew; i++ {
		fresh = append(fresh, fmt.Sprintf("bn%02d_%s", i, u))
	}
	ctx := ctxFor(t, time.Hour)
	loadStart := loadAverage()
	ss := newSynthSource(t, wl.SynthSpec{Databases: append(append([]string{}, busy...), fresh...), TablesPerDB: 2, InitialPartitions: 1, Rows: 10})
	t.Cleanup(func() { ss.removeData(context.Background()) })
	p := ss.p
	p.startTail()
	p.startCopyd()
	p.startApply("-log-level", "debug")
	tr := newDoneTracker(p.apply)
	waitDone := func(evs []synthEvent, d time.Duration) {
		t.Helper()
		poll(t, d, 20*time.Millisecond, "events applied", func() bool {
			p.checkAlive()
			done := tr.update()
			if len(tr.halted) > 0 {
				t.Fatalf("the applier halted: %s", tr.halted[0])
			}
			for _, e := range evs {
				if _, ok := done[e.id]; !ok {
					return false
				}
			}
			return true
		})
	}

	// Every database's set-up, its files staged; the busy ones applied.
	setup := ss.s.Setup(int32(time.Now().Unix()))
	ss.stage(ctx, setup)
	byDB := map[string][]*wl.SynthStep{}
	for _, st := range setup {
		byDB[st.DB] = append(byDB[st.DB], st)
	}
	var busySteps []*wl.SynthStep
	for _, db := range busy {
		busySteps = append(busySteps, byDB[db]...)
	}
	waitDone(ss.appendAll(ctx, synthRows(busySteps, time.Now(), 1000), 500), 10*time.Minute)

	// The busy databases' workload, planned ahead (no files): enough for
	// the busy part of the run at the rate, appended by a pacer.
	rng := testRand(t)
	var busyTables []*wl.SynthTable
	for _, tb := range ss.s.Tables() {
		if slices.Contains(busy, tb.DB()) {
			busyTables = append(busyTables, tb)
		}
	}
	var load []wl.LogRow
	for len(load) < int(busyRate*600) {
		st := ss.s.PlanStep(busyTables[rng.IntN(len(busyTables))], rng, 0.4, 0, int32(time.Now().Unix()))
		load = append(load, st.Rows(time.Now().Unix())...)
	}
	newRows := map[string][]wl.LogRow{}
	for _, db := range fresh {
		newRows[db] = synthRows(byDB[db], time.Now(), 1000)
	}

	type sample struct {
		db    string
		busy  bool
		first synthEvent
	}
	var samples []sample
	create := func(db string, busy bool) {
		evs := ss.appendRows(ctx, newRows[db])
		waitDone(evs[:1], 5*time.Minute)
		samples = append(samples, sample{db: db, busy: busy, first: evs[0]})
	}
	quiet := nNew / 3
	for _, db := range fresh[:quiet] {
		create(db, false)
	}
	stopLoad := make(chan struct{})
	loadDone := make(chan error, 1)
	busyStart := time.Now()
	go func() {
		start, off := time.Now(), 0
		for off < len(load) {
			select {
			case <-stopLoad:
				loadDone <- nil
				return
			case <-time.After(10 * time.Millisecond):
			}
			due := min(len(load), int(busyRate*time.Since(start).Seconds()))
			if due > off {
				if _, err := ss.tryAppend(ctx, load[off:due]); err != nil {
					loadDone <- err
					return
				}
				off = due
			}
		}
		loadDone <- fmt.Errorf("the busy workload ran out after %d events", len(load))
	}()
	// Let the busy workload reach the applier before the first database.
	time.Sleep(5 * time.Second)
	for _, db := range fresh[quiet:] {
		create(db, true)
	}
	close(stopLoad)
	if err := <-loadDone; err != nil {
		t.Fatal(err)
	}
	busyFor := time.Since(busyStart)

	done := tr.update()
	s := serde(t, ss.env)
	var all, qs, bs []float64
	var b strings.Builder
	pf := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	for _, sm := range samples {
		recs := readTopic(t, ss.env, s, p.prefix+".events."+sm.db)
		if len(recs) == 0 {
			t.Fatalf("%s: applied but its topic holds no record", sm.db)
		}
		lag := done[sm.first.id].at.Sub(recs[0].rec.Timestamp).Seconds()
		all = append(all, lag)
		if sm.busy {
			bs = append(bs, lag)
		} else {
			qs = append(qs, lag)
		}
	}
	dist := func(xs []float64) string {
		return fmt.Sprintf("min %s  p50 %s  p90 %s  p99 %s  max %s  (n=%d)", fmtSec(pct(xs, 0)), fmtSec(pct(xs, .5)), fmtSec(pct(xs, .9)),
			fmtSec(pct(xs, .99)), fmtSec(pct(xs, 1)), len(xs))
	}
	verdict := "MET"
	if pct(all, .99) >= 1 {
		verdict = "MISSED"
	}
	pf("")
	pf("=== make bench-newdb: a new database, its first event published (Kafka timestamp) -> applied on DR ===")
	pf("conditions  %d databases created one after the other on a synthetic source (CREATE_DATABASE, 2 tables, a partition each);", nNew)
	pf("            %d while the pipeline was quiet, %d while %d other databases took %.0f events/s (%s); %d CPUs;",
		quiet, nNew-quiet, nBusy, busyRate, busyFor.Round(time.Second), runtime.NumCPU())
	pf("            load average %s before, %s after (shared machine)", loadStart, loadAverage())
	pf("quiet       %s", dist(qs))
	pf("busy        %s", dist(bs))
	pf("all         %s", dist(all))
	pf("target      p99 < 1 s: %s", verdict)
	pf("===")
	fmt.Print(b.String())
}

// copyFilesRate writes n files of 4 KiB under a directory of their own on
// the source HDFS, copies them to DR with `hivedr copy` (the engine, the
// raw peer of copyd's daemon path) and returns its files a second; both
// directories are removed after.
func copyFilesRate(t *testing.T, n int) float64 {
	t.Helper()
	env := testenv.Require(t)
	src, dr := env.HDFS(t, testenv.Source), env.HDFS(t, testenv.DR)
	dir := "/bench-lag-calibrate/" + uniq(t)
	t.Cleanup(func() { src.RemoveAll(dir); dr.RemoveAll(dir) })
	from := "hdfs://" + env.Get(t, "HIVEDR_HDFS_SRC_NAMENODE") + dir
	put := wl.NativePut(src)
	for i := range n {
		buf := make([]byte, 4096)
		buf[0], buf[1] = byte(i), byte(i>>8)
		if err := put(context.Background(), fmt.Sprintf("%s/f%05d", from, i), buf); err != nil {
			t.Fatal(err)
		}
	}
	to := "hdfs://" + env.Get(t, "HIVEDR_HDFS_DR_NAMENODE") + dir
	hivedrBin(t) // built before the clock starts
	start := time.Now()
	out, errOut, code := runTool(t, 30*time.Minute, "copy", "-log-level", "warn", from, to)
	took := time.Since(start)
	if code != 0 {
		t.Fatalf("hivedr copy %s %s: exit %d\n%s\n%s", from, to, code, out, errOut)
	}
	return float64(n) / took.Seconds()
}
