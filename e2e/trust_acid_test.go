package e2e

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/internal/testenv"
	"github.com/hivedr/hivedr/producer"
	"github.com/hivedr/hivedr/schemas"
)

// TestTrustCatchupOpenTxn: transactions that allocate a write ID in a
// database while its bootstrap's snapshot is being published, after the
// table's record, and end later without writing there (one commits
// having written another database only, one aborts) are ended on DR too,
// though the catch-up publishes their allocation and their end in
// different batches (tailer.batch_size 1). A transaction open at the
// cut keeps the snapshot going (its table waits for it) while they run.
// At the end DR's valid write IDs of every table equal the source's, no
// DR transaction of the applier is left open, and verify finds nothing.
func TestTrustCatchupOpenTxn(t *testing.T) {
	env := testenv.Require(t)
	r := newAcidSource(t, env, "trustcu")
	r.round()
	open, err := r.w.OpenTxn(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	openWrites := []acidWrite{{0, -1, false}} // orders (db1) waits for it
	r.write(open, openWrites...)

	r.pipeline = newPipeline(t, env, []string{r.db1, r.db2}, currentEventID(t, r.ctx, r.src))
	r.editConfig("batch_size: 200", "batch_size: 1")
	r.startAll()
	r.requestBootstrap([]string{r.db1, r.db2}, nil)

	// events (db1) is on DR, stamped before what follows; orders waits.
	events := r.tables[1]
	poll(t, 5*time.Minute, 100*time.Millisecond, events.full()+"'s record applied on DR while "+r.tables[0].full()+" waits", func() bool {
		r.checkAlive()
		d := drDatabase(t, r.pipelineTest, r.db1)
		if d == nil {
			return false
		}
		prog, _ := drparam.ParseProgress(d.Parameters[drparam.BootstrapApplied])
		return prog.Tables >= 1
	})
	if bootstrapDone(r.ctx, r.dr, r.db1) != "" {
		t.Fatalf("%s's bootstrap was done while %s waited", r.db1, r.tables[0].full())
	}
	// After the cut: a commit that allocated in db1 (events) and wrote db2
	// only, and an abort of a write to events.
	r.allocOnly(1, acidWrite{2, 1, false})
	aborted := r.txn(false, acidWrite{1, 0, false})
	t.Logf("after the cut, in %s's snapshot: transaction %d allocated in %s and wrote %s only; transaction %d wrote %s and aborted",
		r.db1, r.allocOnlys[len(r.allocOnlys)-1], events.full(), r.tables[2].full(), aborted.ID, events.full())
	if bootstrapDone(r.ctx, r.dr, r.db1) != "" {
		t.Fatalf("%s's bootstrap was done before the open transaction ended", r.db1)
	}
	r.end(open, true, openWrites...)

	r.bootstrapsDone(5 * time.Minute)
	r.converge(5 * time.Minute)
	if got := r.drOpenReplTxns(); len(got) != 0 {
		t.Errorf("DR has open transactions of the applier %v after every source transaction ended", got)
	}
	verifyClean(t, r.conf, r.db1, r.db2)
}

// TestTrustCompactionDuringBootstrap: a major compaction of a partition
// of a transactional table commits (and the source's cleaner removes the
// deltas it merged) after the table's TABLE record is published and
// before that partition's page: the tailer is held (SIGSTOP) once its
// checkpoint shows the table in progress short of the partition. DR's
// partition ends with the compacted base, a reader of it sees what a
// source reader sees, and every table's write IDs equal the source's.
func TestTrustCompactionDuringBootstrap(t *testing.T) {
	env := testenv.Require(t)
	r := newAcidSource(t, env, "trustcp")
	ctx := r.ctx
	var days [][]string
	for i := range 120 {
		days = append(days, []string{fmt.Sprintf("2025-%04d", i)})
	}
	big := acidTable{db: r.db1, name: "big", partitions: days}
	if err := r.w.CreateACIDTable(ctx, big.db, big.name, wl.ACIDTableSpec{Columns: []string{"id bigint", "note string"}, PartitionKeys: []string{"dt"}}); err != nil {
		t.Fatal(err)
	}
	if err := r.w.AddACIDPartitions(ctx, big.db, big.name, days); err != nil {
		t.Fatal(err)
	}
	r.tables = append(r.tables, big)
	bi, last := len(r.tables)-1, len(days)-1
	// Every partition written by one transaction, the last by two more:
	// deltas for the compaction to merge.
	tx, err := r.w.OpenTxn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var all []acidWrite
	for p := range days {
		all = append(all, acidWrite{bi, p, false})
	}
	r.write(tx, all...)
	r.end(tx, true, all...)
	r.txn(true, acidWrite{bi, last, false})
	r.txn(true, acidWrite{bi, last, false})
	lastName := "dt=" + days[last][0]

	r.pipeline = newPipeline(t, env, []string{r.db1, r.db2}, currentEventID(t, ctx, r.src))
	r.withTailer("bootstrap_page: 2")
	// The tailer freezes itself (SIGSTOP) after the first page of big's
	// partitions: the compaction lands with the bootstrap in its middle
	// on any machine, however fast the snapshot goes.
	r.roleEnv = map[string][]string{"tail": {producer.FaultEnv + "=" + producer.FaultBootstrapPaged + ":" + big.name}}
	r.startAll()
	r.requestBootstrap([]string{r.db1, r.db2}, nil)

	s := serde(t, env)
	inProgress := func() *schemas.BootstrapState {
		b := bootstrapOf(newestCheckpoint(t, r.pipeline, s, r.cfg.Source.Name), r.db1)
		if b == nil || b.TableInProgress != big.name || b.DonePartition == "" || b.DonePartition >= lastName {
			return nil
		}
		return b
	}
	poll(t, 5*time.Minute, 20*time.Millisecond, "the tailer stopped at "+producer.FaultBootstrapPaged, func() bool {
		r.checkAlive()
		return processStopped(t, r.tail.cmd.Process.Pid)
	})
	held := true
	resume := func() {
		if held {
			held = false
			r.tail.cmd.Process.Signal(syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)
	b := inProgress()
	if b == nil {
		t.Fatalf("the tailer, stopped at %s, has no page of %s in progress before partition %s in its checkpoint", producer.FaultBootstrapPaged, big.full(), lastName)
	}
	t.Logf("tailer held with %s in progress after partition %s", big.full(), b.DonePartition)
	c := r.compact(bi, last, true)
	resume()

	eventually(t, 5*time.Minute, "both bootstraps done on DR", func() bool {
		r.checkAlive()
		return bootstrapDone(ctx, r.dr, r.db1) != "" && bootstrapDone(ctx, r.dr, r.db2) != ""
	})
	r.converge(5 * time.Minute)
	r.compactedOnDR()
	if got := r.drOpenReplTxns(); len(got) != 0 {
		t.Errorf("DR has open transactions of the applier %v after every source transaction ended", got)
	}
	t.Logf("compaction %d of %s %s (%s) on DR", c.ID, big.full(), lastName, c.Dir)
}

// TestTrustBootstrapAbortedMark bootstraps transactional tables whose
// newest write IDs are aborted, above a committed one: orders with write
// IDs 1 and 3 committed, 2 and 4 aborted; notes with 2 committed, 1, 3
// and 4 aborted. The DR metastore takes a table's lowest invalid write ID
// for its high-water mark when none of its write IDs is a committed DR
// transaction's, which is what setting a state the way REPL LOAD does
// leaves: DR readers saw write ID 1 of orders and nothing of notes until
// the table's next commit. After the bootstrap, with nothing committed
// since, each table's write-ID state on DR equals the source's and so do
// the files a reader sees; an abort replayed afterwards keeps it so.
func TestTrustBootstrapAbortedMark(t *testing.T) {
	env := testenv.Require(t)
	r := newAcidSource(t, env, "trustam")
	orders, notes := acidWrite{0, -1, false}, acidWrite{3, -1, false}
	r.txn(true, orders)
	r.txn(false, orders, notes)
	r.txn(true, orders, notes)
	r.txn(false, orders, notes)
	r.txn(false, notes)

	r.pipeline = newPipeline(t, env, []string{r.db1, r.db2}, currentEventID(t, r.ctx, r.src))
	r.startAll()
	t.Logf("bootstrap requested: %s", r.requestBootstrap([]string{r.db1, r.db2}, nil))
	r.bootstrapsDone(5 * time.Minute)
	r.converge(5 * time.Minute)
	if got := r.drOpenReplTxns(); len(got) != 0 {
		t.Errorf("DR has open transactions of the applier %v after the bootstrap", got)
	}

	r.txn(false, orders)
	r.converge(5 * time.Minute)
	verifyClean(t, r.conf, r.db1, r.db2)
}

// TestTrustRebootstrapRecreatedTable: a bootstrap whose cut comes before
// a transactional table is dropped and made again at the source (same
// shape) reads the new table, while DR still holds the old one. The new
// table's state (write ID 1 aborted, 2 committed) has the high-water
// mark of the old one's on DR (1 and 2 committed): DR must take the
// snapshot's state, not keep the old table's, whose write ID 1 a DR
// reader would count valid (soak seed 1796622539598896547). The tailer
// is stopped while the source changes and more events than one of its
// batches come before the drop, so it takes the bootstrap request with
// its cut before the drop.
func TestTrustRebootstrapRecreatedTable(t *testing.T) {
	env := testenv.Require(t)
	r := newAcidSource(t, env, "trustrr")
	notes := acidWrite{3, -1, false} // db2's insert-only, unpartitioned table
	r.pipeline = newPipeline(t, env, []string{r.db1, r.db2}, currentEventID(t, r.ctx, r.src))
	r.startAll()
	r.requestBootstrap([]string{r.db1, r.db2}, nil)
	r.bootstrapsDone(5 * time.Minute)
	r.txn(true, notes)
	r.txn(true, notes)
	r.converge(5 * time.Minute)
	first := bootstrapDone(r.ctx, r.dr, r.db2)

	r.tail.stop(t)
	batch := r.cfg.Tailer.BatchSize
	for i := 0; i < batch/2+10; i++ { // two events each, excluded from the scope
		if err := r.w.CreateTable(r.ctx, r.db1, "tmp_filler", wl.TableSpec{Columns: []string{"id int"}}); err != nil {
			t.Fatal(err)
		}
		if err := r.w.DropTable(r.ctx, r.db1, "tmp_filler", true); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.w.DropTable(r.ctx, r.db2, "notes", true); err != nil {
		t.Fatal(err)
	}
	spec := wl.ACIDTableSpec{Columns: []string{"id bigint", "amount double", "note string"}, InsertOnly: true}
	if err := r.w.CreateACIDTable(r.ctx, r.db2, "notes", spec); err != nil {
		t.Fatal(err)
	}
	r.txn(false, notes)
	r.txn(true, notes)
	r.requestBootstrap([]string{r.db2}, nil)
	r.startTail()
	eventually(t, 5*time.Minute, "the second bootstrap of "+r.db2+" done on DR", func() bool {
		r.checkAlive()
		done := bootstrapDone(r.ctx, r.dr, r.db2)
		return done != "" && done != first
	})
	r.converge(5 * time.Minute)
}

// TestTrustBootstrapAbortedThenCompacted: a full-ACID table whose only
// writes (1 and 2) were aborted is bootstrapped, then write 3 commits and
// a major compaction covers the three. DR's valid write IDs must stay the
// source's throughout: 1 and 2 aborted. The source's metastore reads a
// table without a committed row as "hwm=1 aborted=[1]"; published as it
// read, DR's NEXT_WRITE_ID stopped at 2, write 3's allocation jumped it
// (the metastore's replication flow then drops the table's rows) and DR
// read "hwm=3 aborted=[]": two aborted writes valid (failed so before
// acid.WriteIDs.WithAllocated; the soak saw it as tables tx506 and tx17,
// seed 1796635370422138067).
func TestTrustBootstrapAbortedThenCompacted(t *testing.T) {
	env := testenv.Require(t)
	r := newAcidSource(t, env, "trustbac")
	ledger := acidWrite{2, 0, false} // db2's full-ACID partitioned table, dt=2024-01-01
	r.txn(false, ledger)
	r.txn(false, ledger)
	r.pipeline = newPipeline(t, env, []string{r.db1, r.db2}, currentEventID(t, r.ctx, r.src))
	r.startAll()
	r.requestBootstrap([]string{r.db1, r.db2}, nil)
	r.bootstrapsDone(5 * time.Minute)
	r.converge(5 * time.Minute)
	r.txn(true, ledger)
	r.converge(5 * time.Minute)
	r.compact(2, 0, true)
	r.converge(5 * time.Minute)
}

// TestTrustBootstrapOpenAboveAborted: a full-ACID table none of whose
// writes committed (write 1 aborted) has write 2 open in a transaction
// when it is bootstrapped (tailer.bootstrap_open_txn_wait 0). The source
// metastore reads it "hwm=1 aborted=[1]", which hides whether 2 is open or
// aborted. Taken for aborted (as it was), DR aborted write 2 as if it had
// ended, and its later commit became a no-op there: its rows invisible on
// DR, valid on the source, and nothing said so. Now the tailer reads the
// table again with the open transactions taken for committed, which
// shows write 2 as an open transaction's (acid.ReadTableState): it is
// published open, DR aborts it, and the applier halts the database when
// it commits (needs_bootstrap, as for any write open at the cut); the
// bootstrap it names repairs the table. (Before, the first fix counted
// every hidden write ID aborted, and DR's own reading hid write 2 from
// the applier's check too.)
func TestTrustBootstrapOpenAboveAborted(t *testing.T) {
	env := testenv.Require(t)
	r := newAcidSource(t, env, "trustoaa")
	ledger := acidWrite{2, 0, false} // db2's full-ACID partitioned table, dt=2024-01-01
	r.txn(false, ledger)
	open, err := r.w.OpenTxn(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	r.write(open, ledger)
	tbl := r.tables[ledger.table]
	id, err := open.WriteID(r.ctx, tbl.db, tbl.name)
	if err != nil {
		t.Fatal(err)
	}
	src, err := wl.ValidWriteIDs(r.ctx, r.src, []string{tbl.full()})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s on the source with write id %d open: %s", tbl.full(), id, src[tbl.full()])
	r.pipeline = newPipeline(t, env, []string{r.db1, r.db2}, currentEventID(t, r.ctx, r.src))
	r.withTailer("bootstrap_open_txn_wait: 0s")
	r.startAll()
	r.requestBootstrap([]string{r.db1, r.db2}, nil)
	r.bootstrapsDone(5 * time.Minute)
	r.notOnDR(open.Files())

	r.end(open, true, ledger)
	var halt string
	eventually(t, 2*time.Minute, "the applier halts "+tbl.db+" needs_bootstrap", func() bool {
		r.checkAlive()
		halt = grepLines(r.apply.out.String(), "reason=needs_bootstrap")
		return strings.Contains(halt, "db="+tbl.db)
	})
	if want := fmt.Sprintf("write id %d of %s", id, tbl.full()); !strings.Contains(halt, want) {
		t.Errorf("the halt does not name %q:\n%s", want, halt)
	}
	first := bootstrapDone(r.ctx, r.dr, tbl.db)
	r.requestBootstrap([]string{tbl.db}, nil)
	eventually(t, 5*time.Minute, tbl.db+"'s second bootstrap done on DR", func() bool {
		r.checkAlive()
		d := bootstrapDone(r.ctx, r.dr, tbl.db)
		return d != "" && d != first
	})
	r.converge(5 * time.Minute)
}
