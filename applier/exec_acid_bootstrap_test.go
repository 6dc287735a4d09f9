package applier

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	hms "github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/internal/acid"
)

// acidHMS is fakeHMS with the write-ID bookkeeping of Hive 4.0's metastore
// (TXNS, TXN_TO_WRITE_ID, NEXT_WRITE_ID, REPL_TXN_MAP) as the calls the
// applier makes use it: repl_tbl_writeid_state is a no-op over an
// existing NEXT_WRITE_ID; a replicated allocation at another write ID
// than NEXT_WRITE_ID deletes the table's rows; get_valid_write_ids reads
// the high-water mark off the highest row while there is one, and takes
// the lowest invalid write ID for it when no row is a committed
// transaction's; a rename
// moves the bookkeeping, a drop that keeps the data keeps it.
type acidHMS struct {
	*fakeHMS
	txns  map[int64]string           // id -> open, committed, aborted
	rows  map[string]map[int64]int64 // table -> write id -> txn
	next  map[string]int64           // table -> NEXT_WRITE_ID
	repl  map[string]int64           // policy/source txn -> DR txn
	hosts map[int64]string
	lastT int64
	// renames logs each rename: from, to and the new location.
	renames []string
}

func newAcidHMS() *acidHMS {
	return &acidHMS{fakeHMS: newFakeHMS(), txns: map[int64]string{}, rows: map[string]map[int64]int64{},
		next: map[string]int64{}, repl: map[string]int64{}, hosts: map[int64]string{}}
}

func (f *acidHMS) open(host string) int64 {
	f.lastT++
	f.txns[f.lastT], f.hosts[f.lastT] = "open", host
	return f.lastT
}

func (f *acidHMS) GetMaxAllocatedTableWriteID(ctx context.Context, req *hms.MaxAllocatedTableWriteIdRequest) (*hms.MaxAllocatedTableWriteIdResponse, error) {
	if err := f.enter(ctx, "GetMaxAllocatedTableWriteID"); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	var m int64
	if n, ok := f.next[req.DbName+"."+req.TableName]; ok {
		m = n - 1
	}
	return &hms.MaxAllocatedTableWriteIdResponse{MaxWriteId: m}, nil
}

func (f *acidHMS) ReplTblWriteidState(ctx context.Context, req *hms.ReplTblWriteIdStateRequest) error {
	if err := f.enter(ctx, "ReplTblWriteidState"); err != nil {
		return err
	}
	defer f.mu.Unlock()
	tbl := req.DbName + "." + req.TableName
	if _, ok := f.next[tbl]; ok {
		return nil // Hive's "idempotent flow"
	}
	fields := strings.Split(req.ValidWriteIdlist, ":")
	if len(fields) != 5 || fields[0] != tbl {
		return &hms.MetaException{Message: "bad ValidWriteIdList " + req.ValidWriteIdlist}
	}
	hwm, _ := strconv.ParseInt(fields[1], 10, 64)
	if fields[4] != "" {
		for _, s := range strings.Split(fields[4], ",") {
			id, _ := strconv.ParseInt(s, 10, 64)
			t := f.open(req.HostName)
			f.txns[t] = "aborted"
			f.row(tbl)[id] = t
		}
	}
	f.next[tbl] = hwm + 1
	return nil
}

func (f *acidHMS) row(tbl string) map[int64]int64 {
	if f.rows[tbl] == nil {
		f.rows[tbl] = map[int64]int64{}
	}
	return f.rows[tbl]
}

func (f *acidHMS) OpenTxns(ctx context.Context, req *hms.OpenTxnRequest) (*hms.OpenTxnsResponse, error) {
	if err := f.enter(ctx, "OpenTxns"); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	var ids []int64
	for _, src := range req.ReplSrcTxnIds {
		k := fmt.Sprintf("%s/%d", *req.ReplPolicy, src)
		if t, ok := f.repl[k]; ok {
			ids = append(ids, t)
			continue
		}
		t := f.open(req.Hostname)
		f.repl[k] = t
		ids = append(ids, t)
	}
	return &hms.OpenTxnsResponse{TxnIds: ids}, nil
}

