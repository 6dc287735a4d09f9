package e2e

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hivedr/hivedr/applier"
	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/hms"
)

// TestTrustRecreateSamePathInterrupted: a transactional table whose last
// write was a base (base_3 over two deltas) is dropped and created again
// at the same location, and written until its write IDs reach 3 again,
// while the applier runs with a fault point that exits it (as a crash
// would) between the rename of the dropped DR table to its scratch name
// and the drop of that scratch table. The test sees it exit there with
// the scratch table on DR, then starts it again without the fault: once
// it has caught up, no scratch table is left in the database, the old
// base is gone from DR's directory, which holds what the source's holds,
// and a DR reader sees what a source reader sees.
func TestTrustRecreateSamePathInterrupted(t *testing.T) {
	u := uniq(t)
	db := "recreatek_" + u
	const table = "acid_tbl"
	pt := startPipeline(t, 12*time.Minute, db)
	ctx, w := pt.ctx, pt.w
	must := func(what string, err error) { t.Helper(); mustDo(t, what, err) }
	cols := []string{"id bigint", "note string"}
	write := acidCommitter(t, pt, db, table)
	must("create database", w.CreateDatabase(ctx, db))
	must("create "+table, w.CreateACIDTable(ctx, db, table, wl.ACIDTableSpec{Columns: cols}))
	write(false)
	write(false)
	write(true)
	rig := &acidRig{pipelineTest: pt}
	rig.caughtUpToHead(3 * time.Minute)
	must("clean "+table, w.CleanObsolete(ctx, db, table, nil))
	res, err := pt.src.GetTableReq(ctx, hms.TableRequest(db, table))
	must("get "+table, err)
	dir := strings.TrimSuffix(res.Table.Sd.Location, "/")
	drDir, err := pt.mapLocation(dir)
	must("map "+dir, err)
	pt.sameListings([]string{dir}, time.Minute)
	oldBase := func() []string {
		var out []string
		for rel := range pt.listing(pt.drFS, drDir) {
			if strings.HasPrefix(rel, "base_0000003/") {
				out = append(out, rel)
			}
		}
		return out
	}
	if len(oldBase()) == 0 {
		t.Fatalf("DR %s holds %v before the drop, want base_0000003", drDir, slices.Sorted(maps.Keys(pt.listing(pt.drFS, drDir))))
	}

	// The applier, restarted with the fault point, exits in the drop.
	pt.apply.stop(t)
	pt.roleEnv = map[string][]string{"apply": {applier.FaultEnv + "=" + applier.FaultResetRenamed}}
	pt.startApply()
	must("drop "+table, w.DropTable(ctx, db, table, false))
	must("create "+table+" again", w.CreateACIDTable(ctx, db, table, wl.ACIDTableSpec{Columns: cols}))
	for range 3 { // write IDs 1..3: up to the old base's
		write(false)
	}
	eventually(t, 3*time.Minute, "the applier to exit at "+applier.FaultResetRenamed, func() bool {
		for _, p := range []*proc{pt.tail, pt.copyd} {
			if p.exited() {
				t.Fatalf("%s exited:\n%s", p.name, tail(p.out.String(), 40))
			}
		}
		return pt.apply.exited()
	})
	if code := pt.apply.wait(t, time.Minute); code != applier.FaultExit {
		t.Fatalf("the applier exited %d, want %d (the fault point):\n%s", code, applier.FaultExit, tail(pt.apply.out.String(), 40))
	}
	scratch := func() []string {
		names, err := pt.dr.GetAllTables(ctx, db)
		must("list DR tables", err)
		return slices.DeleteFunc(names, func(n string) bool { return !strings.HasPrefix(n, "hivedr_dropped_") })
	}
	left := scratch()
	if len(left) != 1 {
		t.Fatalf("DR %s holds scratch tables %v at the fault point, want the dropped table's", db, left)
	}
	t.Logf("the applier stopped with %s.%s on DR", db, left[0])

	pt.roleEnv = nil
	pt.startApply()
	rig.caughtUpToHead(3 * time.Minute)
	if left := scratch(); len(left) > 0 {
		t.Errorf("scratch tables %v left on DR after the restarted applier caught up", left)
	}
	if b := oldBase(); len(b) > 0 {
		t.Errorf("DR %s still holds the dropped table's base: %v", drDir, b)
	}
	pt.sameListings([]string{dir}, time.Minute)
	pt.sameVisible(db+"."+table, dir)
}

// mustDo fails the test, naming what, when err is not nil.
func mustDo(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// acidCommitter returns a function that commits a source transaction
// writing db.table: a base of three rows (as INSERT OVERWRITE does), or
// a delta of two.
func acidCommitter(t *testing.T, pt *pipelineTest, db, table string) func(base bool) {
	return func(base bool) {
		t.Helper()
		ctx := pt.ctx
		tx, err := pt.w.OpenTxn(ctx)
		mustDo(t, "open a transaction", err)
		if base {
			_, err = tx.Overwrite(ctx, db, table, nil, 3)
		} else {
			_, err = tx.Insert(ctx, db, table, nil, 2)
		}
		mustDo(t, "write "+table, err)
		mustDo(t, "commit", tx.Commit(ctx))
	}
}
