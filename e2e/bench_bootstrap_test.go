//go:build benchbootstrap

package e2e

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/beltran/gohive/hive_metastore"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/internal/testenv"
	"github.com/hivedr/hivedr/schemas"
)

// benchBootstrapDB is the source database of the benchmark: a fixed name,
// so that a later run reuses its population (workload.PopulatedParam).
const benchBootstrapDB = "bench_bootstrap"

// TestBenchBootstrap is `make bench-bootstrap`, built only with the
// benchbootstrap tag. On the source it populates (or reuses) database
// bench_bootstrap: BENCH_BOOTSTRAP_PARTITIONS partitions (default
// 100,000) over BENCH_BOOTSTRAP_TABLES tables (default 20, four kinds:
// managed and external, partitioned and not), a tiny file in each
// partition and unpartitioned table. Then, in the same run:
//
//   - the raw peer: one plain Thrift client creating the same tables in a
//     fresh DR database and adding the same partitions with add_partitions,
//     1000 per call, one call after the other (as the applier's one
//     worker per database does): the DR metastore's own rate, once
//     before the pipeline and once after it (the load of a shared
//     machine moves), the rate compared being both runs' together;
//   - the pipeline: `hivedr tail`, `hivedr copyd` and `hivedr apply` as
//     separate processes (copyd with BENCH_BOOTSTRAP_COPY_WORKERS
//     workers, default 16, as `make bench-copy` runs its engine) and a
//     bootstrap request (`hivedr bootstrap -no-wait`);
//     the wall time from the request to the DR database's
//     hivedr.bootstrap.done, the partitions per second it makes, the
//     peak RSS of each process (rusage maxrss after a clean stop), and
//     the applier's calls to the DR metastore by type
//     (hivedr_applier_dr_call_seconds).
//
// With BENCH_BOOTSTRAP_FILES=0 the database is bench_bootstrap_nofiles,
// its tables and partitions without files: nothing to copy, so the
// pipeline's figure is the tailer's and the applier's alone, the one the
// raw peer (which copies nothing either) bounds.
//
// Population writes CREATE_TABLE, ADD_PARTITION and ALTER_DATABASE events
// to the source log. The tailer starts at the log's head after them
// (tailer.start_event_id): the bootstrap is what brings those objects, and
// they are not replicated twice. The DR database is dropped first, so the
// tailer's start is not a discontinuity over an existing replica.
func TestBenchBootstrap(t *testing.T) {
	parts := benchEnvInt(t, "BENCH_BOOTSTRAP_PARTITIONS", 100_000)
	tables := benchEnvInt(t, "BENCH_BOOTSTRAP_TABLES", 20)
	copyWorkers := benchEnvInt(t, "BENCH_BOOTSTRAP_COPY_WORKERS", 16)
	env := testenv.Require(t)
	ctx := ctxFor(t, 90*time.Minute)
	src, dr := env.HMS(t, testenv.Source), env.HMS(t, testenv.DR)
	db := benchBootstrapDB
	noFiles := os.Getenv("BENCH_BOOTSTRAP_FILES") == "0"
	if noFiles {
		db += "_nofiles"
	}
	spec := wl.WarehouseSpec{Database: db, Tables: tables, Partitions: parts, NoFiles: noFiles}
	pop := populate(t, ctx, env, spec)
	loadStart := loadAverage()

	// The raw peer, before the pipeline and again after it (the load of
	// a shared machine moves: the rate compared is the two runs' together).
	rawDB := db + "_raw"
	raw := func(when string) (time.Duration, string) {
		load := loadAverage()
		took := rawAddPartitions(t, ctx, env, spec, rawDB)
		t.Logf("raw peer %s: %d partitions into %s in %s: %.0f partitions/s (load %s)", when, pop.Partitions, rawDB,
			took.Round(time.Millisecond), float64(pop.Partitions)/took.Seconds(), load)
		dropDB(t, ctx, dr, rawDB)
		return took, load
	}
	rawBefore, loadRawBefore := raw("before the pipeline")

	// The pipeline.
	dropDB(t, ctx, dr, db)
	p := newPipeline(t, env, []string{db}, currentEventID(t, ctx, src))
	// copyd as `make bench-copy` runs its engine: 16 workers.
	p.editConfig("  workers: 4\n", fmt.Sprintf("  workers: %d\n", copyWorkers))
	p.startTail()
	p.startCopyd()
	p.startApply()
	procs := []*proc{p.tail, p.copyd, p.apply}
	var hwm sync.Map // name -> peak VmHWM seen, for a process that does not stop cleanly
	sampleDone := make(chan struct{})
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			for _, pr := range procs {
				if v := vmHWM(pr.cmd.Process.Pid); v > 0 {
					old, _ := hwm.LoadOrStore(pr.name, v)
					if v > old.(int64) {
						hwm.Store(pr.name, v)
					}
				}
			}
			select {
			case <-sampleDone:
				return
			case <-tick.C:
			}
		}
	}()
	defer close(sampleDone)

	start := time.Now()
	reqID := p.requestBootstrap([]string{db}, nil)
	var began time.Time
	var progress []string
	lastNote := time.Now()
	poll(t, 80*time.Minute, 200*time.Millisecond, db+"'s bootstrap done on DR", func() bool {
		p.checkAlive()
		d, err := dr.GetDatabase(ctx, db)
		if err != nil {
			return false
		}
		if began.IsZero() {
			began = time.Now()
		}
		if time.Since(lastNote) >= 30*time.Second {
			lastNote = time.Now()
			note := fmt.Sprintf("%4.0fs %s", time.Since(start).Seconds(), d.Parameters[drparam.BootstrapApplied])
			progress = append(progress, note)
			t.Logf("progress: %s", note)
		}
		return d.Parameters[drparam.BootstrapDone] != ""
	})
	wall := time.Since(start)
	applyWall := time.Since(began)
	rate := float64(pop.Partitions) / wall.Seconds()
	loadEnd := loadAverage()
	// (The applier started with this bootstrap: its metrics are the run's.)
	calls := drCalls(map[string]float64{}, scrapeMetrics(t, "http://"+p.metrics+"/metrics"), pop.Partitions)

	// What the DR holds.
	var drParts int
	for _, tb := range spec.Layout() {
		if len(tb.Keys) == 0 {
			continue
		}
		names, err := dr.GetPartitionNames(ctx, db, tb.Name, -1)
		if err != nil {
			t.Fatalf("partitions of %s.%s on DR: %v", db, tb.Name, err)
		}
		drParts += len(names)
	}
	if drParts != pop.Partitions {
		t.Errorf("DR holds %d partitions of %s, the source %d", drParts, db, pop.Partitions)
	}

	// Where the time went, from the records' Kafka timestamps.
	topics := kafka.Topics{Prefix: p.prefix}
	s := serde(t, env)
	var endAt, lastComp time.Time
	var comps int
	for _, d := range readTopic(t, env, s, topics.Events(db)) {
		if e, ok := d.value.(*schemas.Event); ok && e.EventType == schemas.EventSnapshotEnd {
			endAt = d.rec.Timestamp
		}
	}
	for _, d := range readTopic(t, env, s, topics.Completions()) {
		if _, ok := d.value.(*schemas.CopyCompletion); ok {
			comps++
			if d.rec.Timestamp.After(lastComp) {
				lastComp = d.rec.Timestamp
			}
		}
	}

	// Peak RSS: VmHWM (the kernel's high-water mark of the resident set)
	// sampled every second until the stop, and rusage maxrss after it;
	// the larger is printed.
	rss, sampled, maxrss := map[string]int64{}, map[string]int64{}, map[string]int64{}
	cpu := map[string]time.Duration{}
	for _, pr := range procs {
		if v := vmHWM(pr.cmd.Process.Pid); v > 0 {
			if old, ok := hwm.Load(pr.name); !ok || v > old.(int64) {
				hwm.Store(pr.name, v)
			}
		}
		pr.stop(t)
		maxrss[pr.name] = pr.peakRSS()
		cpu[pr.name] = pr.cmd.ProcessState.UserTime() + pr.cmd.ProcessState.SystemTime()
		if v, ok := hwm.Load(pr.name); ok {
			sampled[pr.name] = v.(int64)
		}
		rss[pr.name] = max(sampled[pr.name], maxrss[pr.name])
	}

	rawAfter, loadRawAfter := raw("after the pipeline")
	rawTook := (rawBefore + rawAfter) / 2
	rawRate := float64(pop.Partitions) / rawTook.Seconds()

	var b strings.Builder
	pf := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	pf("")
	pf("=== make bench-bootstrap: bootstrap of %s, %d partitions ===", db, pop.Partitions)
	pf("conditions  %d tables (managed and external, partitioned and not), %d partitions, %d tiny files; %d CPUs",
		pop.Tables, pop.Partitions, pop.Files, runtime.NumCPU())
	pf("            applier.batch_partitions %d, copyd %d workers; load average %s before, %s after",
		p.cfg.Applier.BatchPartitions, copyWorkers, loadStart, loadEnd)
	how := "populated"
	if pop.Reused {
		how = "reused"
	}
	pf("population  %s in %s", how, pop.Took.Round(time.Second))
	pf("%-44s %10s %14s", "", "wall", "partitions/s")
	pf("%-44s %9.1fs %14.0f", "raw peer: add_partitions x1000, one client", rawTook.Seconds(), rawRate)
	pf("  before the pipeline (load %s)%*s %9.1fs %14.0f", loadRawBefore, 13-len(loadRawBefore), "", rawBefore.Seconds(), float64(pop.Partitions)/rawBefore.Seconds())
	pf("  after it (load %s)%*s %9.1fs %14.0f", loadRawAfter, 24-len(loadRawAfter), "", rawAfter.Seconds(), float64(pop.Partitions)/rawAfter.Seconds())
	pf("%-44s %9.1fs %14.0f", "pipeline: request -> hivedr.bootstrap.done", wall.Seconds(), rate)
	pf("%-44s %9.1fs %14.0f", "  of which DR database created -> done", applyWall.Seconds(), float64(pop.Partitions)/applyWall.Seconds())
	if !endAt.IsZero() {
		pf("  tailer: request -> END published          %9.1fs", endAt.Sub(start).Seconds())
	}
	if !lastComp.IsZero() {
		pf("  copyd: request -> last of %d completions %9.1fs", comps, lastComp.Sub(start).Seconds())
	}
	verdict := "MET"
	if rate < 0.8*rawRate {
		verdict = "MISSED"
	}
	pf("target      pipeline >= 80%% of the raw rate: %.0f%% of it: %s", 100*rate/rawRate, verdict)
	for _, pr := range procs {
		v := "MET"
		if rss[pr.name] >= 300<<20 {
			v = "MISSED"
		}
		pf("peak RSS    %-8s %6.1f MiB (target < 300 MiB: %s); VmHWM sampled %.1f MiB, maxrss %.1f MiB; CPU %.1f s",
			pr.name, mib(rss[pr.name]), v, mib(sampled[pr.name]), mib(maxrss[pr.name]), cpu[pr.name].Seconds())
	}
	pf("request     %s; progress every 30 s: %s", reqID, strings.Join(progress, " | "))
	pf("%s", calls)
	pf("===")
	fmt.Print(b.String())
}