func (f *acidHMS) AllocateTableWriteIds(ctx context.Context, req *hms.AllocateTableWriteIdsRequest) (*hms.AllocateTableWriteIdsResponse, error) {
	if err := f.enter(ctx, "AllocateTableWriteIds"); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	tbl := req.DbName + "." + req.TableName
	src := req.SrcTxnToWriteIdList[0]
	t, ok := f.repl[fmt.Sprintf("%s/%d", *req.ReplPolicy, src.TxnId)]
	if !ok {
		return &hms.AllocateTableWriteIdsResponse{}, nil // no target transaction: a no-op
	}
	for w, tt := range f.rows[tbl] {
		if tt == t {
			return &hms.AllocateTableWriteIdsResponse{TxnToWriteIds: []*hms.TxnToWriteId{{TxnId: t, WriteId: w}}}, nil
		}
	}
	if n, ok := f.next[tbl]; ok && n != src.WriteId {
		delete(f.rows, tbl) // the replication flow's reset
	}
	f.row(tbl)[src.WriteId] = t
	f.next[tbl] = src.WriteId + 1
	return &hms.AllocateTableWriteIdsResponse{TxnToWriteIds: []*hms.TxnToWriteId{{TxnId: t, WriteId: src.WriteId}}}, nil
}

func (f *acidHMS) end(ctx context.Context, op, policy string, src int64, state string) error {
	if err := f.enter(ctx, op); err != nil {
		return err
	}
	defer f.mu.Unlock()
	k := fmt.Sprintf("%s/%d", policy, src)
	if t, ok := f.repl[k]; ok {
		f.txns[t] = state
		delete(f.repl, k)
	}
	return nil
}

func (f *acidHMS) CommitReplTxn(ctx context.Context, policy string, src int64, _ []*hms.WriteEventInfo, _ *hms.ReplLastIdInfo) error {
	return f.end(ctx, "CommitReplTxn", policy, src, "committed")
}

func (f *acidHMS) AbortReplTxn(ctx context.Context, policy string, src int64) error {
	return f.end(ctx, "AbortReplTxn", policy, src, "aborted")
}

func (f *acidHMS) GetOpenTxns(ctx context.Context) (*hms.GetOpenTxnsResponse, error) {
	if err := f.enter(ctx, "GetOpenTxns"); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	r := &hms.GetOpenTxnsResponse{TxnHighWaterMark: f.lastT}
	var bits byte
	for t := int64(1); t <= f.lastT; t++ {
		if s := f.txns[t]; s == "open" || s == "aborted" {
			if s == "aborted" {
				bits |= 1 << len(r.OpenTxns)
			}
			r.OpenTxns = append(r.OpenTxns, t)
		}
	}
	r.AbortedBits = []byte{bits}
	return r, nil
}

func (f *acidHMS) GetValidWriteIds(ctx context.Context, req *hms.GetValidWriteIdsRequest) (*hms.GetValidWriteIdsResponse, error) {
	if err := f.enter(ctx, "GetValidWriteIds"); err != nil {
		return nil, err
	}
	defer f.mu.Unlock()
	r := &hms.GetValidWriteIdsResponse{}
	for _, tbl := range req.FullTableNames {
		v := &hms.TableValidWriteIds{FullTableName: tbl}
		for w := range f.rows[tbl] {
			v.WriteIdHighWaterMark = max(v.WriteIdHighWaterMark, w)
		}
		if v.WriteIdHighWaterMark == 0 && f.next[tbl] > 0 {
			v.WriteIdHighWaterMark = f.next[tbl] - 1
		}
		ws := slices.Sorted(func(yield func(int64) bool) {
			for w := range f.rows[tbl] {
				if !yield(w) {
					return
				}
			}
		})
		var bits byte
		committed := false
		for _, w := range ws {
			s := f.txns[f.rows[tbl][w]]
			committed = committed || w <= v.WriteIdHighWaterMark && s == "committed"
			if w <= v.WriteIdHighWaterMark && s != "committed" {
				if s == "aborted" {
					bits |= 1 << len(v.InvalidWriteIds)
				}
				v.InvalidWriteIds = append(v.InvalidWriteIds, w)
			}
		}
		if !committed && len(v.InvalidWriteIds) > 0 {
			// No committed write among the rows: the lowest invalid
			// write ID is the mark (Hive 4's rule for compacted tables).
			v.WriteIdHighWaterMark, v.InvalidWriteIds, bits = v.InvalidWriteIds[0], v.InvalidWriteIds[:1], bits&1
		}
		v.AbortedBits = []byte{bits}
		r.TblValidWriteIds = append(r.TblValidWriteIds, v)
	}
	return r, nil
}

