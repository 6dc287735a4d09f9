package applier

import (
	"context"
	"errors"
	"reflect"
	"testing"

	hms "github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/schemas"
)

// commitRecorder is a fakeHMS that replays transactions by recording
// each commit's writes.
type commitRecorder struct {
	*fakeHMS
	commits [][]*hms.WriteEventInfo
}

func (c *commitRecorder) OpenTxns(context.Context, *hms.OpenTxnRequest) (*hms.OpenTxnsResponse, error) {
	return &hms.OpenTxnsResponse{}, nil
}

func (c *commitRecorder) AllocateTableWriteIds(context.Context, *hms.AllocateTableWriteIdsRequest) (*hms.AllocateTableWriteIdsResponse, error) {
	return &hms.AllocateTableWriteIdsResponse{}, nil
}

func (c *commitRecorder) CommitReplTxn(_ context.Context, _ string, _ int64, writes []*hms.WriteEventInfo, _ *hms.ReplLastIdInfo) error {
	c.commits = append(c.commits, writes)
	return nil
}

func (c *commitRecorder) AbortReplTxn(context.Context, string, int64) error { return nil }

// heldFiles are DR files by location; Exists says which are there.
type heldFiles map[string]bool

func (h heldFiles) Walk(context.Context, string, func(string, int64) error) error {
	return fs.ErrNotExist
}
func (h heldFiles) Remove(_ context.Context, loc string) error         { delete(h, loc); return nil }
func (h heldFiles) Exists(_ context.Context, loc string) (bool, error) { return h[loc], nil }

