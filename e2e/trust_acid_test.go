package e2e

import (
	"testing"
	"time"

	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/internal/testenv"
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

	eventually(t, 5*time.Minute, "both bootstraps done on DR", func() bool {
		r.checkAlive()
		return bootstrapDone(r.ctx, r.dr, r.db1) != "" && bootstrapDone(r.ctx, r.dr, r.db2) != ""
	})
	r.converge(5 * time.Minute)
	if got := r.drOpenReplTxns(); len(got) != 0 {
		t.Errorf("DR has open transactions of the applier %v after every source transaction ended", got)
	}
	verifyClean(t, r.conf, r.db1, r.db2)
}