// AlterTableWithEnvironmentContext moves the bookkeeping with a rename.
func (f *acidHMS) AlterTableWithEnvironmentContext(ctx context.Context, db, name string, t *hms.Table, env *hms.EnvironmentContext) error {
	if err := f.fakeHMS.AlterTableWithEnvironmentContext(ctx, db, name, t, env); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	from, to := db+"."+name, t.DbName+"."+t.TableName
	if from != to {
		f.renames = append(f.renames, from+" "+to+" "+t.Sd.Location)
		f.moveBookkeeping(from, to)
	}
	return nil
}

// moveBookkeeping moves table from's write-ID bookkeeping to to, as a
// rename does (f.mu held).
func (f *acidHMS) moveBookkeeping(from, to string) {
	if n, ok := f.next[from]; ok {
		f.next[to] = n
		delete(f.next, from)
	}
	if r, ok := f.rows[from]; ok {
		f.rows[to] = r
		delete(f.rows, from)
	}
}

// state is the table's write-ID state as a reader sees it.
func (f *acidHMS) state(t *testing.T, tbl string) acid.WriteIDs {
	t.Helper()
	w, err := acid.ReadWriteIDs(context.Background(), f, []string{tbl})
	if err != nil {
		t.Fatal(err)
	}
	return w[tbl]
}

var _ WriteIDStates = (*acidHMS)(nil)

// crashAfter makes every call after the first n mutating ones fail, as a
// lost connection would; -1: none.
func (f *acidHMS) crashAfter(n int) {
	mutating := map[string]bool{"ReplTblWriteidState": true, "OpenTxns": true, "AllocateTableWriteIds": true, "CommitReplTxn": true,
		"AbortReplTxn": true, "CreateTable": true, "AlterTableWithEnvironmentContext": true, "DropTable": true}
	done := 0
	f.setHook(func(_ context.Context, op string) error {
		if n >= 0 && mutating[op] {
			if done >= n {
				return errors.New("connection lost")
			}
			done++
		}
		return nil
	})
}

// TestSetWriteIDs: the executor's steps end in the state asked whatever
// step a crash interrupts (the action run again from the start), a reader
// then sees the high-water mark and the invalid write IDs, and no DR
// transaction is left open.
func TestSetWriteIDs(t *testing.T) {
	for _, c := range []struct {
		name string
		a    SetWriteIDs
		want string
	}{
		{"aborted below a valid mark: anchored", SetWriteIDs{DB: "sales", Table: "orders", Policy: "sales", HighWaterMark: 9, Invalid: []int64{2, 5}},
			"hwm=9 open=[] aborted=[2 5]"},
		{"the mark aborted", SetWriteIDs{DB: "sales", Table: "orders", Policy: "sales", HighWaterMark: 9, Invalid: []int64{3, 9}},
			"hwm=9 open=[] aborted=[3 9]"},
		{"aborted above the last valid: a tail", SetWriteIDs{DB: "sales", Table: "orders", Policy: "sales", HighWaterMark: 9, Invalid: []int64{3, 8, 9}},
			"hwm=9 open=[] aborted=[3 8 9]"},
		{"only the first valid", SetWriteIDs{DB: "sales", Table: "orders", Policy: "sales", HighWaterMark: 4, Invalid: []int64{2, 3, 4}},
			"hwm=4 open=[] aborted=[2 3 4]"},
		// Nothing valid: the metastore's reader takes the lowest for the
		// mark, and sees no write, as the source's does.
		{"none valid", SetWriteIDs{DB: "sales", Table: "orders", Policy: "sales", HighWaterMark: 3, Invalid: []int64{1, 2, 3}},
			"hwm=1 open=[] aborted=[1]"},
		{"none invalid", SetWriteIDs{DB: "sales", Table: "orders", Policy: "sales", HighWaterMark: 9}, "hwm=9 open=[] aborted=[]"},
		{"one write, valid", SetWriteIDs{DB: "sales", Table: "orders", Policy: "sales", HighWaterMark: 1}, "hwm=1 open=[] aborted=[]"},
	} {
		for crash := 0; ; crash++ {
			f := newAcidHMS()
			f.crashAfter(crash)
			x := &executor{ms: f}
			err := x.setWriteIDs(context.Background(), c.a)
			if err == nil && crash > 0 {
				break // no call left to crash in
			}
			f.crashAfter(-1)
			if err := x.setWriteIDs(context.Background(), c.a); err != nil {
				t.Fatalf("%s, crashed after %d calls: run again: %v", c.name, crash, err)
			}
			if got := f.state(t, "sales.orders").String(); got != c.want {
				t.Errorf("%s, crashed after %d calls: %s, want %s", c.name, crash, got, c.want)
			}
			for id, s := range f.txns {
				if s == "open" {
					t.Errorf("%s, crashed after %d calls: DR transaction %d (%s) left open", c.name, crash, id, f.hosts[id])
				}
			}
			if f.next["sales.orders"] != c.a.HighWaterMark+1 {
				t.Errorf("%s: next write id %d", c.name, f.next["sales.orders"])
			}
		}
	}
}

// TestSetWriteIDsAnchorMatters: without the anchor, a reader of a table
// whose rows are all aborted transactions' would read the lowest aborted
// write ID as the mark (the metastore's rule, which acidHMS follows and
// the DR metastore showed: hwm=1 aborted=[1] for a state set with mark 28
// and write IDs 1, 3, 6 ... 28 aborted).
func TestSetWriteIDsAnchorMatters(t *testing.T) {
	f := newAcidHMS()
	err := f.ReplTblWriteidState(context.Background(), &hms.ReplTblWriteIdStateRequest{DbName: "sales", TableName: "orders",
		ValidWriteIdlist: acid.FormatValidWriteIDList("sales.orders", acid.WriteIDs{HighWaterMark: 9, Aborted: []int64{2, 5, 9}})})
	if err != nil {
		t.Fatal(err)
	}
	if w := f.state(t, "sales.orders"); w.String() != "hwm=2 open=[] aborted=[2]" {
		t.Fatalf("the model's reader sees %s: it does not follow the metastore's rule", w)
	}
}

// TestSetWriteIDsOverAnotherState: a name that holds another state is
// refused, never changed.
func TestSetWriteIDsOverAnotherState(t *testing.T) {
	f := newAcidHMS()
	f.next["sales.orders"] = 20
	x := &executor{ms: f}
	err := x.setWriteIDs(context.Background(), SetWriteIDs{DB: "sales", Table: "orders", Policy: "sales", HighWaterMark: 9, Invalid: []int64{2}})
	var refused *RefusedError
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), "highest write id allocated under sales.orders on DR is 19, not 9") {
		t.Fatalf("err %v", err)
	}
	if f.next["sales.orders"] != 20 || len(f.rows["sales.orders"]) != 0 {
		t.Errorf("the other state changed: next %d, rows %v", f.next["sales.orders"], f.rows)
	}
}

// TestSetWriteIDsLeftoverAnchor: an anchor left open by a crash (its
// re-drive superseded) is committed by the next SetWriteIDs of the
// database, which then anchors its own table.
func TestSetWriteIDsLeftoverAnchor(t *testing.T) {
	f := newAcidHMS()
	x := &executor{ms: f}
	f.crashAfter(4) // state, (no leftover), open, allocate: a's anchor left open
	a := SetWriteIDs{DB: "sales", Table: "a", Policy: "sales", HighWaterMark: 4, Invalid: []int64{1}}
	if err := x.setWriteIDs(context.Background(), a); err == nil {
		t.Fatal("no crash")
	}
	f.crashAfter(-1)
	if err := x.setWriteIDs(context.Background(), SetWriteIDs{DB: "sales", Table: "b", Policy: "sales", HighWaterMark: 6, Invalid: []int64{2}}); err != nil {
		t.Fatal(err)
	}
	for tbl, want := range map[string]string{"sales.a": "hwm=4 open=[] aborted=[1]", "sales.b": "hwm=6 open=[] aborted=[2]"} {
		if got := f.state(t, tbl).String(); got != want {
			t.Errorf("%s: %s, want %s", tbl, got, want)
		}
	}
}

// TestResetWriteIDs: removing a transactional table takes its write-ID
// bookkeeping with it (the name is free for repl_tbl_writeid_state), its
// data untouched; without a table, the definition carries a stale
// bookkeeping away. A plain table's drop is a drop.
func TestResetWriteIDs(t *testing.T) {
	ctx := context.Background()
	orders := drACID(srcACID("sales", "orders"), 20)
	f := newAcidHMS()
	f.dbs["sales"] = drDB("sales", 20)
	f.tables[TableKey{DB: "sales", Name: "orders"}] = drACID(srcACID("sales", "orders"), 20)
	f.next["sales.orders"], f.rows["sales.orders"] = 8, map[int64]int64{3: f.open("x")}
	x := &executor{ms: f}
	if err := x.dropTable(ctx, DropTable{DB: "sales", Name: "orders"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.next["sales.orders"]; ok || f.tables[TableKey{DB: "sales", Name: "orders"}] != nil || len(f.tables) != 0 {
		t.Fatalf("after the drop: tables %v, next %v", f.tables, f.next)
	}
	// A stale bookkeeping without a table.
	f.next["sales.orders"] = 5
	if err := x.resetWriteIDs(ctx, ResetWriteIDs{DB: "sales", Table: "orders", Def: drACID(srcACID("sales", "orders"), 20)}, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.next["sales.orders"]; ok || len(f.tables) != 0 {
		t.Fatalf("after the reset: tables %v, next %v", f.tables, f.next)
	}
	// Each rename gave the table another location: no data moves.
	if len(f.renames) != 2 {
		t.Fatalf("renames %v, want the transactional table's and the stale bookkeeping's carrier's", f.renames)
	}
	for _, r := range f.renames {
		from, rest, _ := strings.Cut(r, " ")
		to, loc, _ := strings.Cut(rest, " ")
		if from != "sales.orders" || !strings.HasPrefix(to, "sales.hivedr_dropped_") || loc == orders.Sd.Location ||
			strings.HasPrefix(loc, orders.Sd.Location+"/") || !isDR(loc) {
			t.Errorf("rename %s", r)
		}
	}
	// A plain table is dropped as it is; one gone is a no-op.
	plain := drTable(srcCustomers, 20)
	plain.OwnerType = hms.PrincipalType_USER
	f.tables[TableKey{DB: "sales", Name: "customers"}] = plain
	if err := x.dropTable(ctx, DropTable{DB: "sales", Name: "customers"}); err != nil {
		t.Fatal(err)
	}
	if len(f.renames) != 2 || len(f.tables) != 0 {
		t.Errorf("a plain table's drop: renames %v, tables %v", f.renames, f.tables)
	}
	if err := x.dropTable(ctx, DropTable{DB: "sales", Name: "customers"}); err != nil {
		t.Errorf("dropping a table gone: %v", err)
	}
}

// TestDropScratch: the first action a worker runs drops the scratch
// tables a crash between a reset's rename and its drop left in its
// database, once (its later actions list nothing more); tables of other
// names, and other databases' scratch tables, stay.
func TestDropScratch(t *testing.T) {
	ctx := context.Background()
	f := newAcidHMS()
	f.dbs["sales"], f.dbs["other"] = drDB("sales", 20), drDB("other", 20)
	left := []TableKey{{DB: "sales", Name: scratchName("orders", time.Now())}, {DB: "other", Name: scratchName("orders", time.Now())},
		{DB: "sales", Name: "orders"}}
	for _, k := range left {
		f.tables[k] = drACID(srcACID(k.DB, k.Name), 20)
	}
	c := newCache("sales")
	for i := range 2 {
		x := &executor{ms: f, cache: c}
		if err := x.run(ctx, AlterDatabase{Name: "sales", DB: drDB("sales", int64(21+i))}); err != nil {
			t.Fatal(err)
		}
		if f.tables[left[0]] != nil || f.tables[left[1]] == nil || f.tables[left[2]] == nil {
			t.Fatalf("after action %d: tables %v, want %s dropped, the others kept", i+1, slices.Collect(maps.Keys(f.tables)), left[0])
		}
		if n := f.callsOf("GetTables"); n != 1 {
			t.Errorf("after action %d: %d listings of scratch tables, want 1", i+1, n)
		}
	}
}

// cutHMS is acidHMS whose next rename to a scratch name or drop of a
// scratch table fails as a metastore that died mid-call does: Hive 4.0.1
// commits a rename's write-ID bookkeeping move (AcidEventListener, on its
// own connection) before the table's rename, so it can die between them
// ("moved"), or after both, its reply lost ("renamed"); a drop can die
// before its commit ("drop").
type cutHMS struct {
	*acidHMS
	cut string
}

var errCut = errors.New("EOF")

func (f *cutHMS) AlterTableWithEnvironmentContext(ctx context.Context, db, name string, t *hms.Table, env *hms.EnvironmentContext) error {
	if !strings.HasPrefix(t.TableName, scratchPrefix) {
		return f.acidHMS.AlterTableWithEnvironmentContext(ctx, db, name, t, env)
	}
	switch f.cut {
	case "moved":
		f.cut = ""
		f.mu.Lock()
		defer f.mu.Unlock()
		f.moveBookkeeping(db+"."+name, t.DbName+"."+t.TableName)
		return errCut
	case "renamed":
		f.cut = ""
		if err := f.acidHMS.AlterTableWithEnvironmentContext(ctx, db, name, t, env); err != nil {
			return err
		}
		return errCut
	}
	return f.acidHMS.AlterTableWithEnvironmentContext(ctx, db, name, t, env)
}

func (f *cutHMS) DropTable(ctx context.Context, db, name string, deleteData bool) error {
	if f.cut == "drop" && strings.HasPrefix(name, scratchPrefix) {
		f.cut = ""
		return errCut
	}
	return f.acidHMS.DropTable(ctx, db, name, deleteData)
}

// TestResetWriteIDsCut: a transactional table's drop cut short by the
// metastore (between the rename's two commits, after them with the reply
// lost, or before the scratch table's drop) is finished by the worker's
// retry: no table under the name or a scratch name, and no write-ID
// bookkeeping under the name, so a table created there next starts
// afresh. The retry plans the event over what DR then holds: the drop
// again while the table has its name, else nothing but the watermark.
func TestResetWriteIDsCut(t *testing.T) {
	for _, cut := range []string{"moved", "renamed", "drop"} {
		t.Run(cut, func(t *testing.T) {
			ctx := context.Background()
			f := &cutHMS{acidHMS: newAcidHMS(), cut: cut}
			f.dbs["sales"] = drDB("sales", 20)
			orders := TableKey{DB: "sales", Name: "orders"}
			f.tables[orders] = drACID(srcACID("sales", "orders"), 20)
			f.next["sales.orders"], f.rows["sales.orders"] = 8, map[int64]int64{3: f.open("x")}
			c := newCache("sales")
			x := &executor{ms: f, cache: c}
			if err := x.run(ctx, DropTable{DB: "sales", Name: "orders"}); !errors.Is(err, errCut) {
				t.Fatalf("the cut drop: %v, want %v", err, errCut)
			}
			c.reset() // as the worker does after a failed step
			var retry Action = AlterDatabase{Name: "sales", DB: drDB("sales", 21)}
			if f.tables[orders] != nil {
				retry = DropTable{DB: "sales", Name: "orders"}
			}
			if err := (&executor{ms: f, cache: c}).run(ctx, retry); err != nil {
				t.Fatalf("the retry (%s): %v", retry, err)
			}
			if len(f.tables) != 0 {
				t.Errorf("after the retry (%s): tables %v, want none", retry, slices.Collect(maps.Keys(f.tables)))
			}
			if _, ok := f.next["sales.orders"]; ok {
				t.Errorf("after the retry (%s): write-ID bookkeeping still under the name: next %v", retry, f.next)
			}
		})
	}
}
