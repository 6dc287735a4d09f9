package e2e

import (
	"errors"
	"testing"
	"time"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/internal/testenv"
)

// TestTrustCommitOfRecreatedTable: commits whose files are not on DR when
// the applier reaches them, their objects replaced by later events, are
// applied without a halt:
//
//   - table t gets an insert committed, is dropped (the metastore deletes
//     its directory) and created again at the same path, and the new
//     table is written until its write IDs pass the old one's (the same
//     delta names again), all before the pipeline starts, so the first
//     commit is applied with the drop in the look-ahead;
//   - table c gets an insert committed whose file copyd puts on DR; the
//     file is then removed on DR, as the prune of an earlier event
//     removes a later copy the applier's completions do not show yet when
//     the source no longer holds its path (the soak's case: the delta was
//     copied from the change-management root after the source's cleaner
//     removed it, and the table's CREATE_TABLE pruned it); then a major
//     compaction of c and the cleaner's removal of the delta on the
//     source, and only then the applier starts. DR's metastore reads every
//     file a commit names, and refused this commit for good ("File does
//     not exist").
//
// DR applies every event without a halt, its valid write IDs and the
// files a reader sees equal the source's, no DR transaction of the
// applier is left open, and verify finds nothing.
func TestTrustCommitOfRecreatedTable(t *testing.T) {
	env := testenv.Require(t)
	u := uniq(t)
	db := "recommit_" + u
	pt := &pipelineTest{ctx: ctxFor(t, 10*time.Minute), src: env.HMS(t, testenv.Source), dr: env.HMS(t, testenv.DR)}
	pt.srcFS, pt.drFS = pipelineFS(t, env)
	pt.w = wl.NewSource(pt.src, pt.srcFS, env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL"))
	pt.pipeline = &pipeline{t: t}
	ctx, w := pt.ctx, pt.w
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	o, err := pt.dr.GetOpenTxns(ctx)
	must("read DR's open transactions", err)
	start := currentEventID(t, ctx, pt.src)

	const name, compacted = "t", "c"
	spec := wl.ACIDTableSpec{Columns: []string{"id bigint", "note string"}}
	insertInto := func(table string) []wl.File {
		t.Helper()
		tx, err := w.OpenTxn(ctx)
		must("open a transaction", err)
		_, err = tx.Insert(ctx, db, table, nil, 2)
		must("insert into "+table, err)
		must("commit", tx.Commit(ctx))
		return tx.Files()
	}
	must("create database", w.CreateDatabase(ctx, db))
	must("create "+name, w.CreateACIDTable(ctx, db, name, spec))
	insertInto(name)
	must("drop "+name, w.DropTable(ctx, db, name, false))
	must("create "+name+" again", w.CreateACIDTable(ctx, db, name, spec))
	insertInto(name)
	insertInto(name)
	must("create "+compacted, w.CreateACIDTable(ctx, db, compacted, spec))
	files := insertInto(compacted)
	if len(files) != 1 {
		t.Fatalf("the insert into %s wrote %d files, want 1", compacted, len(files))
	}

	pt.pipeline = newPipeline(t, env, []string{db}, start)
	pt.startTail()
	pt.startCopyd()
	drFile, err := pt.mapLocation(files[0].Location)
	must("map "+files[0].Location, err)
	poll(t, 3*time.Minute, 200*time.Millisecond, drFile+" copied to DR", func() bool {
		pt.checkAlive()
		_, err := pt.drFS.Stat(ctx, drFile)
		return err == nil
	})
	must("remove "+drFile+" on DR", pt.drFS.Remove(ctx, drFile))
	if _, err := pt.drFS.Stat(ctx, drFile); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%s still on DR after its removal (stat: %v)", drFile, err)
	}
	c, err := w.Compact(ctx, db, compacted, nil, true)
	must("compact "+compacted, err)
	must("clean "+compacted, w.CleanCompacted(ctx, c))

	s, topic, head := serde(t, env), kafka.Topics{Prefix: pt.prefix}.Checkpoints(), currentEventID(t, ctx, pt.src)
	poll(t, 3*time.Minute, 200*time.Millisecond, "the tailer at the source's head", func() bool {
		pt.checkAlive()
		return lastCheckpoint(t, env, s, topic, pt.prefix) >= head
	})
	pt.startApply()
	r := &acidRig{pipelineTest: pt, db1: db, drTxnBase: o.TxnHighWaterMark,
		tables: []acidTable{{db: db, name: name}, {db: db, name: compacted}}}
	halted := func() {
		t.Helper()
		if d := drDatabase(t, pt, db); d != nil && d.Parameters[drparam.Halted] != "" {
			t.Fatalf("%s halted on DR: %s", db, d.Parameters[drparam.Halted])
		}
	}
	poll(t, 5*time.Minute, 500*time.Millisecond, "the applier caught up, or a halt", func() bool {
		halted()
		pt.checkAlive()
		return pt.caughtUp(ctx)
	})
	r.converge(time.Minute)
	halted()
	if got := r.drOpenReplTxns(); len(got) != 0 {
		t.Errorf("DR has open transactions of the applier %v after every source transaction ended", got)
	}
	verifyClean(t, pt.conf, db)
}
