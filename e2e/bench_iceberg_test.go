//go:build benchiceberg

package e2e

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/internal/testenv"
)

// TestBenchIceberg is `make bench-iceberg`, built only with the
// benchiceberg tag: Iceberg commits replicated by the three daemons,
// beside `hivedr copy` of the same files (the raw peer) in the same run.
// The reference implementation (one JVM serving the commands) writes a
// table partitioned by day and bucket(4, id) through the source
// metastore, each commit an append of BENCH_ICEBERG_ROWS rows (default
// 300: up to 12 data files, a manifest, a manifest list, a metadata file).
//
//   - Backlog: with the daemons stopped, BENCH_ICEBERG_COMMITS commits
//     (default 40); then the daemons start, and the time from their start
//     to DR's pointer at the last commit gives commits/s and files/s
//     replicated (the writer's own speed out of the figure).
//   - The raw peer: `hivedr copy` of the table's directory as the backlog
//     left it (every file of those commits) to a fresh DR directory.
//   - Live: BENCH_ICEBERG_LIVE more commits (default 10) one after the
//     other with the daemons running, while a sampler reads DR's pointer
//     every 10 ms: a commit's lag runs from the writer's commit returning
//     to the first sample of DR at that commit or a later one.
func TestBenchIceberg(t *testing.T) {
	commits := benchEnvInt(t, "BENCH_ICEBERG_COMMITS", 40)
	live := benchEnvInt(t, "BENCH_ICEBERG_LIVE", 10)
	rows := benchEnvInt(t, "BENCH_ICEBERG_ROWS", 300)
	env := testenv.Require(t)
	tool := newIcebergTool(t, env)
	ctx := ctxFor(t, 60*time.Minute)
	src, dr := env.HMS(t, testenv.Source), env.HMS(t, testenv.DR)
	srcFS, _ := pipelineFS(t, env)
	db := "benchice_" + uniq(t)
	loadStart := loadAverage()
	p := newPipeline(t, env, []string{db}, currentEventID(t, ctx, src))

	// Backlog.
	tool.commit(ctx, t, env, db, "create")
	tool.commit(ctx, t, env, db, "evolve-spec", "4")
	var last string
	for i := range commits {
		last = tool.commit(ctx, t, env, db, "append", fmt.Sprint(rows), fmt.Sprint(100+i))
	}
	tableDir := env.Get(t, "HIVEDR_HMS_SRC_WAREHOUSE") + "/" + db + ".db/t1"
	files, bytes := 0, int64(0)
	if err := srcFS.Walk(ctx, tableDir, func(_ string, size int64) error { files++; bytes += size; return nil }); err != nil {
		t.Fatal(err)
	}
	hivedrBin(t) // built before the clock starts
	started := time.Now()
	p.startAll()
	waitIcebergPointer(ctx, t, p, dr, db, last)
	backlog := time.Since(started)

	// The raw peer, on the same files.
	dst := env.Get(t, "HIVEDR_HMS_DR_WAREHOUSE") + "/bench-iceberg-copy/" + db
	copyStart := time.Now()
	out, errOut, code := runTool(t, 30*time.Minute, "copy", "-log-level", "warn", tableDir, dst)
	copyTook := time.Since(copyStart)
	if code != 0 {
		t.Fatalf("hivedr copy %s %s: exit %d\n%s\n%s", tableDir, dst, code, out, errOut)
	}

	// Live: the sampler records when DR first showed each pointer.
	var mu sync.Mutex
	firstSeen := map[string]time.Time{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	sampler := env.HMS(t, testenv.DR)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			r, err := sampler.GetTableReq(ctx, &hive_metastore.GetTableRequest{DbName: db, TblName: "t1"})
			if err != nil {
				continue
			}
			now := time.Now()
			mu.Lock()
			if ptr := r.Table.Parameters["metadata_location"]; firstSeen[ptr].IsZero() {
				firstSeen[ptr] = now
			}
			mu.Unlock()
		}
	}()
	var drPointers []string
	var committed []time.Time
	for i := range live {
		last = tool.commit(ctx, t, env, db, "append", fmt.Sprint(rows), fmt.Sprint(1000+i))
		committed = append(committed, time.Now())
		m, err := p.mapLocation(last)
		if err != nil {
			t.Fatal(err)
		}
		drPointers = append(drPointers, m)
	}
	waitIcebergPointer(ctx, t, p, dr, db, last)
	time.Sleep(50 * time.Millisecond) // a sample after the wait saw it
	close(stop)
	wg.Wait()
	// A commit is on DR once DR shows it or a later one (a sample may
	// fall between two flips).
	var lags []float64
	for i := range drPointers {
		var at time.Time
		for _, ptr := range drPointers[i:] {
			if s := firstSeen[ptr]; !s.IsZero() && (at.IsZero() || s.Before(at)) {
				at = s
			}
		}
		if at.IsZero() {
			t.Fatalf("live commit %d (%s) never seen on DR", i, drPointers[i])
		}
		lags = append(lags, at.Sub(committed[i]).Seconds())
	}

	t.Logf("machine: %d CPUs, load average %s at the start, %s at the end", runtime.NumCPU(), loadStart, loadAverage())
	t.Logf("backlog: %d commits of %d rows (%d files, %d bytes with the table's creation) replicated in %s from the daemons' start: %.2f commits/s, %.0f files/s",
		commits, rows, files, bytes, backlog.Round(time.Millisecond), float64(commits)/backlog.Seconds(), float64(files)/backlog.Seconds())
	t.Logf("raw peer: hivedr copy of the same %d files in %s (%.0f files/s): the pipeline took %.2fx its time",
		files, copyTook.Round(time.Millisecond), float64(files)/copyTook.Seconds(), backlog.Seconds()/copyTook.Seconds())
	t.Logf("live: %d commits, lag per commit p50 %s, p99 %s, max %s", live, fmtSec(pct(lags, 0.5)), fmtSec(pct(lags, 0.99)), fmtSec(pct(lags, 1)))
}