// TestReplCommitLeavesOutReplacedFilesNotOnDR: a commit names every file
// DR holds, and leaves out only a file DR does not hold whose object a
// later event replaces (a write left with no file is left out whole); a
// missing file no later event replaces stays named (the metastore
// refuses the commit: DR lost a committed file).
func TestReplCommitLeavesOutReplacedFilesNotOnDR(t *testing.T) {
	d := drRoot + "sales.db/orders/"
	a1, a2 := d+"dt=a/delta_0000001_0000001_0000/bucket_00000", d+"dt=a/delta_0000001_0000001_0000/bucket_00001"
	b1 := d + "dt=b/delta_0000001_0000001_0000/bucket_00000"
	c1 := d + "dt=c/delta_0000001_0000001_0000/bucket_00000"
	entry := func(loc string) string { return loc + "#ck##delta_0000001_0000001_0000" }
	part := func(p string) *string { return &p }
	writes := []*hms.WriteEventInfo{
		{WriteId: 1, Database: "sales", Table: "orders", Partition: part("dt=a"), Files: entry(a1) + "]" + entry(a2)},
		{WriteId: 1, Database: "sales", Table: "orders", Partition: part("dt=b"), Files: entry(b1)},
		{WriteId: 1, Database: "sales", Table: "orders", Partition: part("dt=c"), Files: entry(c1)},
	}
	rec := &commitRecorder{fakeHMS: newFakeHMS()}
	// a2 and b1 were pruned (a later major compaction of dt=a, a drop of
	// dt=b replace them); c1 is missing too, but nothing replaces it.
	x := &executor{ms: rec, files: heldFiles{a1: true}, log: testLogger()}
	err := x.runACID(context.Background(), ReplCommit{Policy: "sales", SrcTxn: 7, Writes: writes,
		Replaced: map[string]int64{a1: 60, a2: 60, b1: 61}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.commits) != 1 {
		t.Fatalf("%d commits, want 1", len(rec.commits))
	}
	got := rec.commits[0]
	want := []*hms.WriteEventInfo{
		{WriteId: 1, Database: "sales", Table: "orders", Partition: part("dt=a"), Files: entry(a1)},
		writes[2],
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("committed writes\n%+v\nwant\n%+v", got, want)
	}
	if writes[0].Files != entry(a1)+"]"+entry(a2) {
		t.Errorf("the action's write was changed: %q", writes[0].Files)
	}

	// Nothing replaced: the writes as planned, no file looked up.
	rec.commits = nil
	x.files = heldFiles{}
	if err := x.runACID(context.Background(), ReplCommit{Policy: "sales", SrcTxn: 8, Writes: writes}); err != nil {
		t.Fatal(err)
	}
	if len(rec.commits) != 1 || !reflect.DeepEqual(rec.commits[0], writes) {
		t.Errorf("committed %+v, want the writes as planned", rec.commits)
	}
}

// TestPlanCommitNamesReplacedFiles: the files of a committed write whose
// object (its partition) a later event replaces are named Replaced, with
// that event; the others are not.
func TestPlanCommitNamesReplacedFiles(t *testing.T) {
	p1 := srcRoot + "sales.db/orders/dt=2024-01-01/delta_0000003_0000003_0000/bucket_00000"
	p2 := srcRoot + "sales.db/orders/dt=2024-01-02/delta_0000003_0000003_0000/bucket_00000"
	ev := srcEvent(50, schemas.EventCommitTxn, "", "", &schemas.Transaction{
		TxnIDs: []int64{7}, WriteIDs: []schemas.TableWriteID{
			{Database: "sales", Table: "orders", WriteID: 3, Partition: "dt=2024-01-01", Files: []string{p1}},
			{Database: "sales", Table: "orders", WriteID: 3, Partition: "dt=2024-01-02", Files: []string{p2}}}},
		p1, p2)
	state := drState(drDB("sales", 40), drTable(srcOrders, 20), drPart(srcOrders, srcP1, 30), drPart(srcOrders, srcP2, 30))
	in := Input{DB: "sales", Source: "src", Event: ev, Replica: state, Copies: map[string]Copy{
		"50-0": {Status: schemas.StatusCopied}, "50-1": {Status: schemas.StatusCopied}},
		Later: []*schemas.Event{compaction(60, &srcP1, "base_0000009_v0000150")}, Policy: testPolicy{}}
	d := Plan(in)
	if d.Outcome != Apply {
		t.Fatalf("decision %+v", d)
	}
	c, ok := d.Actions[0].(ReplCommit)
	if !ok {
		t.Fatalf("first action %v, want the commit", d.Actions[0])
	}
	if want := map[string]int64{drPath(p1): 60}; !reflect.DeepEqual(c.Replaced, want) {
		t.Errorf("Replaced = %v, want %v", c.Replaced, want)
	}
	if len(c.Writes) != 2 {
		t.Errorf("%d writes, want both", len(c.Writes))
	}
}

// TestPlanCommitGoneFileCompactedLater: a committed write whose file
// could not be copied (the compaction's cleaner removed it on the source
// first: SOURCE_GONE) is committed without waiting for it when a later
// compaction of its partition, minor or major, covers its write ID; the
// file is named Replaced, so the commit leaves it out. Without such a
// compaction the commit waits, and halts on it.
func TestPlanCommitGoneFileCompactedLater(t *testing.T) {
	p1 := srcRoot + "sales.db/orders/dt=2024-01-01/delta_0000003_0000003_0001/000000_0"
	ev := srcEvent(50, schemas.EventCommitTxn, "", "", &schemas.Transaction{
		TxnIDs: []int64{7}, WriteIDs: []schemas.TableWriteID{
			{Database: "sales", Table: "orders", WriteID: 3, Partition: "dt=2024-01-01", Files: []string{p1}}}},
		p1)
	state := drState(drDB("sales", 40), drTable(srcOrders, 20), drPart(srcOrders, srcP1, 30))
	for _, c := range []struct {
		name  string
		later []*schemas.Event
		want  Outcome
	}{
		{"minor compaction covering write 3", []*schemas.Event{compaction(60, &srcP1, "delta_0000003_0000006_v0000047")}, Apply},
		{"major compaction above it", []*schemas.Event{compaction(60, &srcP1, "base_0000009_v0000150")}, Apply},
		{"minor compaction of later writes only", []*schemas.Event{compaction(60, &srcP1, "delta_0000004_0000006_v0000047")}, Wait},
		{"no compaction", nil, Wait},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := Input{DB: "sales", Source: "src", Event: ev, Replica: state, Copies: map[string]Copy{
				"50-0": {Status: schemas.StatusSourceGone}}, Later: c.later, Policy: testPolicy{}}
			d := Plan(in)
			if d.Outcome != c.want {
				t.Fatalf("decision %s %s (%s), want %s", d.Outcome, d.Reason, d.Detail, c.want)
			}
			if c.want != Apply {
				return
			}
			cm, ok := d.Actions[0].(ReplCommit)
			if !ok {
				t.Fatalf("first action %v, want the commit", d.Actions[0])
			}
			if want := map[string]int64{drPath(p1): 60}; !reflect.DeepEqual(cm.Replaced, want) {
				t.Errorf("Replaced = %v, want %v", cm.Replaced, want)
			}
		})
	}
}

