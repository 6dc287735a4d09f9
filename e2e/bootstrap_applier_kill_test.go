package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/internal/hmsevent"
	"github.com/hivedr/hivedr/internal/hmslog"
	"github.com/hivedr/hivedr/internal/testenv"
	"github.com/hivedr/hivedr/schemas"
)

// drLogEvents calls fn with each event of db in the DR metastore's own
// notification log after event after, in order.
func drLogEvents(t *testing.T, ctx context.Context, env *testenv.Env, after int64, db string, fn func(hmslog.RawEvent)) {
	t.Helper()
	log := hmslog.NewThriftSource(env.Get(t, "HIVEDR_HMS_DR"), env.HMSOptions(t))
	defer log.Close()
	for {
		evs, err := log.Next(ctx, after, 500)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			return
		}
		for _, raw := range evs {
			after = raw.EventID
			if strings.EqualFold(raw.Database, db) {
				fn(raw)
			}
		}
	}
}

// drPartitionWrites counts, in the DR metastore's own notification log
// after event after, the partitions of db the applier added and altered
// (each add_partitions or alter_partitions call is one event listing its
// partitions), by table.
func drPartitionWrites(t *testing.T, ctx context.Context, env *testenv.Env, after int64, db string) (added, altered map[string]int) {
	t.Helper()
	added, altered = map[string]int{}, map[string]int{}
	drLogEvents(t, ctx, env, after, db, func(raw hmslog.RawEvent) {
		ev := hmsevent.Decode(raw)
		c, ok := ev.Payload.(*schemas.PartitionChange)
		if !ok {
			return
		}
		switch ev.EventType.Canonical() {
		case schemas.EventAddPartition:
			added[strings.ToLower(raw.Table)] += len(c.After)
		case schemas.EventAlterPartition, schemas.EventAlterPartitions:
			altered[strings.ToLower(raw.Table)] += len(c.After)
		}
	})
	return added, altered
}

// TestBootstrapApplierKill9: the applier is killed (SIGKILL) once the DR
// database shows the bootstrap's partitions partly applied. While it is
// down `hivedr status` shows the database bootstrapping with the rate
// since the bootstrap started and an ETA; restarted, the applier
// completes the bootstrap without writing any partition twice: the DR
// metastore's own log holds one add per partition of the snapshot and no
// alter of them, the records applied before the kill but not committed
// being planned again as no-ops. DR then equals the source.
func TestBootstrapApplierKill9(t *testing.T) {
	u := uniq(t)
	db := "bak_sales_" + u
	env := testenv.Require(t)
	pt := &pipelineTest{ctx: ctxFor(t, 12*time.Minute), src: env.HMS(t, testenv.Source), dr: env.HMS(t, testenv.DR)}
	pt.srcFS, pt.drFS = pipelineFS(t, env)
	pt.w = wl.NewSource(pt.src, pt.srcFS, env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL"))
	const orders = 150
	bootstrapSource(t, env, pt, db, orders)
	partitions := orders + (orders+2)/3 // orders's and events's (one in three)
	pt.pipeline = newPipeline(t, env, []string{db}, currentEventID(t, pt.ctx, pt.src))
	pt.withBatch(t, 10)
	drStart := currentEventID(t, pt.ctx, pt.dr)
	pt.startAll()
	rng := testRand(t)
	requestBootstrap(t, pt.pipeline, schemas.BootstrapRequest{RequestID: "r-" + u, Databases: []string{db}})

	threshold := int64(20 + rng.IntN(60))
	var prog drparam.Progress
	poll(t, 5*time.Minute, 5*time.Millisecond, fmt.Sprintf("%d partitions of the bootstrap applied on DR", threshold), func() bool {
		pt.checkAlive()
		d := drDatabase(t, pt, db)
		if d == nil {
			return false
		}
		if d.Parameters[drparam.BootstrapDone] != "" {
			t.Fatalf("the bootstrap was done before the kill (%v): the kill tests nothing", d.Parameters[drparam.BootstrapDone])
		}
		prog, _ = drparam.ParseProgress(d.Parameters[drparam.BootstrapApplied])
		return prog.Partitions >= threshold
	})
	pt.apply.kill9()
	t.Logf("applier killed with %+v applied on DR", prog)

	// Down: status shows where it stands, the rate since it started and
	// an ETA at that rate.
	row, _ := dbStatus(t, pt.conf, db)
	if row.State != "bootstrapping" || row.Bootstrap == nil {
		t.Fatalf("status of %s while its applier is down: %+v", db, row)
	}
	var parts *statusRate
	for i, r := range row.Bootstrap.Rates {
		if r.Name == "partitions" {
			parts = &row.Bootstrap.Rates[i]
		}
	}
	if parts == nil || parts.Done < threshold || parts.PerSecond <= 0 || parts.ETASeconds == nil || *parts.ETASeconds <= 0 {
		t.Errorf("status's partition rate while bootstrapping: %+v; want done >= %d, a rate and an ETA", parts, threshold)
	} else {
		t.Logf("status while the applier is down: partitions %d/%d, %.1f/s since the start, eta %.0f s", parts.Done, parts.Total, parts.PerSecond, *parts.ETASeconds)
	}
	text, _ := runStatus(t, "-config", pt.conf, "-db", db, "-timeout", "30s")
	if !strings.Contains(text, "since it started: ") || !strings.Contains(text, "/s eta ") {
		t.Errorf("status text lacks the rates and ETA:\n%s", text)
	}

	pt.startApply()
	eventually(t, 5*time.Minute, db+"'s bootstrap done on DR", func() bool {
		pt.checkAlive()
		return bootstrapDone(pt.ctx, pt.dr, db) != ""
	})
	pt.converge(pt.ctx, pt.src, pt.dr, pt.srcFS, pt.drFS, 3*time.Minute)

	added, altered := drPartitionWrites(t, pt.ctx, env, drStart, db)
	sum := 0
	for _, n := range added {
		sum += n
	}
	t.Logf("DR log: partitions added %v (%d), altered %v", added, sum, altered)
	if sum != partitions {
		t.Errorf("the DR log adds %d partitions, want each of the snapshot's %d once", sum, partitions)
	}
	if len(altered) > 0 {
		t.Errorf("partitions written again after the restart (altered on DR): %v", altered)
	}
	var m map[string]float64
	eventually(t, time.Minute, "the applier's metrics", func() bool { var ok bool; m, ok = scrape("http://" + pt.metrics + "/metrics"); return ok })
	again := m[`hivedr_applier_events_total{db="`+db+`",result="already_applied",type="HIVEDR_SNAPSHOT_PARTITION"}`]
	t.Logf("the restarted applier found %v partition records applied already (read again from its committed offset, written no more)", again)
}

// statusRate is a rate of statusDB's bootstrap.
type statusRate struct {
	Name       string   `json:"name"`
	Done       int64    `json:"done"`
	Total      int64    `json:"total"`
	PerSecond  float64  `json:"per_second"`
	ETASeconds *float64 `json:"eta_seconds"`
}
