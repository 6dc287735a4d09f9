package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/testenv"
)

// Bounds of TestScale500Databases (issue 24's targets).
const (
	scaleDatabases = 500
	// scaleBound is how long after the first database is created all of
	// them may take to be on DR.
	scaleBound = 3 * time.Minute
	// probeBound is how long the DR metastore may take to answer a probe.
	probeBound = 2 * time.Second
	// stopBound is how long the applier may take to stop on SIGTERM.
	stopBound = 10 * time.Second
	// scaleCreators create the databases on the source in parallel.
	scaleCreators = 8
)

// drProbe is one get_database call on the DR metastore, as recorded.
type drProbe struct {
	at   time.Time
	took time.Duration
	err  error
}

// TestScale500Databases creates 500 databases on the source while the
// pipeline runs over a glob scope, each with a partitioned table and one
// partition with a small file, and checks that all are on DR (the
// partition applied, so its file copied) within scaleBound of the first
// created, that the DR metastore answered a get_database probe made every
// second within probeBound throughout, and that the applier then stops on
// SIGTERM within stopBound. It logs where the time went (creating,
// applying), the applier's peak of DR metastore connections and its
// workers' waits for one. The databases are dropped on both sides and the
// topics deleted at the end.
func TestScale500Databases(t *testing.T) {
	u := uniq(t)
	pattern := "s500_" + u + "_*"
	var dbs []string
	for i := range scaleDatabases {
		dbs = append(dbs, fmt.Sprintf("s500_%s_%03d", u, i))
	}
	pt := startPipeline(t, 15*time.Minute, pattern)
	env := pt.env
	t.Cleanup(func() {
		// The daemons first: a tailer still running would publish the
		// drops (and make the topics again).
		for _, p := range []*proc{pt.tail, pt.copyd, pt.apply} {
			p.kill9()
		}
		dropScale(t, env, dbs)
		deleteTopics(t, pt.pipeline)
	})

	// The probe: its own connection, with a short socket timeout so a
	// wedged metastore shows as a slow probe rather than a stuck test.
	probeCtx, stopProbe := context.WithCancel(pt.ctx)
	var (
		probesMu sync.Mutex
		probes   []drProbe
		probed   = make(chan struct{})
	)
	go func() {
		defer close(probed)
		opts := env.HMSOptions(t)
		opts.SocketTimeout, opts.ConnectTimeout = 2*probeBound, 2*probeBound
		addr := env.Get(t, "HIVEDR_HMS_DR")
		var c *hms.Client
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			start := time.Now()
			var err error
			if c == nil {
				c, err = hms.Dial(probeCtx, addr, opts)
			}
			if err == nil {
				_, err = c.GetDatabase(probeCtx, "default")
				if err != nil {
					c.Close()
					c = nil
				}
			}
			probesMu.Lock()
			probes = append(probes, drProbe{at: start, took: time.Since(start), err: err})
			probesMu.Unlock()
			select {
			case <-probeCtx.Done():
				if c != nil {
					c.Close()
				}
				return
			case <-tick.C:
			}
		}
	}()

	// The applier's DR connections, sampled every second.
	var (
		connMu   sync.Mutex
		connsMax float64
	)
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			if m, ok := scrape("http://" + pt.metrics + "/metrics"); ok {
				connMu.Lock()
				connsMax = max(connsMax, metricSum(m, "hivedr_applier_dr_connections_open"))
				connMu.Unlock()
			}
			select {
			case <-probeCtx.Done():
				return
			case <-tick.C:
			}
		}
	}()

	// Create the databases, scaleCreators at a time, each creator on a
	// source connection of its own.
	created := make([]time.Time, len(dbs))
	begin := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, scaleCreators)
	spec := wl.TableSpec{Columns: []string{"id bigint", "note string"}, PartitionKeys: []string{"dt"}}
	root := env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL")
	for k := range scaleCreators {
		s := wl.NewSource(env.HMS(t, testenv.Source), pt.srcFS, root)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := k; i < len(dbs); i += scaleCreators {
				db := dbs[i]
				err := s.CreateDatabase(pt.ctx, db)
				if err == nil {
					err = s.CreateTable(pt.ctx, db, "t", spec)
				}
				if err == nil {
					_, err = s.AddPartitions(pt.ctx, db, "t", [][]string{{"2026-12-06"}}, 5)
				}
				if err != nil {
					errs <- err
					return
				}
				created[i] = time.Now()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	createTook := time.Since(begin)
	t.Logf("created %d databases (a table and a partition with a file each) in %s", len(dbs), createTook.Round(time.Millisecond))

	// Wait until every database's partition is on DR: one get_databases
	// call a round finds the databases there, and the partition of each
	// found is looked for until it is there too.
	onDR := make([]time.Time, len(dbs))
	left := slices.Clone(dbs)
	idx := map[string]int{}
	for i, db := range dbs {
		idx[db] = i
	}
	deadline := begin.Add(scaleBound + 2*time.Minute) // past the bound: to measure how far past
	check := time.NewTicker(500 * time.Millisecond)
	defer check.Stop()
	for len(left) > 0 && time.Now().Before(deadline) {
		pt.checkAlive()
		there, err := pt.dr.GetDatabases(pt.ctx, pattern)
		if err != nil {
			t.Fatalf("get_databases on DR: %v", err)
		}
		var still []string
		for _, db := range left {
			if slices.Contains(there, db) {
				names, err := pt.dr.GetPartitionNames(pt.ctx, db, "t", -1)
				if err == nil && len(names) == 1 {
					onDR[idx[db]] = time.Now()
					continue
				}
			}
			still = append(still, db)
		}
		left = still
		if len(left) > 0 {
			<-check.C
		}
	}
	allTook := time.Since(begin)
	stopProbe()
	<-probed

	var lags []time.Duration
	for i := range dbs {
		if !onDR[i].IsZero() {
			lags = append(lags, onDR[i].Sub(created[i]))
		}
	}
	slices.Sort(lags)
	if len(lags) > 0 {
		t.Logf("created -> on DR per database: median %s, p99 %s, max %s", lags[len(lags)/2].Round(time.Millisecond),
			lags[len(lags)*99/100].Round(time.Millisecond), lags[len(lags)-1].Round(time.Millisecond))
	}
	m, _ := scrape("http://" + pt.metrics + "/metrics")
	connMu.Lock()
	sampled := connsMax
	connMu.Unlock()
	waitN, waitSum := metricSum(m, "hivedr_applier_dr_connection_wait_seconds_count"), metricSum(m, "hivedr_applier_dr_connection_wait_seconds_sum")
	callN, callSum := metricSum(m, "hivedr_applier_dr_call_seconds_count"), metricSum(m, "hivedr_applier_dr_call_seconds_sum")
	t.Logf("DR metastore connections: peak %v (gauge sampled each second: %v; applier.dr_connections %d); "+
		"%v waits for one, %.1f s in all; %v DR calls, %.1f s in all",
		metricSum(m, "hivedr_applier_dr_connections_peak"), sampled, pt.cfg.Applier.DRConnections, waitN, waitSum, callN, callSum)
	t.Logf("DR calls by call (count, seconds): %s; events by type: %s", seriesSplit(m, "hivedr_applier_dr_call_seconds", "call"),
		seriesSplit(m, "hivedr_applier_events_total", "type"))
	t.Logf("all %d on DR %s after the first was created (creating took %s; bound %s)", len(dbs)-len(left),
		allTook.Round(time.Millisecond), createTook.Round(time.Millisecond), scaleBound)

	if len(left) > 0 {
		t.Errorf("%d of %d databases not on DR %s after the first was created, e.g. %v", len(left), len(dbs), allTook.Round(time.Second), left[:min(5, len(left))])
	} else if allTook > scaleBound {
		t.Errorf("all %d databases on DR %s after the first was created, want within %s", len(dbs), allTook.Round(time.Second), scaleBound)
	}
	if peak := metricSum(m, "hivedr_applier_dr_connections_peak"); peak > float64(pt.cfg.Applier.DRConnections) || sampled > float64(pt.cfg.Applier.DRConnections) {
		t.Errorf("the applier held %v DR metastore connections at once (sampled %v), want at most applier.dr_connections = %d", peak, sampled, pt.cfg.Applier.DRConnections)
	}

	probesMu.Lock()
	var slow []string
	var worst time.Duration
	for _, p := range probes {
		worst = max(worst, p.took)
		if p.err != nil || p.took > probeBound {
			slow = append(slow, fmt.Sprintf("%s: %s (%v)", p.at.Format(time.TimeOnly), p.took.Round(time.Millisecond), p.err))
		}
	}
	n := len(probes)
	probesMu.Unlock()
	t.Logf("DR metastore probes: %d, slowest %s", n, worst.Round(time.Millisecond))
	if n < int(allTook/time.Second)/2 {
		t.Errorf("%d probes over %s: the probe did not run every second", n, allTook.Round(time.Second))
	}
	if len(slow) > 0 {
		t.Errorf("%d of %d probes of the DR metastore failed or took over %s: %s", len(slow), n, probeBound, strings.Join(slow[:min(10, len(slow))], "; "))
	}

	// SIGTERM: the applier stops within stopBound.
	stopAt := time.Now()
	pt.apply.cmd.Process.Signal(syscall.SIGTERM)
	if code := pt.apply.wait(t, stopBound); code != 0 {
		t.Errorf("the applier exited %d on SIGTERM", code)
	}
	t.Logf("the applier stopped %s after SIGTERM", time.Since(stopAt).Round(time.Millisecond))
}

// seriesSplit lists a metric's series by one label, as label=value: for
// a histogram, its count and the sum of its observations.
func seriesSplit(m map[string]float64, name, label string) string {
	count, sum := map[string]float64{}, map[string]float64{}
	key := func(series string) string {
		_, l, _ := strings.Cut(series, label+`="`)
		v, _, _ := strings.Cut(l, `"`)
		return v
	}
	for series, v := range m {
		switch {
		case strings.HasPrefix(series, name+"_count{"):
			count[key(series)] += v
		case strings.HasPrefix(series, name+"_sum{"):
			sum[key(series)] += v
		case strings.HasPrefix(series, name+"{"):
			count[key(series)] += v
		}
	}
	var parts []string
	for k, n := range count {
		if s, ok := sum[k]; ok {
			parts = append(parts, fmt.Sprintf("%s=%.0f/%.1fs", k, n, s))
		} else {
			parts = append(parts, fmt.Sprintf("%s=%.0f", k, n))
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

// dropScale drops the databases on the source and on DR, one at a time
// on one connection to each: drop_database CASCADE calls run in parallel
// deadlocked a metastore whose database pool is 8 (each holds a pooled
// connection in its transaction and waits for another one).
func dropScale(t *testing.T, env *testenv.Env, dbs []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, site := range []testenv.Site{testenv.Source, testenv.DR} {
		c := env.HMS(t, site)
		for _, db := range dbs {
			if err := c.DropDatabase(ctx, db, true, true); err != nil && !hms.Answered(err) {
				t.Logf("drop %s database %s: %v", site, db, err)
				return
			}
		}
	}
}

// deleteTopics deletes the pipeline's topics (a memory benchmark leaves
// gigabytes in them; TestScale500Databases, hundreds of topics).
func deleteTopics(t *testing.T, p *pipeline) {
	adm := p.env.KafkaAdmin(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	td, err := adm.ListTopics(ctx)
	if err != nil {
		t.Logf("list topics: %v", err)
		return
	}
	var mine []string
	for _, name := range td.Names() {
		if strings.HasPrefix(name, p.prefix+".") {
			mine = append(mine, name)
		}
	}
	if _, err := adm.DeleteTopics(ctx, mine...); err != nil {
		t.Logf("delete topics %v: %v", mine, err)
	}
}
