package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/internal/testenv"
)

// TestApplierBatchesBurst: a burst of ADD_PARTITION events on one table,
// one partition per add_partitions call on the source metastore (each
// its own event; every 50th partition with a data file), published by
// the real tailer while the applier is stopped. The applier then applies
// them in runs (applier.batch_partitions 100: one add_partitions and one
// watermark write per run), is killed with SIGKILL once it has applied a
// quarter of them (hivedr_applier_batch_events), restarts from its
// committed offsets (the killed run's partitions already on DR, past the
// DR database's watermark), and DR ends equal to the source with far
// fewer plans than events and no halt.
func TestApplierBatchesBurst(t *testing.T) {
	const (
		parts   = 1000
		callers = 4
		batch   = 100
	)
	env := testenv.Require(t)
	db := "burst_" + uniq(t)
	pt := &pipelineTest{ctx: ctxFor(t, 25*time.Minute), src: env.HMS(t, testenv.Source), dr: env.HMS(t, testenv.DR)}
	pt.srcFS, pt.drFS = pipelineFS(t, env)
	pt.pipeline = newPipeline(t, env, []string{db}, currentEventID(t, pt.ctx, pt.src))
	pt.withBatch(t, batch)
	pt.startTail()
	pt.startCopyd()
	root := env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL")
	w := wl.NewSource(pt.src, pt.srcFS, root)
	if err := w.CreateDatabase(pt.ctx, db); err != nil {
		t.Fatal(err)
	}
	if err := w.CreateTable(pt.ctx, db, "events", wl.TableSpec{Columns: []string{"id bigint", "v string"}, PartitionKeys: []string{"ds"}}); err != nil {
		t.Fatal(err)
	}

	// The burst: callers clients, each adding its share one partition a call.
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, err := hms.Dial(pt.ctx, env.Get(t, "HIVEDR_HMS_SRC"), hms.Options{})
			if err != nil {
				errs <- err
				return
			}
			defer cl.Close()
			src := wl.NewSource(cl, pt.srcFS, root)
			for i := c; i < parts; i += callers {
				rows := 0
				if i%50 == 0 {
					rows = 3
				}
				if _, err := src.AddPartitions(pt.ctx, db, "events", [][]string{{fmt.Sprintf("%05d", i)}}, rows); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	head := currentEventID(t, pt.ctx, pt.src)
	t.Logf("%d ADD_PARTITION events on the source in %s (up to event %d)", parts, time.Since(start).Round(time.Millisecond), head)
	s := serde(t, env)
	topics := kafka.Topics{Prefix: pt.prefix}
	eventually(t, 5*time.Minute, fmt.Sprintf("the tailer's checkpoint at event %d", head), func() bool {
		pt.checkAlive()
		return lastCheckpoint(t, env, s, topics.Checkpoints(), pt.prefix) >= head
	})

	// The applier, killed with SIGKILL a quarter of the way through.
	metrics := "http://" + pt.metrics + "/metrics"
	batchEvents := func(m map[string]float64) (plans, events float64) {
		return metricSum(m, "hivedr_applier_batch_events_count"), metricSum(m, "hivedr_applier_batch_events_sum")
	}
	pt.startApply()
	var plans1, events1 float64
	poll(t, 10*time.Minute, 5*time.Millisecond, "a quarter of the burst applied", func() bool {
		pt.checkAlive()
		m, ok := scrape(metrics)
		if ok {
			plans1, events1 = batchEvents(m)
		}
		return events1 >= parts/4
	})
	pt.apply.kill9()
	t.Logf("killed the applier after %.0f events in %.0f plans", events1, plans1)
	if plans1 == 0 || events1/plans1 < 10 {
		t.Errorf("the first applier made %.0f plans of %.0f events: the burst was not applied in runs", plans1, events1)
	}
	if pt.caughtUp(pt.ctx) {
		t.Fatal("the applier group had committed the whole burst at the kill: the kill was not mid-burst")
	}

	pt.startApply()
	pt.converge(pt.ctx, pt.src, pt.dr, pt.srcFS, pt.drFS, 10*time.Minute)
	eventually(t, 2*time.Minute, "the applier group at the topic's end", func() bool { return pt.caughtUp(pt.ctx) })
	m, ok := scrape(metrics)
	if !ok {
		t.Fatal("the restarted applier's metrics do not answer")
	}
	plans2, events2 := batchEvents(m)
	t.Logf("the restarted applier: %.0f events in %.0f plans", events2, plans2)
	if plans2 == 0 || events2/plans2 < 10 {
		t.Errorf("the restarted applier made %.0f plans of %.0f events", plans2, events2)
	}
	if n := metricSum(m, "hivedr_applier_events_total") - events2; n != 0 {
		t.Errorf("hivedr_applier_events_total and hivedr_applier_batch_events disagree by %.0f events", n)
	}
	already := 0.0
	for series, v := range m {
		if strings.HasPrefix(series, "hivedr_applier_events_total{") && strings.Contains(series, `result="already_applied"`) {
			already += v
		}
	}
	t.Logf("of them already applied (the killed run's, past the DR watermark): %.0f", already)
	if v := metricSum(m, "hivedr_applier_halted"); v != 0 {
		t.Errorf("hivedr_applier_halted %v", v)
	}
	d, err := pt.dr.GetDatabase(pt.ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if d.Parameters[drparam.Halted] != "" || d.Parameters[drparam.LastID] != fmt.Sprint(head) {
		t.Errorf("DR database %s: %s=%q %s=%q, want at event %d, not halted", db, drparam.LastID, d.Parameters[drparam.LastID],
			drparam.Halted, d.Parameters[drparam.Halted], head)
	}
	names, err := pt.dr.GetPartitionNames(context.Background(), db, "events", -1)
	if err != nil || len(names) != parts {
		t.Errorf("%d partitions of %s.events on DR (%v), want %d", len(names), db, err, parts)
	}
}