// TestPlanCommitLeftOutOverwrite: a write of an INSERT OVERWRITE (a base)
// whose file could not be copied, its table dropped later, is left
// out of the commit, but what its base made obsolete is pruned after it:
// DR does not read the rows the overwrite replaced. An insert's delta
// left out the same way prunes nothing.
func TestPlanCommitLeftOutOverwrite(t *testing.T) {
	state := drState(drDB("sales", 40), drTable(srcOrders, 20), drPart(srcOrders, srcP1, 30))
	for _, c := range []struct {
		name, file string
		prunes     []string
	}{
		{"an overwrite's base", "base_0000005/000000_0", []string{"prune what base_5 covers under " + drPath(srcP1.Location)}},
		{"an insert's delta", "delta_0000005_0000005_0000/000000_0", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := srcP1.Location + "/" + c.file
			ev := srcEvent(50, schemas.EventCommitTxn, "", "", &schemas.Transaction{
				TxnIDs: []int64{7}, WriteIDs: []schemas.TableWriteID{
					{Database: "sales", Table: "orders", WriteID: 5, Partition: "dt=2024-01-01", Files: []string{f}}}},
				f)
			in := Input{DB: "sales", Source: "src", Event: ev, Replica: state, Copies: map[string]Copy{
				"50-0": {Status: schemas.StatusSourceGone}}, Later: []*schemas.Event{dropTable(60, srcOrders)}, Policy: testPolicy{}}
			d := Plan(in)
			if d.Outcome != Apply {
				t.Fatalf("decision %s %s (%s), want apply", d.Outcome, d.Reason, d.Detail)
			}
			cm, ok := d.Actions[0].(ReplCommit)
			if !ok || len(cm.Writes) != 0 {
				t.Fatalf("first action %v, want the commit without the write", d.Actions[0])
			}
			want := append(append([]string{}, c.prunes...), "alter database sales")
			if got := actionNames(d.Actions[1:]); !reflect.DeepEqual(got, want) {
				t.Errorf("actions after the commit %q, want %q", got, want)
			}
		})
	}
}

// twinHMS answers the transaction calls as the metastore answers the
// twin of a call still running: allocErr from allocate_table_write_ids.
// opens logs the source transactions of each open_txns.
type twinHMS struct {
	commitRecorder
	allocErr error
	opens    [][]int64
}

func (t *twinHMS) OpenTxns(_ context.Context, req *hms.OpenTxnRequest) (*hms.OpenTxnsResponse, error) {
	t.opens = append(t.opens, req.ReplSrcTxnIds)
	return &hms.OpenTxnsResponse{}, nil
}

func (t *twinHMS) AllocateTableWriteIds(context.Context, *hms.AllocateTableWriteIdsRequest) (*hms.AllocateTableWriteIdsResponse, error) {
	return &hms.AllocateTableWriteIdsResponse{}, t.allocErr
}

// TestReplCallsTwinRefusal: a unique-key violation of a call replaying a
// source transaction (its twin inserted the key) is transient, retried
// through the metastore's lookup; another refusal halts. An allocation
// opens each source transaction in a call of its own.
func TestReplCallsTwinRefusal(t *testing.T) {
	alloc := ReplAllocate{Policy: "sales", DB: "sales", Table: "orders", Txns: []schemas.TxnWriteID{{TxnID: 7, WriteID: 3}, {TxnID: 8, WriteID: 4}}}
	for _, c := range []struct {
		name      string
		err       error
		transient bool
	}{
		{"postgres", &hms.MetaException{Message: `Batch entry 0 insert into "TXN_TO_WRITE_ID" ... ERROR: duplicate key value violates unique constraint "TBL_TO_TXN_ID_IDX"`}, true},
		{"mysql", &hms.MetaException{Message: `Duplicate entry 'sales-7' for key 'REPL_TXN_MAP.PRIMARY'`}, true},
		{"other refusal", &hms.MetaException{Message: "Invalid write id 3 for table sales.orders"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ms := &twinHMS{commitRecorder: commitRecorder{fakeHMS: newFakeHMS()}, allocErr: c.err}
			x := &executor{ms: ms, log: testLogger()}
			err := x.runACID(context.Background(), alloc)
			var (
				tr *TransientError
				r  *RefusedError
			)
			if c.transient && !errors.As(err, &tr) || !c.transient && !errors.As(err, &r) {
				t.Errorf("runACID = %T %v, want transient %v", err, err, c.transient)
			}
			if want := [][]int64{{7}, {8}}; !reflect.DeepEqual(ms.opens, want) {
				t.Errorf("open_txns calls for %v, want %v", ms.opens, want)
			}
		})
	}
}
