//go:build benchmem

package e2e

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	wl "github.com/hivedr/hivedr/e2e/workload"
)

// rssSampler records a process's resident set every interval.
type rssSampler struct {
	samples map[string][]int64
	stop    chan struct{}
	done    chan struct{}
}

func sampleRSS(every time.Duration, procs ...*proc) *rssSampler {
	s := &rssSampler{samples: map[string][]int64{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			for _, p := range procs {
				if v := vmRSS(p.cmd.Process.Pid); v > 0 {
					s.samples[p.name] = append(s.samples[p.name], v)
				}
			}
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *rssSampler) end() map[string][]int64 {
	close(s.stop)
	<-s.done
	return s.samples
}

// fmtRSS sums up RSS samples: min, median and max in MiB.
func fmtRSS(xs []int64) string {
	if len(xs) == 0 {
		return "-"
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return fmt.Sprintf("%.0f/%.0f/%.0f MiB (min/median/max of %d samples)", mib(s[0]), mib(s[len(s)/2]), mib(s[len(s)-1]), len(s))
}

// TestBenchMemory measures each daemon's peak resident set facing a
// backlog of BENCH_MEMORY_EVENTS events (default 1,000,000) carrying as
// many copy tasks; `make bench-memory` runs it. The events are INSERTs
// into the 1,000 partitions of a synthetic warehouse (10 databases x 4
// tables x 25 partitions of one 20-row file each, replicated first), each
// listing its partition's existing file again: every copy task is real
// and its target is identical once the file was copied (the task completes
// SKIPPED_IDENTICAL after comparing both sides), so a million tasks need
// no million files. The backlog is written to the log while the daemons
// are stopped; the tailer is started on it and runs until it published
// all of it; then copyd and the applier are started on the million tasks
// and events in Kafka and run for BENCH_MEMORY_SECONDS (default 180).
// Each process's peak is its rusage maxrss after a clean stop (and VmRSS
// is sampled every 5 s).
func TestBenchMemory(t *testing.T) {
	n := int(envNumber(t, "BENCH_MEMORY_EVENTS", 1_000_000))
	observe := time.Duration(envNumber(t, "BENCH_MEMORY_SECONDS", 180) * float64(time.Second))
	const ndb, perDB, parts = 10, 4, 25
	u := uniq(t)
	var dbs []string
	for i := 0; i < ndb; i++ {
		dbs = append(dbs, fmt.Sprintf("bm%02d_%s", i, u))
	}
	ctx := ctxFor(t, 3*time.Hour)
	loadStart := loadAverage()
	ss := newSynthSource(t, wl.SynthSpec{Databases: dbs, TablesPerDB: perDB, InitialPartitions: parts, Rows: 20})
	t.Cleanup(func() { ss.removeData(context.Background()) })
	p := ss.p
	tailURL, copydURL := p.withTailerMetrics(), p.withCopydMetrics()
	applyURL := "http://" + p.metrics + "/metrics"
	t.Cleanup(func() { deleteTopics(t, p) })
	p.editConfig("  batch_size: 200\n", "  batch_size: 1000\n")
	p.editConfig("  workers: 4\n", "  workers: 8\n")
	p.startTail()
	p.startCopyd()
	p.startApply("-log-level", "debug")

	// The warehouse, replicated: its 1,000 files are on DR.
	setup := ss.s.Setup(int32(time.Now().Unix()))
	ss.stage(ctx, setup)
	setupEvs := ss.appendAll(ctx, synthRows(setup, time.Now(), 1000), 500)
	tr := newDoneTracker(p.apply)
	eventually(t, 20*time.Minute, "the set-up applied", func() bool {
		p.checkAlive()
		done := tr.update()
		if len(tr.halted) > 0 {
			t.Fatalf("the applier halted: %s", tr.halted[0])
		}
		for _, e := range setupEvs {
			if _, ok := done[e.id]; !ok {
				return false
			}
		}
		return true
	})
	for _, pr := range []*proc{p.tail, p.copyd, p.apply} {
		pr.stop(t)
	}

	// The backlog: n INSERT events cycling over the 1,000 partitions.
	var distinct []*wl.SynthStep
	for _, tb := range ss.s.Tables() {
		for i := 0; i < parts; i++ {
			distinct = append(distinct, ss.s.Reinsert(tb, i))
		}
	}
	ss.stage(ctx, distinct) // the files' checksums, for the INSERT messages
	rows := make([]wl.LogRow, len(distinct))
	for i, st := range distinct {
		rows[i] = st.Rows(time.Now().Unix())[0]
	}
	backlogStart := time.Now()
	var last int64
	for off := 0; off < n; {
		k := min(10_000, n-off)
		chunk := make([]wl.LogRow, k)
		for i := range chunk {
			chunk[i] = rows[(off+i)%len(rows)]
		}
		a, err := ss.log.Append(ctx, chunk)
		if err != nil {
			t.Fatal(err)
		}
		last = a.Last
		off += k
	}
	t.Logf("backlog: %d INSERT events (up to event %d) appended in %s", n, last, time.Since(backlogStart).Round(time.Second))

	// The tailer on the backlog, until all of it is published.
	p.tail = startHivedr(t, "tail", "tail", "-config", p.conf)
	tailStart := time.Now()
	rssTail := sampleRSS(5*time.Second, p.tail)
	var published float64
	poll(t, 2*time.Hour, 2*time.Second, "the tailer publishing the backlog", func() bool {
		if p.tail.exited() {
			t.Fatalf("the tailer exited:\n%s", tail(p.tail.out.String(), 40))
		}
		m, ok := scrape(tailURL)
		published = m["hivedr_tailer_last_published_event_id"]
		return ok && published >= float64(last)
	})
	tailTook := time.Since(tailStart)
	tailM, _ := scrape(tailURL)
	tailSamples := rssTail.end()
	t.Logf("the tailer published the backlog in %s", tailTook.Round(time.Second))

	// copyd and the applier on a million tasks and events in Kafka.
	p.copyd = startHivedr(t, "copyd", "copyd", "-config", p.conf, "-state-dir", t.TempDir())
	p.startApply()
	rss := sampleRSS(5*time.Second, p.copyd, p.apply, p.tail)
	obsStart := time.Now()
	for time.Since(obsStart) < observe {
		p.checkAlive()
		time.Sleep(time.Second)
	}
	copydM, _ := scrape(copydURL)
	applyM, _ := scrape(applyURL)
	samples := rss.end()
	cpu := map[string]time.Duration{}
	peak := map[string]int64{}
	for _, pr := range []*proc{p.tail, p.copyd, p.apply} {
		pr.stop(t)
		peak[pr.name] = pr.peakRSS()
		cpu[pr.name] = pr.cmd.ProcessState.UserTime() + pr.cmd.ProcessState.SystemTime()
	}
	loadEnd := loadAverage()
	tasksDone := metricSum(copydM, "hivedr_copyd_files_total")
	applied := metricSum(applyM, "hivedr_applier_events_total")

	var b strings.Builder
	pf := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	pf("")
	pf("=== make bench-memory: peak RSS of each daemon facing a backlog of %d events and %d copy tasks ===", n, n)
	pf("conditions  %d databases x %d tables x %d partitions (one 20-row file each, replicated first); the backlog: %d INSERT events",
		ndb, perDB, parts, n)
	pf("            cycling over the %d partitions, each listing its partition's file again (its copy task finds the DR file identical:", len(distinct))
	pf("            SKIPPED_IDENTICAL), written to a synthetic log while the daemons were stopped; tailer batch 1000, copyd 8 workers,")
	pf("            applier look-ahead %d; %d CPUs; load average %s before, %s after (shared machine)", p.cfg.Applier.LookAhead, runtime.NumCPU(), loadStart, loadEnd)
	pf("tailer      published the %d events and their tasks in %s (%.0f events/s; tasks published %.0f); CPU %.1f s",
		n, tailTook.Round(time.Second), float64(n)/tailTook.Seconds(), metricSum(tailM, "hivedr_tailer_copy_tasks_published_total"), cpu["tail"].Seconds())
	pf("copyd       %.0f of the %d tasks completed in %s with the backlog in Kafka (%.0f/s); CPU %.1f s",
		tasksDone, n, observe, tasksDone/observe.Seconds(), cpu["copyd"].Seconds())
	pf("apply       %.0f of the %d events applied in %s (%.1f/s); CPU %.1f s", applied, n, observe, applied/observe.Seconds(), cpu["apply"].Seconds())
	for _, name := range []string{"tail", "copyd", "apply"} {
		v := "MET"
		if peak[name] >= 300<<20 {
			v = "MISSED"
		}
		s := samples[name]
		if name == "tail" {
			s = tailSamples[name]
		}
		pf("peak RSS    %-6s %6.1f MiB (rusage maxrss; target < 300 MiB: %s); VmRSS while working: %s", name, mib(peak[name]), v, fmtRSS(s))
	}
	pf("===")
	fmt.Print(b.String())
}

// TestBenchIdle measures the CPU an idle pipeline takes over a quiet
// warehouse: BENCH_IDLE_TABLES tables (default 10,000) in BENCH_IDLE_DBS
// databases (default 20) of a synthetic source, created and replicated,
// then nothing but heartbeats for BENCH_IDLE_SECONDS (default 60), with
// the tailer's default poll (1 s) and heartbeat (5 s) intervals; `make
// bench-idle` runs it. It reports each daemon's CPU over that window as a
// share of one core (from /proc/<pid>/stat; target < 1%).
func TestBenchIdle(t *testing.T) {
	tables := int(envNumber(t, "BENCH_IDLE_TABLES", 10_000))
	ndb := int(envNumber(t, "BENCH_IDLE_DBS", 20))
	window := time.Duration(envNumber(t, "BENCH_IDLE_SECONDS", 60) * float64(time.Second))
	u := uniq(t)
	var dbs []string
	for i := 0; i < ndb; i++ {
		dbs = append(dbs, fmt.Sprintf("bi%02d_%s", i, u))
	}
	ctx := ctxFor(t, 2*time.Hour)
	ss := newSynthSource(t, wl.SynthSpec{Databases: dbs, TablesPerDB: (tables + ndb - 1) / ndb, Rows: 1})
	p := ss.p
	t.Cleanup(func() { deleteTopics(t, p) })
	p.userDefaults()
	p.startAll()
	applyURL := "http://" + p.metrics + "/metrics"

	setup := ss.s.Setup(int32(time.Now().Unix()))
	evs := ss.appendAll(ctx, synthRows(setup, time.Now(), 1000), 1000)
	setupStart := time.Now()
	// Counted from the applier's metrics: the idle applier runs at its
	// default log level, without a line per event.
	poll(t, time.Hour, time.Second, fmt.Sprintf("the set-up's %d events applied", len(evs)), func() bool {
		p.checkAlive()
		m, ok := scrape(applyURL)
		if ok && metricSum(m, "hivedr_applier_halted") > 0 {
			t.Fatalf("the applier halted a database:\n%s", tail(p.apply.out.String(), 20))
		}
		return ok && eventsApplied(m) >= float64(len(evs))
	})
	t.Logf("set-up: %d databases, %d tables replicated in %s", ndb, len(ss.s.Tables()), time.Since(setupStart).Round(time.Second))
	// Settle: the last heartbeats of the set-up are handled.
	time.Sleep(10 * time.Second)

	procs := []*proc{p.tail, p.copyd, p.apply}
	loadStart := loadAverage()
	m0, _ := scrape(applyURL)
	used, el := idleCPU(p, window, nil)
	m1, _ := scrape(applyURL)
	loadEnd := loadAverage()

	var b strings.Builder
	pf := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	pf("")
	pf("=== make bench-idle: CPU of an idle pipeline over a quiet warehouse of %d tables in %d databases ===", len(ss.s.Tables()), ndb)
	pf("conditions  synthetic source, every table replicated, then no event for %s: heartbeats only (tailer poll 1 s, heartbeat 5 s);", el.Round(time.Second))
	pf("            %d CPUs; load average %s before, %s after (shared machine)", runtime.NumCPU(), loadStart, loadEnd)
	var maxAge float64
	for series, v := range m1 {
		if strings.HasPrefix(series, "hivedr_replica_age_seconds{") {
			maxAge = max(maxAge, v)
		}
	}
	pf("applier     events applied in the window: %.0f; replica age at its end (heartbeats keep it low): max %.1f s over the %d databases",
		metricSum(m1, "hivedr_applier_events_total")-metricSum(m0, "hivedr_applier_events_total"), maxAge, ndb)
	for _, pr := range procs {
		share := 100 * used[pr.name].Seconds() / el.Seconds()
		v := "MET"
		if share >= 1 {
			v = "MISSED"
		}
		pf("CPU         %-6s %5.2f s in %.0f s = %.2f%% of one core (target < 1%%: %s); RSS %.0f MiB", pr.name, used[pr.name].Seconds(),
			el.Seconds(), share, v, mib(vmRSS(pr.cmd.Process.Pid)))
	}
	pf("===")
	fmt.Print(b.String())
}
