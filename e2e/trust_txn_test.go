package e2e

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/hivedr/hivedr/internal/failover"
)

// TestTrustTxnEventsInFailback (issue finding: transaction commits and
// aborts invisible to RPO counting and failback). Hive logs COMMIT_TXN
// with an empty database name. A transaction allocates a write ID in a
// table of db1 and writes it; DR applies that (its DR transaction open);
// then the tailer stops (the primary site fails) and the transaction
// commits on the source: the commit is lost. Before, the unplanned
// failover counted it nowhere ("RPO 0 events") and failback, finding no
// event of db1 after the failover's, left the table alone, so the old
// primary kept rows DR aborted. Now the failover counts it for db1, and
// failback counts it lost and moves the table back. The stack's listener
// writes commits of stock_* databases bare, as Hive's stock listener
// does: the count comes from the transaction's allocation.
func TestTrustTxnEventsInFailback(t *testing.T) {
	r := newAcidRigNamed(t, 12*time.Minute, "stock")
	r.caughtUpToHead(4 * time.Minute)
	tx, err := r.w.OpenTxn(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	r.write(tx, acidWrite{0, -1, false}) // db1.orders
	r.caughtUpToHead(3 * time.Minute)
	if open := r.drOpenReplTxns(); len(open) == 0 {
		t.Fatal("DR has no open transaction for the source's open one: the allocation was not applied")
	}
	r.tail.stop(t)
	published := tailerCheckpoint(t, r.pipeline)
	if err := tx.Commit(r.ctx); err != nil {
		t.Fatal(err)
	}
	// Independently: the source log after the checkpoint holds the commit,
	// with no database.
	if n := sourceEventsAfter(t, r.ctx, r.src, published, r.db1); n != 0 {
		t.Fatalf("%d events of %s after the tailer's checkpoint %d name it; the test wants only the commit, which names none", n, r.db1, published)
	}

	rep, errOut, code := runFailover(t, r.conf, "-db", r.db1, "-unplanned", "-timeout", "1m")
	if code != 0 {
		t.Fatalf("unplanned failover exited %d:\n%s", code, errOut)
	}
	d := rep.Databases[0]
	t.Logf("unplanned failover: %s reflects event %d (tailer checkpoint %d), %d events lost, RPO %.1fs; notes %v", r.db1, d.Reached, published, d.LostEvents, d.RPOSeconds, rep.Notes)
	if d.LostEvents != 1 || d.RPOSeconds <= 0 {
		t.Errorf("the failover counts %d events lost (RPO %.1fs); want 1: the commit of source transaction %d", d.LostEvents, d.RPOSeconds, tx.ID)
	}

	rev := reverseOf(t, r.pipeline, d.DRLogHead, r.db1)
	out, errOut, code := runTool(t, 2*time.Minute, "failback", "-config", r.conf, "-reverse-config", rev.conf, "-db", r.db1, "-json")
	if code != 0 {
		t.Fatalf("failback exited %d:\n%s", code, errOut)
	}
	var back failover.BackReport
	if err := json.Unmarshal([]byte(out), &back); err != nil {
		t.Fatalf("failback -json: %v\n%s", err, out)
	}
	b := back.Databases[0]
	t.Logf("failback: %d lost, %d late, moved %v", b.LostEvents, b.LateEvents, b.Moved)
	if b.LostEvents != 1 || !slices.Contains(b.Moved, "orders") {
		t.Errorf("failback: %d lost, moves %v; want the commit lost and orders moved back", b.LostEvents, b.Moved)
	}
}