// rawAddPartitions creates the spec's tables in a fresh DR database db
// and adds their partitions 1000 per add_partitions call from one client,
// returning the time the calls took (the database and tables created,
// and the partition objects built, before the clock starts).
func rawAddPartitions(t *testing.T, ctx context.Context, env *testenv.Env, spec wl.WarehouseSpec, db string) time.Duration {
	t.Helper()
	dr := env.HMS(t, testenv.DR)
	dropDB(t, ctx, dr, db)
	spec.Database = db
	spec.External, spec.Warehouse = env.Get(t, "HIVEDR_HMS_DR_EXTERNAL"), env.Get(t, "HIVEDR_HMS_DR_WAREHOUSE")
	owner, typ := "hivedr", hive_metastore.PrincipalType_USER
	if err := dr.CreateDatabase(ctx, &hive_metastore.Database{Name: db, LocationUri: spec.External + "/" + db + ".db",
		Parameters: map[string]string{}, OwnerName: &owner, OwnerType: &typ}); err != nil {
		t.Fatal(err)
	}
	type call struct {
		table string
		parts []*hive_metastore.Partition
	}
	var calls []call
	for _, tb := range spec.Layout() {
		obj := tb.TableObject(db, spec.Location(tb))
		if err := dr.CreateTable(ctx, obj); err != nil {
			t.Fatal(err)
		}
		for from := 0; from < tb.Partitions; from += 1000 {
			calls = append(calls, call{tb.Name, tb.PartitionObjects(obj, from, min(from+1000, tb.Partitions))})
		}
	}
	start := time.Now()
	for _, c := range calls {
		if _, err := dr.AddPartitionsReq(ctx, &hive_metastore.AddPartitionsRequest{DbName: db, TblName: c.table, Parts: c.parts}); err != nil {
			t.Fatalf("add_partitions to %s.%s: %v", db, c.table, err)
		}
	}
	return time.Since(start)
}
