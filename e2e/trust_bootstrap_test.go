package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/internal/testenv"
	"github.com/hivedr/hivedr/schemas"
)

// TestTrustRecreateDuringBootstrap: the table a bootstrap is publishing
// the partitions of (its TABLE record and some partitions out, more to
// come) is dropped and created again with other partition keys and
// partitions of its own. The tailer is killed (-9) once its checkpoint
// shows the table in progress, so the recreation lands there and not
// after the table, and the restarted tailer lists the partitions of the
// table in progress again. The database ends equal to the source, and
// the applier never halts it.
func TestTrustRecreateDuringBootstrap(t *testing.T) {
	env := testenv.Require(t)
	u := uniq(t)
	db := "trustre_" + u
	pt := &pipelineTest{ctx: ctxFor(t, 15*time.Minute), src: env.HMS(t, testenv.Source), dr: env.HMS(t, testenv.DR)}
	pt.srcFS, pt.drFS = pipelineFS(t, env)
	pt.w = wl.NewSource(pt.src, pt.srcFS, env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL"))
	ctx, w := pt.ctx, pt.w
	if err := w.CreateDatabase(ctx, db); err != nil {
		t.Fatal(err)
	}
	const parts = 1000
	var vals [][]string
	for i := range parts {
		vals = append(vals, []string{fmt.Sprintf("2026-%04d", i)})
	}
	for _, tb := range []string{"big", "small"} {
		if err := w.CreateTable(ctx, db, tb, wl.TableSpec{Columns: []string{"id bigint"}, PartitionKeys: []string{"dt"}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.AddPartitions(ctx, db, "big", vals, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := w.AddPartitions(ctx, db, "small", vals[:3], 1); err != nil {
		t.Fatal(err)
	}

	pt.pipeline = newPipeline(t, env, []string{db}, currentEventID(t, ctx, pt.src))
	pt.withTailer("bootstrap_page: 5")
	pt.startAll()
	pt.requestBootstrap([]string{db}, nil)

	// Held with big in progress: its TABLE record and a page out.
	s := serde(t, env)
	var b *schemas.BootstrapState
	poll(t, 5*time.Minute, 20*time.Millisecond, db+".big in progress in the tailer's checkpoint", func() bool {
		pt.checkAlive()
		b = bootstrapOf(newestCheckpoint(t, pt.pipeline, s, pt.cfg.Source.Name), db)
		return b != nil && b.TableInProgress == "big" && b.DonePartition != ""
	})
	pt.tail.kill9()
	b = bootstrapOf(newestCheckpoint(t, pt.pipeline, s, pt.cfg.Source.Name), db)
	if b == nil || b.TableInProgress != "big" {
		t.Fatalf("the tailer, killed, had passed big: %+v", b)
	}
	t.Logf("tailer killed with %s.big in progress after partition %s (%d partitions published)", db, b.DonePartition, b.PartitionsDone)

	// Recreated with other partition keys, and partitions of its own.
	if err := w.DropTable(ctx, db, "big", true); err != nil {
		t.Fatal(err)
	}
	if err := w.CreateTable(ctx, db, "big", wl.TableSpec{Columns: []string{"id bigint", "note string"}, PartitionKeys: []string{"region", "day int"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.AddPartitions(ctx, db, "big", [][]string{{"eu", "1"}, {"us", "1"}, {"us", "2"}}, 2); err != nil {
		t.Fatal(err)
	}
	pt.startTail()

	eventually(t, 5*time.Minute, db+"'s bootstrap done on DR", func() bool {
		pt.checkAlive()
		if h := grepLines(pt.apply.out.String(), "database halted"); strings.Contains(h, "db="+db) {
			t.Fatalf("the applier halted %s:\n%s", db, h)
		}
		return bootstrapDone(ctx, pt.dr, db) != ""
	})
	pt.converge(ctx, pt.src, pt.dr, pt.srcFS, pt.drFS, 3*time.Minute)
	if h := grepLines(pt.apply.out.String(), "database halted"); strings.Contains(h, "db="+db) {
		t.Errorf("the applier halted %s:\n%s", db, h)
	}
	// What the snapshot published of big: the old table's records only.
	var old, other int
	for _, ev := range events(readTopic(t, env, s, kafka.Topics{Prefix: pt.prefix}.Events(db))) {
		if ev.EventType != schemas.EventSnapshotPartition || ev.Table != "big" {
			continue
		}
		if c, ok := ev.Payload.(*schemas.PartitionChange); ok && len(c.After) == 1 && len(c.After[0].Values) == 1 {
			old++
		} else {
			other++
		}
	}
	t.Logf("the snapshot published %d partitions of the old big and %d of the new", old, other)
	if old >= parts {
		t.Errorf("the snapshot published all %d partitions of the old big: it was not recreated while in progress", old)
	}
}
