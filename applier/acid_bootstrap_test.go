package applier

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	hms "github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/internal/acid"
	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/schemas"
)

// ---- the in-memory DR metastore's write IDs (memMS.next)

// allocNext is the metastore's NEXT_WRITE_ID in the replication flow: an
// allocation a transaction has made already is returned as it is; one at
// the table's next write ID (or of a table with none) moves it on. One
// below it would reset the table's bookkeeping: never to be sent.
func (m *memMS) allocNext(a ReplAllocate) error {
	tbl := a.DB + "." + a.Table
	key := fmt.Sprintf("%s/%d", a.Policy, a.Txns[0].TxnID)
	if slices.Contains(m.open[key], fmt.Sprintf("%s/%d", tbl, a.Txns[0].WriteID)) {
		return nil
	}
	next, ok := m.next[tbl]
	first := a.Txns[0].WriteID
	if ok && first < next {
		return fmt.Errorf("%s: write id %d is below %s's next write id %d: the metastore would delete the table's write-id rows", a, first, tbl, next)
	}
	if ok && first > next {
		return fmt.Errorf("%s: write id %d skips %s's next write id %d", a, first, tbl, next)
	}
	m.next[tbl] = a.Txns[len(a.Txns)-1].WriteID + 1
	return nil
}

// commitNoTxn is a replicated commit of a source transaction DR has no
// transaction for: a no-op, legitimate only for write IDs DR allocated
// already (a bootstrap's state covers them).
func (m *memMS) commitNoTxn(c ReplCommit) error {
	for _, w := range c.Writes {
		if next, ok := m.next[w.Database+"."+w.Table]; !ok || w.WriteId >= next {
			return fmt.Errorf("%s: write id %d of %s.%s was never allocated on DR", c, w.WriteId, w.Database, w.Table)
		}
	}
	return nil
}

// forgetWriteIDs drops table k's write-ID bookkeeping (a reset).
func (m *memMS) forgetWriteIDs(k TableKey) {
	tbl := k.String()
	delete(m.next, tbl)
	for wk := range m.writeIDs {
		if strings.HasPrefix(wk, tbl+"/") {
			delete(m.writeIDs, wk)
			m.forgotten[wk] = true
		}
	}
	for _, wks := range m.open {
		for _, wk := range wks {
			if strings.HasPrefix(wk, tbl+"/") {
				m.forgotten[wk] = true
			}
		}
	}
}

func (m *memMS) applyWriteIDs(a Action) error {
	switch a := a.(type) {
	case SetWriteIDs:
		tbl := a.DB + "." + a.Table
		if next, ok := m.next[tbl]; ok {
			if next != a.HighWaterMark+1 {
				return fmt.Errorf("%s: %s holds another state (next write id %d)", a, tbl, next)
			}
			return nil
		}
		m.next[tbl] = a.HighWaterMark + 1
		for _, id := range a.Invalid {
			m.writeIDs[fmt.Sprintf("%s/%d", tbl, id)] = "aborted"
		}
	case ResetWriteIDs:
		k := tableKey(a.DB, a.Table)
		if m.tables[k] == nil && a.Def == nil {
			return nil
		}
		m.forgetWriteIDs(k)
		m.dropTable(k)
	}
	return nil
}

// writeIDsOf is what the worker reads for scope (executor.writeIDs).
func (m *memMS) writeIDsOf(scope map[TableKey]bool) map[TableKey]TableWriteIDs {
	if len(scope) == 0 {
		return nil
	}
	out := map[TableKey]TableWriteIDs{}
	for tk, full := range scope {
		var tw TableWriteIDs
		if n, ok := m.next[tk.String()]; ok {
			tw.MaxAllocated = n - 1
		}
		if full {
			w := acid.WriteIDs{HighWaterMark: tw.MaxAllocated}
			for wk, st := range m.writeIDs {
				tbl, id, _ := strings.Cut(wk, "/")
				n, _ := strconv.ParseInt(id, 10, 64)
				switch {
				case tbl != tk.String() || n > w.HighWaterMark:
				case st == "open":
					w.Open = append(w.Open, n)
				case st == "aborted":
					w.Aborted = append(w.Aborted, n)
				}
			}
			slices.Sort(w.Open)
			slices.Sort(w.Aborted)
			tw.State = &w
		}
		out[tk] = tw
	}
	return out
}

// ---- transactional tables and their events

// srcACID is a managed transactional table of the source.
func srcACID(db, name string, partKeys ...string) *schemas.Table {
	t := srcTable(db, name, partKeys, "id bigint", "note string")
	t.TableType = "MANAGED_TABLE"
	t.Parameters = map[string]string{"transactional": "true"}
	t.Storage.InputFormat = "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat"
	return t
}

// acidTable is a bootstrap's TABLE record of transactional table t with
// write-ID state w.
func (b *bootstrap) acidTable(t *schemas.Table, stamp int64, w schemas.SnapshotWriteIDs, files ...string) *schemas.Event {
	ev := b.table(t, stamp, files...)
	ev.Snapshot.WriteIDs = &w
	return ev
}

func alloc(id int64, t *schemas.Table, txn, writeID int64) *schemas.Event {
	return srcEvent(id, schemas.EventAllocWriteID, t.Database, t.Name,
		&schemas.WriteIDAllocation{Database: t.Database, Table: t.Name, Allocations: []schemas.TxnWriteID{{TxnID: txn, WriteID: writeID}}})
}

// commit is the COMMIT_TXN of source transaction txn with one write of
// writeID to t (partition part, "" for none) adding files.
func commit(id int64, txn int64, t *schemas.Table, part string, writeID int64, files ...string) *schemas.Event {
	w := schemas.TableWriteID{Database: t.Database, Table: t.Name, WriteID: writeID, Partition: part, Files: files}
	return srcEvent(id, schemas.EventCommitTxn, t.Database, "", &schemas.Transaction{TxnIDs: []int64{txn}, WriteIDs: []schemas.TableWriteID{w}}, files...)
}

func abort(id int64, db string, txn int64) *schemas.Event {
	return srcEvent(id, schemas.EventAbortTxn, db, "", &schemas.Transaction{TxnIDs: []int64{txn}})
}

// delta is a file of write ID w's delta under dir.
func delta(dir string, w int64) string {
	return fmt.Sprintf("%s/delta_%07d_%07d_0000/bucket_00000", dir, w, w)
}

func drACID(t *schemas.Table, last int64) *hms.Table {
	tb := drTable(t, last)
	tb.TableType, tb.OwnerType = "MANAGED_TABLE", hms.PrincipalType_USER
	tb.Parameters = map[string]string{"transactional": "true", drparam.LastID: itoa(last)}
	return tb
}

// ---- the rules

func TestWriteIDScope(t *testing.T) {
	orders := srcACID("sales", "orders")
	db := drDB("sales", 40)
	db.Parameters[openAtCutKey("orders")] = "4,6"
	rep := drState(db, drACID(orders, 20))
	b := newBootstrap("b1", "sales", 40)
	withIDs := b.acidTable(orders, 40, schemas.SnapshotWriteIDs{HighWaterMark: 5})
	k := TableKey{DB: "sales", Name: "orders"}
	for _, c := range []struct {
		name string
		ev   *schemas.Event
		want map[TableKey]bool
	}{
		{"allocation: the next write id", alloc(50, orders, 7, 5), map[TableKey]bool{k: false}},
		{"allocation in another database's table", alloc(50, srcACID("archive", "orders"), 7, 5), nil},
		{"allocation of a table missing on DR", alloc(50, srcACID("sales", "events"), 7, 5), nil},
		{"table record with write ids: the state", withIDs, map[TableKey]bool{k: true}},
		{"table record without", b.table(srcCustomers, 40), nil},
		{"commit of a write open at the cut", commit(50, 7, orders, "", 6), map[TableKey]bool{k: true}},
		{"commit of another write", commit(50, 7, orders, "", 5), nil},
		{"abort", abort(50, "sales", 7), nil},
	} {
		if got := WriteIDScope("sales", c.ev, rep); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestPlanWriteIDs: the decisions of each rule, from what DR holds of the
// table's write IDs.
func TestPlanWriteIDs(t *testing.T) {
	orders := srcACID("sales", "orders")
	ordersP := srcACID("sales", "orders", "dt")
	k := TableKey{DB: "sales", Name: "orders"}
	dir := orders.Location
	b := newBootstrap("b1", "sales", 40)
	begun := func() *hms.Database { return inBootstrap(drDB("sales", 30), "b1", 40, 1) }
	rec := func(w schemas.SnapshotWriteIDs) *schemas.Event {
		b.seq = 1
		return b.acidTable(orders, 42, w, delta(dir, 1), delta(dir, 3))
	}
	w3 := schemas.SnapshotWriteIDs{HighWaterMark: 3, Aborted: []int64{2}}
	w3open := schemas.SnapshotWriteIDs{HighWaterMark: 3, Open: []int64{2}}
	state := func(m int64, open, aborted []int64) map[TableKey]TableWriteIDs {
		return map[TableKey]TableWriteIDs{k: {MaxAllocated: m, State: &acid.WriteIDs{HighWaterMark: m, Open: open, Aborted: aborted}}}
	}
	ours := func(tb *hms.Table) *hms.Table { return ofBootstrap(tb, "b1") }
	markedDB := drDB("sales", 40)
	markedDB.Parameters[openAtCutKey("orders")] = "2"
	progress := "alter database sales"
	prune := "prune files under " + drRoot + "sales.db/orders keeping 2" // (files outside its deltas: none)
	set := func(invalid string) string {
		return "set the write ids of sales.orders: high-water mark 3, invalid " + invalid
	}
	for _, c := range []struct {
		name     string
		ev       *schemas.Event
		state    Replica
		writeIDs map[TableKey]TableWriteIDs
		outcome  Outcome
		reason   Reason
		actions  []string
		check    func(t *testing.T, d Decision)
	}{
		// The allocation guard.
		{name: "allocation at DR's next write id", ev: alloc(50, orders, 7, 4), state: drState(drDB("sales", 40), drACID(orders, 20)),
			writeIDs: state(3, nil, nil), outcome: Apply, actions: []string{"allocate write ids [{7 4}] of sales.orders (policy sales)", progress}},
		{name: "allocation below DR's next write id is a no-op", ev: alloc(50, orders, 7, 3), state: drState(drDB("sales", 40), drACID(orders, 20)),
			writeIDs: state(3, nil, nil), outcome: NoOp, reason: ReasonBelowNextWriteID, actions: []string{progress},
			check: func(t *testing.T, d Decision) {
				if !strings.Contains(d.Detail, "below DR's next write id 4") {
					t.Errorf("detail %q", d.Detail)
				}
			}},
		{name: "allocation of two transactions, one below", ev: srcEvent(50, schemas.EventAllocWriteID, "sales", "orders",
			&schemas.WriteIDAllocation{Database: "sales", Table: "orders", Allocations: []schemas.TxnWriteID{{TxnID: 7, WriteID: 3}, {TxnID: 8, WriteID: 4}}}),
			state: drState(drDB("sales", 40), drACID(orders, 20)), writeIDs: state(3, nil, nil),
			outcome: Apply, actions: []string{"allocate write ids [{8 4}] of sales.orders (policy sales)", progress}},

		// A commit of a write the bootstrap found open.
		{name: "commit of a write open at the cut, aborted on DR, halts", ev: commit(50, 9, orders, "", 2, delta(dir, 2)),
			state: drState(markedDB, drACID(orders, 20)), writeIDs: state(3, nil, []int64{2}), outcome: Halt, reason: ReasonNeedsBootstrap,
			check: func(t *testing.T, d Decision) {
				for _, s := range []string{"write id 2 of sales.orders", "source transaction 9", "hivedr bootstrap -db sales"} {
					if !strings.Contains(d.Detail, s) {
						t.Errorf("detail %q does not name %q", d.Detail, s)
					}
				}
			}},
		{name: "commit of a write open at the cut, aborted on DR under the metastore's rule (no committed row: only 1 read aborted), halts",
			ev: commit(50, 9, orders, "", 2, delta(dir, 2)), state: drState(markedDB, drACID(orders, 20)),
			writeIDs: map[TableKey]TableWriteIDs{k: {MaxAllocated: 2, State: &acid.WriteIDs{HighWaterMark: 1, Aborted: []int64{1}}}},
			outcome:  Halt, reason: ReasonNeedsBootstrap},
		{name: "commit of a write open at the cut, valid on DR since, goes on", ev: commit(50, 9, orders, "", 2, delta(dir, 2)),
			state: drState(markedDB, drACID(orders, 20)), writeIDs: state(3, nil, nil), outcome: Apply,
			actions: []string{"commit replicated transaction 9 (policy sales, 1 writes)", progress}},
		{name: "commit of another write needs no state", ev: commit(50, 9, orders, "", 4, delta(dir, 4)),
			state: drState(markedDB, drACID(orders, 20)), outcome: Apply,
			actions: []string{"commit replicated transaction 9 (policy sales, 1 writes)", progress}},
		{name: "commit of a write open at the cut, state not read", ev: commit(50, 9, orders, "", 2, delta(dir, 2)),
			state: drState(markedDB, drACID(orders, 20)), outcome: Halt, reason: ReasonDecode},

		// A bootstrap's TABLE record.
		{name: "new table: created, its write ids set", ev: rec(w3), state: drState(begun()), writeIDs: state(0, nil, nil),
			outcome: Apply, actions: []string{prune, "create table sales.orders", set("[2]"), progress},
			check: func(t *testing.T, d Decision) {
				if _, ok := d.Actions[3].(AlterDatabase).DB.Parameters[openAtCutKey("orders")]; ok {
					t.Error("open-at-cut list without open write ids")
				}
			}},
		{name: "new table with a write id left open: aborted on DR, listed", ev: rec(w3open), state: drState(begun()), writeIDs: state(0, nil, nil),
			outcome: Apply, actions: []string{prune, "create table sales.orders", set("[2]"), progress},
			check: func(t *testing.T, d Decision) {
				if got := d.Actions[3].(AlterDatabase).DB.Parameters[openAtCutKey("orders")]; got != "2" {
					t.Errorf("open-at-cut list %q, want 2", got)
				}
			}},
		{name: "new table of no write: nothing to set", ev: rec(schemas.SnapshotWriteIDs{}), state: drState(begun()),
			writeIDs: state(0, nil, nil), outcome: Apply, actions: []string{prune, "create table sales.orders", progress}},
		{name: "DR's write ids are the snapshot's: kept", ev: rec(w3open), state: drState(begun(), drACID(orders, 30)),
			writeIDs: state(3, []int64{2}, nil), outcome: Apply, actions: []string{prune, "alter table sales.orders", progress}},
		{name: "DR's write ids behind: the table made anew", ev: rec(w3), state: drState(begun(), drACID(orders, 30)),
			writeIDs: state(2, []int64{2}, nil), outcome: Apply,
			actions: []string{prune, "remove sales.orders with its write-id bookkeeping (data kept)", "create table sales.orders", set("[2]"), progress},
			check: func(t *testing.T, d Decision) {
				if tb := d.Actions[2].(CreateTable).Table; tb.Parameters[drparam.BootstrapNew] != "b1" {
					t.Errorf("remade table not marked new: %v", tb.Parameters)
				}
			}},
		{name: "DR holds valid a write the snapshot has aborted (an earlier table of the name): made anew", ev: rec(w3),
			state: drState(begun(), drACID(orders, 30)), writeIDs: state(3, nil, nil), outcome: Apply,
			actions: []string{prune, "remove sales.orders with its write-id bookkeeping (data kept)", "create table sales.orders", set("[2]"), progress}},
		{name: "DR aborted a write the snapshot has valid: made anew", ev: rec(w3), state: drState(begun(), drACID(orders, 30)),
			writeIDs: state(3, nil, []int64{1, 2}), outcome: Apply,
			actions: []string{prune, "remove sales.orders with its write-id bookkeeping (data kept)", "create table sales.orders", set("[2]"), progress}},
		{name: "a stale state without a table: made anew", ev: rec(w3), state: drState(begun()), writeIDs: state(9, nil, nil),
			outcome: Apply, actions: []string{prune, "remove sales.orders with its write-id bookkeeping (data kept)", "create table sales.orders", set("[2]"), progress}},
		{name: "the table's shape changed: dropped (its write ids with it), created, set", ev: func() *schemas.Event {
			b.seq = 1
			return b.acidTable(ordersP, 42, w3)
		}(), state: drState(begun(), drACID(orders, 30)), writeIDs: state(3, nil, []int64{2}), outcome: Apply,
			actions: []string{"drop table sales.orders", "create table sales.orders", set("[2]"), progress}},
		{name: "re-drive after the create: the write ids set", ev: rec(w3), state: drState(begun(), ours(drACID(orders, 42))),
			writeIDs: state(0, nil, nil), outcome: Apply, actions: []string{set("[2]"), progress}},
		{name: "re-drive half-way through setting them", ev: rec(w3), state: drState(begun(), ours(drACID(orders, 42))),
			writeIDs: state(2, nil, []int64{2}), outcome: Apply, actions: []string{set("[2]"), progress}},
		{name: "re-drive after they were set", ev: rec(w3open), state: drState(begun(), ours(drACID(orders, 42))),
			writeIDs: state(3, nil, []int64{2}), outcome: NoOp, reason: ReasonAlreadyApplied, actions: []string{progress},
			check: func(t *testing.T, d Decision) {
				if got := d.Actions[0].(AlterDatabase).DB.Parameters[openAtCutKey("orders")]; got != "2" {
					t.Errorf("open-at-cut list %q, want 2", got)
				}
			}},
		{name: "re-drive over another state: made anew", ev: rec(w3), state: drState(begun(), ours(drACID(orders, 42))),
			writeIDs: state(7, nil, nil), outcome: Apply,
			actions: []string{prune, "remove sales.orders with its write-id bookkeeping (data kept)", "create table sales.orders", set("[2]"), progress}},
		{name: "DR's write ids not read: a bug, halts", ev: rec(w3), state: drState(begun()), outcome: Halt, reason: ReasonDecode},
		{name: "a table without write ids: as before", ev: func() *schemas.Event { b.seq = 1; return b.table(orders, 42) }(),
			state: drState(begun()), outcome: Apply, actions: []string{"prune files under " + drRoot + "sales.db/orders keeping 0", "create table sales.orders", progress}},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := Input{DB: "sales", Source: "src", Event: c.ev, Replica: c.state, Copies: copied(c.ev), Policy: testPolicy{}, WriteIDs: c.writeIDs}
			d := planChecked(t, in)
			if d.Outcome != c.outcome || (c.reason != "" && d.Reason != c.reason) {
				t.Fatalf("decision %s %s (%s), want %s %s", d.Outcome, d.Reason, d.Detail, c.outcome, c.reason)
			}
			if got := actionNames(d.Actions); !slices.Equal(got, c.actions) && c.outcome != Halt {
				t.Fatalf("actions\n  %q\nwant\n  %q", got, c.actions)
			}
			if c.check != nil {
				c.check(t, d)
			}
		})
	}
}

// TestPlanAcidBootstrapConverges: a bootstrap of two transactional tables
// (one partitioned, with a write ID still open when the tailer gave up
// waiting), then the events after the cut: an allocation and commit the
// snapshot covers, later ones, the abort of the write left open. DR ends
// with the source's write IDs (the open one aborted, as the source's
// ended), and re-drive from any record or a crash after any action ends
// the same.
func TestPlanAcidBootstrapConverges(t *testing.T) {
	orders := srcACID("sales", "orders")
	events := srcACID("sales", "events", "dt")
	p1 := srcPart(events, "2024-01-01")
	b := newBootstrap("b1", "sales", 20)
	topic := chainedTopic([]*schemas.Event{
		createDB(10, "sales"),
		b.begin(),
		b.acidTable(orders, 20, schemas.SnapshotWriteIDs{HighWaterMark: 3, Aborted: []int64{2}}, delta(orders.Location, 1), delta(orders.Location, 3)),
		b.acidTable(events, 20, schemas.SnapshotWriteIDs{HighWaterMark: 2, Open: []int64{2}}),
		b.part(events, p1, 20, delta(p1.Location, 1)),
		b.end(),
		alloc(21, orders, 30, 3), // covered by the snapshot
		commit(22, 30, orders, "", 3, delta(orders.Location, 3)),
		alloc(23, orders, 31, 4),
		commit(24, 31, orders, "", 4, delta(orders.Location, 4)),
		abort(25, "sales", 32), // the write left open
		alloc(26, events, 33, 3),
		commit(27, 33, events, "dt=2024-01-01", 3, delta(p1.Location, 3)),
	})
	ms := checkConverges(t, "sales", topic, nil)
	want := map[string]string{"sales.orders/2": "aborted", "sales.orders/4": "committed", "sales.events/2": "aborted", "sales.events/3": "committed"}
	if fmt.Sprint(ms.writeIDs) != fmt.Sprint(want) || fmt.Sprint(ms.next) != "map[sales.events:4 sales.orders:5]" || len(ms.open) != 0 {
		t.Errorf("write ids %v, next %v, open %v; want %v", ms.writeIDs, ms.next, ms.open, want)
	}
	if got := ms.dbs["sales"].Parameters[openAtCutKey("events")]; got != "2" {
		t.Errorf("events' open-at-cut list %q, want 2", got)
	}
	var files []string
	for f := range ms.files {
		files = append(files, strings.TrimPrefix(f, drRoot))
	}
	slices.Sort(files)
	if fmt.Sprint(files) != "[sales.db/events/dt=2024-01-01/delta_0000001_0000001_0000/bucket_00000 sales.db/events/dt=2024-01-01/delta_0000003_0000003_0000/bucket_00000 "+
		"sales.db/orders/delta_0000001_0000001_0000/bucket_00000 sales.db/orders/delta_0000003_0000003_0000/bucket_00000 sales.db/orders/delta_0000004_0000004_0000/bucket_00000]" {
		t.Errorf("DR files %v", files)
	}
}

// TestPlanAcidRebootstrapConverges: a DR table whose write IDs stopped
// at an open transaction (the events after were lost) is bootstrapped
// again: DR's state is not the snapshot's, so the table is made anew and
// given the snapshot's; the events after the cut then converge it (the
// abort of the transaction DR had open, a covered allocation and commit),
// and so does a re-drive or a crash anywhere.
func TestPlanAcidRebootstrapConverges(t *testing.T) {
	orders := srcACID("sales", "orders")
	b := newBootstrap("b2", "sales", 14)
	topic := chainedTopic([]*schemas.Event{
		createDB(10, "sales"),
		createTable(11, orders),
		alloc(12, orders, 5, 1),
		commit(13, 5, orders, "", 1, delta(orders.Location, 1)),
		alloc(14, orders, 6, 2), // its abort is lost
		b.begin(),
		b.acidTable(orders, 16, schemas.SnapshotWriteIDs{HighWaterMark: 3, Aborted: []int64{2}}, delta(orders.Location, 1), delta(orders.Location, 3)),
		b.end(),
		abort(15, "sales", 6),
		alloc(16, orders, 7, 3),
		commit(17, 7, orders, "", 3, delta(orders.Location, 3)),
		alloc(18, orders, 8, 4),
		commit(19, 8, orders, "", 4, delta(orders.Location, 4)),
	})
	ms := checkConverges(t, "sales", topic, nil)
	want := map[string]string{"sales.orders/2": "aborted", "sales.orders/4": "committed"}
	if fmt.Sprint(ms.writeIDs) != fmt.Sprint(want) || ms.next["sales.orders"] != 5 || len(ms.open) != 0 {
		t.Errorf("write ids %v, next %v, open %v; want %v", ms.writeIDs, ms.next, ms.open, want)
	}
}

// TestPlanAcidDropAndCreate: a transactional table dropped and created
// again under its name starts its write IDs afresh on DR too (its drop
// takes DR's with it), so the allocation guard lets the new one's first
// allocation through.
func TestPlanAcidDropAndCreate(t *testing.T) {
	orders := srcACID("sales", "orders")
	topic := []*schemas.Event{
		createDB(10, "sales"),
		createTable(11, orders),
		alloc(12, orders, 5, 1),
		commit(13, 5, orders, "", 1, delta(orders.Location, 1)),
		alloc(14, orders, 6, 2),
		commit(15, 6, orders, "", 2, delta(orders.Location, 2)),
		dropTable(16, orders),
		createTable(17, orders),
		alloc(18, orders, 7, 1),
		commit(19, 7, orders, "", 1, delta(orders.Location, 1)),
	}
	ms := checkConverges(t, "sales", topic, nil)
	if ms.next["sales.orders"] != 2 || ms.writeIDs["sales.orders/1"] != "committed" || len(ms.open) != 0 {
		t.Errorf("the new table's write ids: next %v, %v, open %v", ms.next, ms.writeIDs, ms.open)
	}
	// The drop prunes the old table's files, the new one's copy kept (its
	// delta_1 has the old one's name and was copied after).
	if got := slices.Collect(maps.Keys(ms.files)); !slices.Equal(got, []string{drPath(delta(orders.Location, 1))}) || ms.files[got[0]] != 19 {
		t.Errorf("DR files %v, want the new table's delta_1 of event 19 alone", ms.files)
	}
}

// TestKeepsReadsTheRulesShape: DR's metastore reads a table whose rows
// are all aborted as "hwm=<lowest> aborted=[<lowest>]", as the source's
// does; the tailer publishes that state made whole (hwm 2, aborted 1 and
// 2), and DR holding it keeps it. A write ID DR holds valid is not kept.
func TestKeepsReadsTheRulesShape(t *testing.T) {
	w := &schemas.SnapshotWriteIDs{HighWaterMark: 2, Aborted: []int64{1, 2}}
	for _, c := range []struct {
		dr   TableWriteIDs
		want bool
	}{
		{TableWriteIDs{MaxAllocated: 2, State: &acid.WriteIDs{HighWaterMark: 1, Aborted: []int64{1}}}, true},
		{TableWriteIDs{MaxAllocated: 2, State: &acid.WriteIDs{HighWaterMark: 2, Aborted: []int64{1, 2}}}, true},
		{TableWriteIDs{MaxAllocated: 2, State: &acid.WriteIDs{HighWaterMark: 2, Aborted: []int64{1}}}, false},
		{TableWriteIDs{MaxAllocated: 1, State: &acid.WriteIDs{HighWaterMark: 1, Aborted: []int64{1}}}, false},
	} {
		if got := keeps(c.dr, w); got != c.want {
			t.Errorf("keeps(DR %d allocated, %s) = %v, want %v", c.dr.MaxAllocated, c.dr.State, got, c.want)
		}
	}
}
