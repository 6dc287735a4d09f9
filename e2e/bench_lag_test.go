//go:build benchlag

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/testenv"
	"github.com/hivedr/hivedr/schemas"
)

// TestPipelineLag is the end-to-end lag benchmark, run by `make bench-lag`
// only: it is built only with the benchlag tag, so `make test` neither
// runs nor skips it. It starts `hivedr tail`, `hivedr copyd` and `hivedr apply` as
// separate processes on topics and groups of their own, then drives a
// steady workload with files through the real source metastore and HDFS:
// external tables partitioned by dt in three databases, each step either
// adding a partition with a small data file (one ADD_PARTITION event) or
// inserting a file into an existing partition (ALTER_PARTITION with the
// statistics, then INSERT: two events), paced to BENCH_LAG_RATE events/s
// (default 100) for BENCH_LAG_SECONDS (default 60), by one writer per
// table (BENCH_LAG_TABLES_PER_DB, default 4). If the source cannot keep
// the pace the achieved rate says so.
//
// Lag is measured per event from outside, to the millisecond, with no
// hook in the daemons. The event happened while its step ran (wall time
// just before the step's first metastore call to its return) and within
// the second of its EVENT_TIME (the metastore runs on this machine's
// clock): the intersection bounds it. It was applied when the applier
// logged it done (its debug "event done" line, written after the DR
// metastore calls returned). Events are matched to steps through the
// source notification log, per table, in order. Where the time went is
// read from the records themselves: the Kafka timestamps of the event
// (tailer) and of its files' completions (copyd). The applier's own
// hivedr_applier_event_lag_seconds histogram (from the whole-second
// EVENT_TIME, so up to 1 s off) is reported beside it as a cross-check.
func TestPipelineLag(t *testing.T) {
	rate := envNumber(t, "BENCH_LAG_RATE", 100)
	seconds := envNumber(t, "BENCH_LAG_SECONDS", 60)
	perDB := int(envNumber(t, "BENCH_LAG_TABLES_PER_DB", 4))
	const rows, addShare, ndb = 20, 0.4, 3
	env := testenv.Require(t)
	ctx := ctxFor(t, time.Duration(seconds)*time.Second+15*time.Minute)
	src := env.HMS(t, testenv.Source)
	srcFS, _ := pipelineFS(t, env)
	root := env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL")
	u := uniq(t)
	var dbs []string
	for i := 0; i < ndb; i++ {
		dbs = append(dbs, fmt.Sprintf("bl%d_%s", i, u))
	}
	loadStart := loadAvg()

	// The pipeline, the applier logging every event it finishes.
	p := newPipeline(t, env, dbs, currentEventID(t, ctx, src))
	p.startTail()
	p.startCopyd()
	p.startApply("-log-level", "debug")

	// Set-up, not measured: databases, tables, two partitions each.
	type table struct {
		db, name string
		parts    []string // dt values
	}
	var tables []*table
	setup := wl.NewSource(src, srcFS, root)
	spec := wl.TableSpec{Columns: []string{"id bigint", "amount double", "note string"}, PartitionKeys: []string{"dt"}}
	setupStart := currentEventID(t, ctx, src)
	for _, db := range dbs {
		if err := setup.CreateDatabase(ctx, db); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < perDB; i++ {
			tb := &table{db: db, name: fmt.Sprintf("t%d", i), parts: []string{"p000000", "p000001"}}
			if err := setup.CreateTable(ctx, db, tb.name, spec); err != nil {
				t.Fatal(err)
			}
			if _, err := setup.AddPartitions(ctx, db, tb.name, [][]string{{tb.parts[0]}, {tb.parts[1]}}, rows); err != nil {
				t.Fatal(err)
			}
			tables = append(tables, tb)
		}
	}
	var setupIDs []int64
	for _, e := range notifications(t, ctx, src, setupStart, dbs...) {
		setupIDs = append(setupIDs, e.EventId)
	}
	waitStart := time.Now()
	for {
		p.checkAlive()
		done := appliedEvents(p.apply.out.String())
		missing := 0
		for _, id := range setupIDs {
			if _, ok := done[id]; !ok {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Since(waitStart) > 3*time.Minute {
			t.Fatalf("set-up: %d of %d events not applied after 3 minutes", missing, len(setupIDs))
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("set-up: %d events applied in %s", len(setupIDs), time.Since(waitStart).Round(time.Millisecond))
	metricsURL := "http://" + p.metrics + "/metrics"
	before := scrapeMetrics(t, metricsURL)

	// The measured run: a pacer hands out steps at the target event rate
	// and the first free writer runs each on its own table (one writer
	// per table: a Source is not safe for concurrent use, and a table's
	// steps stay in order).
	type stepRec struct {
		tb         *table
		kinds      []string // the events the step makes, in order
		start, end time.Time
	}
	type token struct{ add bool }
	tokens := make(chan token, len(tables))
	recs := make([][]stepRec, len(tables))
	var (
		errMu    sync.Mutex
		firstErr error
	)
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	var wg sync.WaitGroup
	for i, tb := range tables {
		c := env.HMS(t, testenv.Source)
		w := wl.NewSource(c, srcFS, root)
		rng := rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := len(tb.parts)
			for tok := range tokens {
				r := stepRec{tb: tb}
				var err error
				if tok.add {
					dt := fmt.Sprintf("p%06d", next)
					next++
					r.kinds = []string{"ADD_PARTITION"}
					r.start = time.Now()
					_, err = w.AddPartitions(runCtx, tb.db, tb.name, [][]string{{dt}}, rows)
					r.end = time.Now()
					tb.parts = append(tb.parts, dt)
				} else {
					dt := tb.parts[rng.IntN(len(tb.parts))]
					r.kinds = []string{"ALTER_PARTITION", "INSERT"}
					r.start = time.Now()
					_, err = w.Insert(runCtx, tb.db, tb.name, []string{dt}, rows)
					r.end = time.Now()
				}
				if err != nil {
					errMu.Lock()
					if firstErr == nil && runCtx.Err() == nil {
						firstErr = err
					}
					errMu.Unlock()
					stopRun()
					return
				}
				recs[i] = append(recs[i], r)
			}
		}()
	}
	runStartID := currentEventID(t, ctx, src)
	runStart := time.Now()
	deadline := runStart.Add(time.Duration(seconds * float64(time.Second)))
	pick := rand.New(rand.NewPCG(1, 2))
	next, slipped := runStart, time.Duration(0)
pace:
	for {
		tok := token{add: pick.Float64() < addShare}
		n := 2.0
		if tok.add {
			n = 1
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Until(next))
		select {
		case tokens <- tok:
		case <-runCtx.Done():
			break pace
		}
		next = next.Add(time.Duration(n / rate * float64(time.Second)))
		// The writers fell behind: do not burst to catch up more than a
		// second's worth; the achieved rate says what the source did.
		if late := time.Since(next); late > time.Second {
			slipped += late - time.Second
			next = time.Now().Add(-time.Second)
		}
	}
	close(tokens)
	wg.Wait()
	runEnd := time.Now()
	if firstErr != nil {
		t.Fatalf("workload: %v", firstErr)
	}
	loadRun := loadAvg()

	// Which events the run made: the source log, matched to the steps per
	// table in order.
	all := notifications(t, ctx, src, runStartID, dbs...)
	runEndID := currentEventID(t, ctx, src)
	// An event happened while its step ran, [start, end], and in the
	// second its EVENT_TIME names (the metastore's clock is this
	// machine's): lo and hi are the intersection, so the lag is known to
	// within hi - lo, to the millisecond.
	type evRec struct {
		id     int64
		typ    string
		db     string
		lo, hi time.Time
	}
	byTable := map[string][]*hmsEvent{}
	for _, e := range all {
		k := strings.ToLower(e.GetDbName() + "." + e.GetTableName())
		byTable[k] = append(byTable[k], &hmsEvent{id: e.EventId, typ: e.EventType, sec: int64(e.EventTime)})
	}
	var evs []evRec
	var steps []stepRec
	for i, tb := range tables {
		got := byTable[tb.db+"."+tb.name]
		j := 0
		for _, r := range recs[i] {
			steps = append(steps, r)
			for _, k := range r.kinds {
				if j >= len(got) || got[j].typ != k {
					t.Fatalf("%s.%s: the source log does not hold the events of the steps in order (step %d wants %s, log has %v)",
						tb.db, tb.name, len(steps), k, got[min(j, len(got)):min(j+3, len(got))])
				}
				lo, hi := r.start, r.end
				if s := time.Unix(got[j].sec, 0); s.After(lo) && s.Before(hi) {
					lo = s
				}
				if s := time.Unix(got[j].sec+1, 0); s.After(lo) && s.Before(hi) {
					hi = s
				}
				evs = append(evs, evRec{id: got[j].id, typ: k, db: tb.db, lo: lo, hi: hi})
				j++
			}
		}
		if j != len(got) {
			t.Fatalf("%s.%s: %d events in the source log that no step made", tb.db, tb.name, len(got)-j)
		}
	}
	sort.Slice(evs, func(i, j int) bool { return evs[i].id < evs[j].id })

	// Drain: wait until every event of the run is applied.
	var done map[int64]doneRec
	drainLimit := 2*time.Minute + time.Duration(seconds*float64(time.Second))
	for {
		p.checkAlive()
		done = appliedEvents(p.apply.out.String())
		missing := 0
		for _, e := range evs {
			if _, ok := done[e.id]; !ok {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Since(runEnd) > drainLimit {
			t.Errorf("%d of %d events still not applied %s after the workload stopped", missing, len(evs), drainLimit)
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	drainCheck := time.Now()
	after := scrapeMetrics(t, metricsURL)
	loadEnd := loadAvg()

	// Per event: lag, and where it went.
	s := serde(t, env)
	pub := map[int64]*schemas.Event{}
	pubTime := map[int64]time.Time{}
	for _, db := range dbs {
		for _, d := range readTopic(t, env, s, p.prefix+".events."+db) {
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
	for _, d := range readTopic(t, env, s, p.prefix+".completions") {
		if c, ok := d.value.(*schemas.CopyCompletion); ok {
			if old, seen := comps[c.TaskID]; !seen || d.rec.Timestamp.Before(old.ts) {
				comps[c.TaskID] = compRec{c, d.rec.Timestamp}
			}
		}
	}
	var (
		lagHi, lagLo, stepDur, window                  []float64
		tailer, copyStage, copyQueue, copyRun, copyPub []float64
		applyStage, applyQueued, applyOwn              []float64
		results                                        = map[string]int{}
		types                                          = map[string]int{}
		files, unapplied                               int
		lastApplied                                    time.Time
		prevDone                                       = map[string]time.Time{}
		windows                                        = map[int][]float64{}
		missingPub, missingComp                        int
	)
	for _, r := range steps {
		stepDur = append(stepDur, r.end.Sub(r.start).Seconds())
	}
	for _, e := range evs {
		types[e.typ]++
		d, ok := done[e.id]
		if !ok {
			unapplied++
			// Not applied by the end: counted with the lag it has so far
			// (a lower bound), so the percentiles do not flatter.
			d = doneRec{at: drainCheck, result: "not_applied"}
		}
		results[d.result]++
		if d.at.After(lastApplied) {
			lastApplied = d.at
		}
		lag := d.at.Sub(e.lo).Seconds()
		lagHi = append(lagHi, lag)
		lagLo = append(lagLo, d.at.Sub(e.hi).Seconds())
		window = append(window, e.hi.Sub(e.lo).Seconds())
		w := int(e.lo.Sub(runStart) / (10 * time.Second))
		windows[w] = append(windows[w], lag)

		ev, pt := pub[e.id], pubTime[e.id]
		if ev == nil {
			missingPub++
			continue
		}
		tailer = append(tailer, pt.Sub(e.hi).Seconds())
		ready := pt
		var last compRec
		nf := 0
		for _, f := range ev.Files {
			if f.TaskID == "" {
				continue
			}
			nf++
			c, ok := comps[f.TaskID]
			if !ok {
				missingComp++
				continue
			}
			if c.ts.After(last.ts) {
				last = c
			}
		}
		files += nf
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

	// The report.
	runDur := runEnd.Sub(runStart)
	var b strings.Builder
	pf := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	pf("")
	pf("=== make bench-lag: end-to-end lag, source metastore call -> applied on the DR metastore ===")
	pf("conditions  target %.0f events/s for %.0f s; %d databases x %d external tables partitioned by dt, one writer each;",
		rate, seconds, ndb, perDB)
	pf("            steps: %.0f%% add a partition with a file (1 event), %.0f%% insert a file into a partition (2 events); files of %d rows",
		100*addShare, 100*(1-addShare), rows)
	pf("            tailer poll %s batch %d, copyd %d workers, applier one worker per database; %d CPUs",
		p.cfg.Tailer.PollInterval.Duration, p.cfg.Tailer.BatchSize, p.cfg.Copyd.Workers, runtime.NumCPU())
	pf("            load average (1/5/15 min): %s before, %s after the run, %s after the drain", loadStart, loadRun, loadEnd)
	pf("workload    %d events in %.1f s = %.1f events/s achieved (target %.0f); %d steps; %d files",
		len(evs), runDur.Seconds(), float64(len(evs))/runDur.Seconds(), rate, len(steps), files)
	pf("            by type: %s; the whole source log grew by %d events (others': %d)",
		fmtCounts(types), runEndID-runStartID, int(runEndID-runStartID)-len(evs))
	if slipped > 0 {
		pf("            the writers fell behind the schedule by %.1f s in all (source-side limit)", slipped.Seconds())
	}
	pf("            step duration at the source (all its metastore and HDFS calls): %s", fmtDist(stepDur))
	pf("lag         per event, from its source event to applied on DR (the applier's log line after the DR calls returned):")
	pf("            p50 %s  p95 %s  p99 %s  max %s   (n=%d; upper bounds: from the earliest the event can have happened)",
		fmtSec(pct(lagHi, .50)), fmtSec(pct(lagHi, .95)), fmtSec(pct(lagHi, .99)), fmtSec(pct(lagHi, 1)), len(lagHi))
	pf("            lower bounds: p50 %s  p99 %s  max %s; the event's time is known to within %s (p50; p99 %s): its step's",
		fmtSec(pct(lagLo, .50)), fmtSec(pct(lagLo, .99)), fmtSec(pct(lagLo, 1)), fmtSec(pct(window, .5)), fmtSec(pct(window, .99)))
	pf("            wall-clock span intersected with its EVENT_TIME second")
	achieved := float64(len(evs)) / runDur.Seconds()
	switch {
	case achieved < 0.95*rate:
		pf("            target p99 < 10 s at %.0f events/s: NOT MEASURED, the source produced only %.1f events/s (p99 %s at that rate)",
			rate, achieved, fmtSec(pct(lagHi, .99)))
	case pct(lagHi, .99) < 10:
		pf("            target p99 < 10 s at %.0f events/s: MET", rate)
	default:
		pf("            target p99 < 10 s at %.0f events/s: MISSED", rate)
	}
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
	if unapplied == 0 {
		pf("            drained: the last event was applied %.2f s after the workload stopped; results %s",
			lastApplied.Sub(runEnd).Seconds(), fmtCounts(results))
	} else {
		pf("            NOT drained: %d events not applied %s after the workload stopped; results %s",
			unapplied, drainCheck.Sub(runEnd).Round(time.Second), fmtCounts(results))
	}
	if n := histCount(before, after, "hivedr_applier_apply_seconds", nil); n > 0 {
		mean := histSum(before, after, "hivedr_applier_apply_seconds", nil) / n
		pf("            applier capacity: one ordered worker per database at %s per event (mean apply_seconds) = %.1f events/s each;",
			fmtSec(mean), 1/mean)
		pf("            offered %.1f events/s per database", achieved/ndb)
	}
	pf("breakdown   p50 / p95 / p99 / max (Kafka record timestamps: the tailer's and copyd's produce times)")
	pf("  source    event time uncertainty (earliest -> latest possible)  %s", fmtDist(window))
	pf("  tailer    latest possible event time -> event produced to Kafka %s", fmtDist(tailer))
	pf("  copyd     event produced -> its last file's completion produced %s  (%d events with files)", fmtDist(copyStage), len(copyStage))
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
	var waits []string
	for _, db := range dbs {
		k := fmt.Sprintf(`hivedr_applier_wait_seconds_total{db="%s",reason="waiting_for_files"}`, db)
		waits = append(waits, fmt.Sprintf("%.1f s", after[k]-before[k]))
	}
	pf("  waiting for files, per database worker: %s of the %.0f s from start to drain", strings.Join(waits, ", "),
		drainCheck.Sub(runStart).Seconds())
	if missingPub+missingComp > 0 {
		pf("  (%d events not found in their topic, %d file completions not found)", missingPub, missingComp)
	}
	pf("===")
	fmt.Print(b.String())
}

type hmsEvent struct {
	id  int64
	typ string
	sec int64 // EVENT_TIME
}

func (e *hmsEvent) String() string { return fmt.Sprintf("%d:%s", e.id, e.typ) }

type doneRec struct {
	at     time.Time
	result string
}

var eventDoneLine = regexp.MustCompile(`^time=(\S+) level=DEBUG msg="event done" .*?\bevent_id=(\d+) .*?\bresult=(\S+)`)

// appliedEvents reads the applier's debug log: when each event was done
// (applied, or found to need nothing), to the millisecond.
func appliedEvents(log string) map[int64]doneRec {
	out := map[int64]doneRec{}
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		m := eventDoneLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			continue
		}
		id, _ := strconv.ParseInt(m[2], 10, 64)
		if _, seen := out[id]; !seen {
			out[id] = doneRec{at: at, result: m[3]}
		}
	}
	return out
}

// scrapeMetrics reads a Prometheus text exposition into series -> value,
// the series named as exposed (name{labels}).
func scrapeMetrics(t *testing.T, url string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, l := range strings.Split(httpGet(t, url), "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(l[i+1:], 64)
		if err == nil {
			out[l[:i]] = v
		}
	}
	return out
}

var seriesLabel = regexp.MustCompile(`(\w+)="([^"]*)"`)

func seriesLabels(series string) map[string]string {
	out := map[string]string{}
	for _, m := range seriesLabel.FindAllStringSubmatch(series, -1) {
		out[m[1]] = m[2]
	}
	return out
}

func labelsMatch(got, want map[string]string) bool {
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// histDelta sums the series of a metric with the given suffix (_count,
// _sum) and labels over all other labels, after minus before.
func histDelta(before, after map[string]float64, name, suffix string, want map[string]string) float64 {
	var v float64
	for s, x := range after {
		if !strings.HasPrefix(s, name+suffix+"{") && s != name+suffix {
			continue
		}
		if labelsMatch(seriesLabels(s), want) {
			v += x - before[s]
		}
	}
	return v
}

func histCount(before, after map[string]float64, name string, want map[string]string) float64 {
	return histDelta(before, after, name, "_count", want)
}

func histSum(before, after map[string]float64, name string, want map[string]string) float64 {
	return histDelta(before, after, name, "_sum", want)
}

// histQuantile estimates a quantile of what a histogram observed between
// the two scrapes, interpolating within buckets as histogram_quantile does.
func histQuantile(before, after map[string]float64, name string, want map[string]string, q float64) float64 {
	buckets := map[float64]float64{}
	for s, x := range after {
		if !strings.HasPrefix(s, name+"_bucket{") {
			continue
		}
		ls := seriesLabels(s)
		if !labelsMatch(ls, want) {
			continue
		}
		le, err := strconv.ParseFloat(ls["le"], 64)
		if ls["le"] == "+Inf" {
			le, err = math.Inf(1), nil
		}
		if err != nil {
			continue
		}
		buckets[le] += x - before[s]
	}
	var les []float64
	for le := range buckets {
		les = append(les, le)
	}
	slices.Sort(les)
	if len(les) == 0 || buckets[les[len(les)-1]] == 0 {
		return math.NaN()
	}
	rank := q * buckets[les[len(les)-1]]
	lower, below := 0.0, 0.0
	for _, le := range les {
		n := buckets[le]
		if n >= rank {
			if math.IsInf(le, 1) {
				return lower
			}
			if n == below {
				return le
			}
			return lower + (le-lower)*(rank-below)/(n-below)
		}
		lower, below = le, n
	}
	return lower
}

func pct(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func fmtSec(x float64) string {
	switch {
	case math.IsNaN(x):
		return "-"
	case math.Abs(x) < 1:
		return fmt.Sprintf("%.0f ms", 1000*x)
	default:
		return fmt.Sprintf("%.2f s", x)
	}
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

func envNumber(t *testing.T, key string, def float64) float64 {
	t.Helper()
	s := os.Getenv(key)
	if s == "" {
		return def
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v <= 0 {
		t.Fatalf("%s=%q: want a positive number", key, s)
	}
	return v
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], "/")
}
