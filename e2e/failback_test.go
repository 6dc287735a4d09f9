package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/failover"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/internal/testenv"
	"github.com/hivedr/hivedr/schemas"
)

// reversePipeline is fwd with the roles swapped: the DR metastore and
// HDFS as the source, the old primary's as DR, on topics, groups and a
// source name of its own, its tailer starting after start.
func reversePipeline(t *testing.T, fwd *pipeline, start int64) *pipeline {
	t.Helper()
	env := fwd.env
	r := &pipeline{t: t, env: env, prefix: "r" + uniq(t), dbs: fwd.dbs, start: start, state: t.TempDir(),
		metrics: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
	y := readFile(t, fwd.conf)
	swap := func(a, b string) { y = strings.NewReplacer(a, b, b, a).Replace(y) }
	swap(env.Get(t, "HIVEDR_HMS_SRC"), env.Get(t, "HIVEDR_HMS_DR"))
	swap("hdfs://"+env.Get(t, "HIVEDR_HDFS_SRC_NAMENODE"), "hdfs://"+env.Get(t, "HIVEDR_HDFS_DR_NAMENODE"))
	y = strings.ReplaceAll(y, fwd.prefix, r.prefix)
	y = strings.Replace(y, fmt.Sprintf("start_event_id: \"%d\"", fwd.start), fmt.Sprintf("start_event_id: \"%d\"", start), 1)
	y = strings.Replace(y, fwd.metrics, r.metrics, 1)
	r.conf = writeFile(t, "reverse.yaml", y)
	cfg, err := config.Load(r.conf)
	if err != nil {
		t.Fatal(err)
	}
	r.cfg = cfg
	return r
}

// reverseOf is reversePipeline for some of fwd's databases only: the
// others stay out of its scope (their DR events would halt its applier
// not_a_replica, their old primaries not being its replicas).
func reverseOf(t *testing.T, fwd *pipeline, start int64, dbs ...string) *pipeline {
	t.Helper()
	r := reversePipeline(t, fwd, start)
	y := readFile(t, r.conf)
	for _, db := range fwd.dbs {
		if !slices.Contains(dbs, db) {
			line := fmt.Sprintf("    - {name: %s, exclude_tables: [\"tmp_.*\"]}\n", db)
			if !strings.Contains(y, line) {
				t.Fatalf("no %q in the reverse configuration", line)
			}
			y = strings.Replace(y, line, "", 1)
		}
	}
	r.conf = writeFile(t, "reverse-some.yaml", y)
	cfg, err := config.Load(r.conf)
	if err != nil {
		t.Fatal(err)
	}
	r.cfg, r.dbs = cfg, dbs
	return r
}

// TestFailback: after a planned failover of two databases, DR (the new
// primary) changes one table and creates another, and the old primary
// changes a third (a write that DR never got). Failback through the
// reverse pipeline moves exactly those three tables (re-bootstrapped,
// counted in the report and as snapshot records on the reverse topics);
// the untouched tables resume incrementally; the old primary converges
// on the new one. Verify is clean at each end (after the failover, and of
// the reverse pipeline once it converged); a second failback is refused.
func TestFailback(t *testing.T) {
	u := uniq(t)
	db1, db2 := "fb_sales_"+u, "fb_crm_"+u
	p := startPipeline(t, 10*time.Minute, db1, db2)
	p.runSteps(failoverSteps(db1, db2), nil)
	rep, errOut, code := runFailover(t, p.conf, "-db", db1+","+db2, "-timeout", "3m")
	if code != 0 {
		t.Fatalf("failover exited %d:\n%s", code, errOut)
	}
	drHead := rep.Databases[0].DRLogHead
	verifyClean(t, p.conf, db1, db2)
	// The forward pipeline is retired for these databases.
	p.tail.stop(t)
	p.apply.stop(t)
	p.copyd.stop(t)

	env := testenv.Require(t)
	drw := wl.NewSource(p.dr, p.drFS, env.Get(t, "HIVEDR_HMS_DR_EXTERNAL"))
	if err := drw.CreateTable(p.ctx, db1, "written_on_dr", wl.TableSpec{Columns: []string{"id bigint"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := drw.Insert(p.ctx, db1, "written_on_dr", nil, 6); err != nil {
		t.Fatal(err)
	}
	if _, err := drw.AddPartitions(p.ctx, db1, "orders", [][]string{{"2026-12-09"}}, 5); err != nil {
		t.Fatal(err)
	}
	if _, err := p.w.Insert(p.ctx, db2, "accounts", nil, 4); err != nil {
		t.Fatal(err)
	}
	after := rep.Databases[0].Reached
	srcEvents := sourceEventsAfter(t, p.ctx, p.src, after, db2)

	rev := reversePipeline(t, p.pipeline, drHead)
	out, errOut, code := runTool(t, 2*time.Minute, "failback", "-config", p.conf, "-reverse-config", rev.conf, "-db", db1+","+db2, "-json")
	if code != 0 {
		t.Fatalf("failback exited %d:\n%s", code, errOut)
	}
	var back failover.BackReport
	if err := json.Unmarshal([]byte(out), &back); err != nil {
		t.Fatalf("failback -json: %v\n%s", err, out)
	}
	want := map[string][]string{db1: {"orders", "written_on_dr"}, db2: {"accounts"}}
	for _, d := range back.Databases {
		if !slices.Equal(d.Moved, want[d.Database]) || d.Unchanged != 1 {
			t.Errorf("%s: moved %v, %d unchanged; want %v and 1", d.Database, d.Moved, d.Unchanged, want[d.Database])
		}
		if d.Database == db2 && d.SourceEvents != srcEvents {
			t.Errorf("%s: %d old-primary events after the failover's event, counted independently %d", db2, d.SourceEvents, srcEvents)
		}
	}
	if back.MovedTables != 3 {
		t.Errorf("moved %d tables, want 3", back.MovedTables)
	}
	// A failback runs once.
	if _, errOut, code := runTool(t, time.Minute, "failback", "-config", p.conf, "-reverse-config", rev.conf, "-db", db1); code != 1 ||
		!strings.Contains(errOut, "a failback runs once") {
		t.Errorf("a second failback exited %d:\n%s", code, errOut)
	}

	// The reverse pipeline carries it out.
	rev.startAll()
	var last string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last differences: %s\nreverse applier:\n%s", last, tail(rev.apply.out.String(), 40))
		}
	})
	poll(t, 4*time.Minute, time.Second, "the old primary converging on the new one", func() bool {
		rev.checkAlive()
		diffs, err := wl.Compare(p.ctx, p.dr, p.src, p.drFS, p.srcFS, rev.dbs, rev.mapLocation)
		last = fmt.Sprint(err, diffs)
		return err == nil && len(diffs) == 0
	})
	verifyClean(t, rev.conf, db1, db2)
	// Counted independently: the tables the reverse topics bootstrapped.
	s := serde(t, env)
	var snap []string
	for _, db := range rev.dbs {
		for _, e := range events(readTopic(t, env, s, kafka.Topics{Prefix: rev.prefix}.Events(db))) {
			if e.EventType == schemas.EventSnapshotTable {
				snap = append(snap, db+"."+strings.ToLower(e.Table))
			}
		}
	}
	slices.Sort(snap)
	if wantSnap := []string{db2 + ".accounts", db1 + ".orders", db1 + ".written_on_dr"}; !slices.Equal(snap, sorted(wantSnap)) {
		t.Errorf("the reverse topics bootstrapped %v, want %v", snap, sorted(wantSnap))
	}
	t.Logf("failback moved %d tables in %.1fs (the request); the old primary converged", back.MovedTables, back.Seconds)
}

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }
