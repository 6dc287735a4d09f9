package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/internal/testenv"
	"github.com/hivedr/hivedr/schemas"
)

// newAcidSource is an acidRig's databases and tables on the source, with
// no pipeline yet (the daemons start after the history a bootstrap
// brings; pipeline is a placeholder for the rig's helpers until then).
func newAcidSource(t *testing.T, env *testenv.Env, prefix string) *acidRig {
	u := uniq(t)
	pt := &pipelineTest{ctx: ctxFor(t, 15*time.Minute), src: env.HMS(t, testenv.Source), dr: env.HMS(t, testenv.DR)}
	pt.srcFS, pt.drFS = pipelineFS(t, env)
	pt.w = wl.NewSource(pt.src, pt.srcFS, env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL"))
	pt.pipeline = &pipeline{t: t}
	r := &acidRig{pipelineTest: pt, db1: prefix + "_a_" + u, db2: prefix + "_b_" + u, wrote: map[int64][]string{}}
	r.setUp(t)
	return r
}

// bootstrapsDone waits until the bootstraps of both of the rig's
// databases are done on DR.
func (r *acidRig) bootstrapsDone(d time.Duration) {
	r.t.Helper()
	eventually(r.t, d, "both bootstraps done on DR", func() bool {
		r.checkAlive()
		return bootstrapDone(r.ctx, r.dr, r.db1) != "" && bootstrapDone(r.ctx, r.dr, r.db2) != ""
	})
}

// TestAcidBootstrap bootstraps two databases of transactional tables
// (full ACID and insert-only, partitioned and not) that already have a
// history (commits, aborts, a transaction writing both databases, one
// that only allocates in one, bases over deltas with the cleaner's
// removal of what they cover) with `hivedr bootstrap`, while a writer
// keeps committing and aborting, and a transaction that wrote a table of
// each database before the cut stays open: those two tables wait for it
// (the tailer says so) while the rest is published, the applier is killed
// (-9) with the bootstrap half applied and restarted, the transaction
// commits, and the tables are published with it. After the catch-up every
// table's get_valid_write_ids on DR equals the source's and the files a
// reader sees are the same, byte for byte; the allocations the snapshot
// covered were not replayed; no DR transaction of the applier is open.
func TestAcidBootstrap(t *testing.T) {
	env := testenv.Require(t)
	r := newAcidSource(t, env, "acidboot")

	// The history the bootstrap brings.
	r.round()
	r.round()
	r.compact(0, -1, true) // orders: a major compaction by the compactor's protocol (base_N_vT)
	r.overwrite(2, 0)      // ledger dt=2024-01-01: an INSERT OVERWRITE's base
	r.compact(1, 1, false) // events dt=2024-01-02: a minor compaction (delta_A_B_vT)
	r.txn(false, acidWrite{0, -1, false}, acidWrite{3, -1, false})
	open, err := r.w.OpenTxn(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	openWrites := []acidWrite{{0, -1, false}, {2, 1, false}} // orders (db1), ledger dt=2024-01-02 (db2)
	r.write(open, openWrites...)
	t.Logf("source transaction %d open across the cut, writing %s and %s", open.ID, r.tables[0].full(), r.tables[2].full())

	// Replication starts now: the tables are not on DR.
	r.pipeline = newPipeline(t, env, []string{r.db1, r.db2}, currentEventID(t, r.ctx, r.src))
	r.startAll()
	req := r.requestBootstrap([]string{r.db1, r.db2}, nil)
	t.Logf("bootstrap requested: %s", req)

	waiting := func() bool {
		log := grepLines(r.tail.out.String(), "it waits for them to end")
		return strings.Contains(log, "table="+r.tables[0].name) && strings.Contains(log, "table="+r.tables[2].name)
	}
	rounds := 0
	eventually(t, 5*time.Minute, "the tailer to wait for the open transaction's two tables", func() bool {
		r.checkAlive()
		// The writer: commits and an abort, orders among them (it waits
		// anyway: their allocations are in its snapshot).
		r.txn(rounds%3 != 2, acidWrite{1, rounds % 2, false}, acidWrite{3, -1, false})
		r.txn(rounds%4 != 3, acidWrite{0, -1, false})
		rounds++
		return waiting()
	})
	t.Logf("the tailer waits for %s and %s (%d writer rounds):\n%s", r.tables[0].full(), r.tables[2].full(), rounds,
		grepLines(r.tail.out.String(), "it waits for them to end"))
	// One more write of orders, after the cut (the tailer has listed the
	// database) and before orders is read (it waits for the open
	// transaction): an allocation the snapshot certainly covers, whatever
	// the rounds above raced with.
	r.txn(true, acidWrite{0, -1, false})

	// The applier is killed with part of db1's bootstrap applied: its END
	// cannot be published while orders waits.
	var prog drparam.Progress
	poll(t, 5*time.Minute, 5*time.Millisecond, "a table of "+r.db1+"'s bootstrap applied on DR", func() bool {
		r.checkAlive()
		d := drDatabase(t, r.pipelineTest, r.db1)
		if d == nil || d.Parameters[drparam.BootstrapID] == "" {
			return false
		}
		if d.Parameters[drparam.BootstrapDone] != "" {
			t.Fatalf("%s's bootstrap was done while %s waited", r.db1, r.tables[0].full())
		}
		prog, _ = drparam.ParseProgress(d.Parameters[drparam.BootstrapApplied])
		return prog.Tables >= 1
	})
	r.apply.kill9()
	t.Logf("applier killed with %+v of %s's bootstrap applied", prog, r.db1)
	r.startApply()

	// The open transaction commits, after the listing of the other
	// tables; more writes follow.
	r.end(open, true, openWrites...)
	r.round()
	r.bootstrapsDone(5 * time.Minute)
	r.round()
	r.converge(5 * time.Minute)
	r.compactedOnDR() // the compactor's directories the bootstrap copied, under their DR names
	if got := r.drOpenReplTxns(); len(got) != 0 {
		t.Errorf("DR has open transactions of the applier %v after every source transaction ended", got)
	}
	verifyClean(t, r.conf, r.db1, r.db2)

	// Each table's record carries its write ids, none left open; those of
	// the waiting tables hold the open transaction's write.
	s := serde(t, r.env)
	held := map[string]int64{}
	for _, w := range openWrites {
		tb := r.tables[w.table]
		if held[tb.full()], err = open.WriteID(r.ctx, tb.db, tb.name); err != nil {
			t.Fatal(err)
		}
	}
	for _, db := range []string{r.db1, r.db2} {
		for _, ev := range events(readTopic(t, r.env, s, kafka.Topics{Prefix: r.prefix}.Events(db))) {
			if ev.EventType != schemas.EventSnapshotTable {
				continue
			}
			w := ev.Snapshot.WriteIDs
			full := db + "." + ev.Table
			if w == nil || len(w.Open) > 0 {
				t.Errorf("%s's record carries write ids %+v; want its state, none open", full, w)
				continue
			}
			if id, ok := held[full]; ok && (w.HighWaterMark < id || slices.Contains(w.Aborted, id)) {
				t.Errorf("%s's record: %+v; want the open transaction's write id %d valid in it", full, w, id)
			}
			t.Logf("%s published with high-water mark %d, aborted %v, %d files", full, w.HighWaterMark, w.Aborted, len(ev.Files))
		}
	}
	// The allocations the snapshot covers (the writer's after the cut,
	// the one after the wait among them) were not replayed: no-ops by the
	// table's stamp or below DR's next write id; later ones (the rounds
	// after the bootstrap) were.
	var m map[string]float64
	eventually(t, time.Minute, "the applier's metrics", func() bool { var ok bool; m, ok = scrape("http://" + r.metrics + "/metrics"); return ok })
	results := map[string]float64{}
	for _, res := range []string{"applied", "already_applied", "below_next_write_id"} {
		results[res] = m[fmt.Sprintf(`hivedr_applier_events_total{db="%s",result="%s",type="ALLOC_WRITE_ID_EVENT"}`, r.db1, res)]
	}
	if results["already_applied"]+results["below_next_write_id"] < 1 || results["applied"] < 1 {
		t.Errorf("allocations of %s after the restart: %v; want those the snapshot covers left out, the later ones applied", r.db1, results)
	}
	t.Logf("allocations of %s after the restart: %v", r.db1, results)
}

// TestAcidBootstrapOpenAtCut: with tailer.bootstrap_open_txn_wait 0 a
// table whose transaction is open at the listing is published with that
// write ID marked open, and DR aborts it; when the transaction commits,
// the applier halts the database needs_bootstrap, naming the table, the
// write ID and the command. Bootstrapping the database again (its DR
// table holds another write-ID state now) makes the table anew with the
// source's state: DR converges.
func TestAcidBootstrapOpenAtCut(t *testing.T) {
	env := testenv.Require(t)
	r := newAcidSource(t, env, "acidcut")
	r.round()
	open, err := r.w.OpenTxn(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	openWrites := []acidWrite{{0, -1, false}}
	r.write(open, openWrites...)
	orders := r.tables[0]
	id, err := open.WriteID(r.ctx, orders.db, orders.name)
	if err != nil {
		t.Fatal(err)
	}
	r.pipeline = newPipeline(t, env, []string{r.db1, r.db2}, currentEventID(t, r.ctx, r.src))
	r.withTailer("bootstrap_open_txn_wait: 0s")
	r.startAll()
	r.requestBootstrap([]string{r.db1, r.db2}, nil)
	r.bootstrapsDone(5 * time.Minute)
	w, err := wl.ValidWriteIDs(r.ctx, r.dr, []string{orders.full()})
	if err != nil {
		t.Fatal(err)
	}
	if st := w[orders.full()]; !slices.Contains(st.Aborted, id) {
		t.Fatalf("%s on DR after the bootstrap: %s; want write id %d, open at the listing, aborted", orders.full(), st, id)
	}
	if !strings.Contains(r.tail.out.String(), "publishing a transactional table with write IDs still open") {
		t.Errorf("the tailer did not say it published %s with write id %d open", orders.full(), id)
	}
	r.notOnDR(open.Files())

	// The transaction commits: DR cannot make that write visible.
	r.end(open, true, openWrites...)
	var halt string
	eventually(t, 2*time.Minute, "the applier halts "+r.db1+" needs_bootstrap", func() bool {
		halt = grepLines(r.apply.out.String(), "reason=needs_bootstrap")
		return strings.Contains(halt, "db="+r.db1)
	})
	for _, want := range []string{fmt.Sprintf("write id %d of %s", id, orders.full()), "hivedr bootstrap -db " + r.db1} {
		if !strings.Contains(halt, want) {
			t.Errorf("the halt does not name %q:\n%s", want, halt)
		}
	}
	t.Logf("halted: %s", halt)

	// The repair the halt names.
	r.requestBootstrap([]string{r.db1}, nil)
	first := bootstrapDone(r.ctx, r.dr, r.db1)
	eventually(t, 5*time.Minute, r.db1+"'s second bootstrap done on DR", func() bool {
		r.checkAlive()
		d := bootstrapDone(r.ctx, r.dr, r.db1)
		return d != "" && d != first
	})
	r.round()
	r.converge(5 * time.Minute)
	if got := r.drOpenReplTxns(); len(got) != 0 {
		t.Errorf("DR has open transactions of the applier %v after every source transaction ended", got)
	}
	verifyClean(t, r.conf, r.db1, r.db2)
}
