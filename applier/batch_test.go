package applier

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	hms "github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/schemas"
)

func TestRunKey(t *testing.T) {
	other := srcTable("sales", "other", []string{"dt"}, "x int")
	moved := renamedTo(srcOrders, "archive", "orders")
	b := newBootstrap("b1", "sales", 10)
	orders := TableKey{DB: "sales", Name: "orders"}
	for _, c := range []struct {
		name string
		db   string
		ev   *schemas.Event
		key  TableKey
		n    int
		ok   bool
	}{
		{"add of two partitions", "sales", addParts(1, srcOrders, []schemas.Partition{srcP1, srcP2}), orders, 2, true},
		{"alter partition", "sales", alterPart(1, srcOrders, srcP1, partWithParam(srcP1, "k", "v")), orders, 1, true},
		{"truncate partition", "sales", truncatePart(1, srcOrders, srcP1), orders, 1, true},
		{"drop partitions", "sales", dropParts(1, srcOrders, srcP1, srcP2), orders, 2, true},
		{"insert", "sales", insertInto(1, srcOrders, &srcP1), orders, 1, true},
		{"insert overwrite", "sales", insertOverwrite(1, srcOrders, &srcP1), orders, 1, true},
		{"alter table", "sales", alterTable(1, srcOrders, withParam(srcOrders, "k", "v")), orders, 1, true},
		{"truncate table", "sales", truncateTable(1, srcCustomers), TableKey{DB: "sales", Name: "customers"}, 1, true},
		{"another table", "sales", addParts(1, other, []schemas.Partition{srcPart(other, "1")}), TableKey{DB: "sales", Name: "other"}, 1, true},
		{"rename", "sales", alterTable(1, srcOrders, renamedTo(srcOrders, "sales", "o2")), TableKey{}, 0, false},
		{"rename across databases", "archive", alterTable(1, srcOrders, moved), TableKey{}, 0, false},
		{"create table", "sales", createTable(1, srcOrders), TableKey{}, 0, false},
		{"drop table", "sales", dropTable(1, srcOrders), TableKey{}, 0, false},
		{"database event", "sales", alterDB(1, "sales", nil), TableKey{}, 0, false},
		{"column statistics", "sales", srcEvent(1, schemas.EventUpdateTableColStat, "sales", "orders", &schemas.ColumnStats{}), TableKey{}, 0, false},
		{"tailer error", "sales", withErrors(addParts(1, srcOrders, []schemas.Partition{srcP1}), schemas.EventError{Kind: "DECODE", Message: "x"}), TableKey{}, 0, false},
		{"bootstrap record", "sales", b.part(srcOrders, srcP1, 10), TableKey{}, 0, false},
		{"another database's table", "archive", addParts(1, srcOrders, []schemas.Partition{srcP1}), TableKey{}, 0, false},
	} {
		k, n, ok := RunKey(c.db, c.ev)
		if k != c.key || n != c.n || ok != c.ok {
			t.Errorf("%s: RunKey = %v %d %v, want %v %d %v", c.name, k, n, ok, c.key, c.n, c.ok)
		}
	}
}

// runCase plans ev with batch as one run over state, with every file
// copied unless copies says otherwise.
type runCase struct {
	name   string
	ev     *schemas.Event
	batch  []*schemas.Event
	later  []*schemas.Event
	state  Replica
	copies map[string]Copy

	outcome Outcome
	covered int
	results []Reason
	actions []string
	check   func(t *testing.T, d Decision)
}

func TestPlanRun(t *testing.T) {
	p3, p4 := srcPart(srcOrders, "2024-01-03"), srcPart(srcOrders, "2024-01-04")
	p1v2 := partWithParam(srcP1, "k", "v")
	add := func(id int64, p schemas.Partition) *schemas.Event {
		return addParts(id, srcOrders, []schemas.Partition{p}, partFile(p, fmt.Sprint(id)))
	}
	base := func(objs ...any) Replica {
		return drState(append([]any{drDB("sales", 10), drTable(srcOrders, 5)}, objs...)...)
	}
	// made is the prune of a partition an ADD_PARTITION makes: its DR
	// directory to hold the one file the event names (prunes.go).
	made := func(ps ...schemas.Partition) []string {
		var out []string
		for _, p := range ps {
			out = append(out, "prune files under "+drPath(p.Location)+" keeping 1")
		}
		return out
	}
	partOf := func(d Decision, kind string, values string) map[string]string {
		for _, a := range d.Actions {
			var parts []*hms.Partition
			switch a := a.(type) {
			case AddPartitions:
				parts = a.Parts
			case AlterPartitions:
				parts = a.Parts
			}
			if !strings.HasPrefix(a.String(), kind+" ") {
				continue
			}
			for _, p := range parts {
				if strings.Join(p.Values, "/") == values {
					return p.Parameters
				}
			}
		}
		t.Fatalf("no %s of partition %s in %v", kind, values, actionNames(d.Actions))
		return nil
	}
	cases := []runCase{
		{
			name: "adds of one table: one add_partitions, each partition at its event, one watermark",
			ev:   add(11, srcP1), batch: []*schemas.Event{add(12, srcP2), add(13, p3), add(14, p4)},
			state: base(), outcome: Apply, covered: 3,
			results: []Reason{ReasonApplied, ReasonApplied, ReasonApplied, ReasonApplied},
			actions: append(made(srcP1, srcP2, p3, p4), "add partitions sales.orders [2024-01-01] [2024-01-02] [2024-01-03] [2024-01-04]", "alter database sales"),
			check: func(t *testing.T, d Decision) {
				for i, v := range []string{"2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04"} {
					if got := partOf(d, "add", v)[drparam.LastID]; got != itoa(int64(11+i)) {
						t.Errorf("partition %s stamped %s, want %d", v, got, 11+i)
					}
				}
				if w := d.Actions[len(d.Actions)-1].(AlterDatabase); w.DB.Parameters[drparam.LastID] != "14" {
					t.Errorf("watermark %s", w.DB.Parameters[drparam.LastID])
				}
			},
		},
		{
			name: "added, altered and inserted into: added once as the last event left it",
			ev:   add(11, srcP1), batch: []*schemas.Event{alterPart(12, srcOrders, srcP1, p1v2), insertInto(13, srcOrders, &p1v2, partFile(srcP1, "c"))},
			state: base(), outcome: Apply, covered: 2,
			// (The prune keeps the run's later insert's file too.)
			actions: []string{"prune files under " + drPath(srcP1.Location) + " keeping 2", "add partitions sales.orders [2024-01-01]", "alter database sales"},
			results: []Reason{ReasonApplied, ReasonApplied, ReasonApplied},
			check: func(t *testing.T, d Decision) {
				if p := partOf(d, "add", "2024-01-01"); p[drparam.LastID] != "13" || p["k"] != "v" {
					t.Errorf("partition %v", p)
				}
			},
		},
		{
			name: "alters of existing partitions: one alter_partitions",
			ev:   alterPart(11, srcOrders, srcP1, p1v2), batch: []*schemas.Event{alterPart(12, srcOrders, srcP2, partWithParam(srcP2, "k", "w"))},
			state: base(drPart(srcOrders, srcP1, 6), drPart(srcOrders, srcP2, 7)), outcome: Apply, covered: 1,
			results: []Reason{ReasonApplied, ReasonApplied},
			actions: []string{"alter partitions sales.orders [2024-01-01] [2024-01-02]", "alter database sales"},
		},
		{
			name: "files of the third not copied: the first two apply",
			ev:   add(11, srcP1), batch: []*schemas.Event{add(12, srcP2), add(13, p3), add(14, p4)},
			copies: map[string]Copy{"11-0": {Status: schemas.StatusCopied}, "12-0": {Status: schemas.StatusCopied}, "14-0": {Status: schemas.StatusCopied}},
			state:  base(), outcome: Apply, covered: 1, results: []Reason{ReasonApplied, ReasonApplied},
			actions: append(made(srcP1, srcP2), "add partitions sales.orders [2024-01-01] [2024-01-02]", "alter database sales"),
		},
		{
			name: "files of the first not copied: the first waits, alone",
			ev:   add(11, srcP1), batch: []*schemas.Event{add(12, srcP2)},
			copies: map[string]Copy{"12-0": {Status: schemas.StatusCopied}},
			state:  base(), outcome: Wait,
		},
		{
			name: "an event that halts ends the run before it",
			ev:   add(11, srcP1), batch: []*schemas.Event{alterPart(12, srcOrders, srcP2, partWithParam(srcP2, "k", "v")), add(13, p3)},
			state: base(), outcome: Apply, covered: 0,
			actions: append(made(srcP1), "add partitions sales.orders [2024-01-01]", "alter database sales"),
		},
		{
			name: "a drop of a partition the run touched ends it",
			ev:   add(11, srcP1), batch: []*schemas.Event{add(12, srcP2), dropParts(13, srcOrders, srcP1), add(14, p3)},
			state: base(), outcome: Apply, covered: 1, results: []Reason{ReasonApplied, ReasonApplied},
			actions: append(made(srcP1, srcP2), "add partitions sales.orders [2024-01-01] [2024-01-02]", "alter database sales"),
		},
		{
			name: "drops of partitions the run did not touch join it, and a dropped name added again is dropped then added",
			ev:   dropParts(11, srcOrders, srcP1, srcP2), batch: []*schemas.Event{add(12, srcP1), dropParts(13, srcOrders, p3)},
			state: base(drPart(srcOrders, srcP1, 6), drPart(srcOrders, srcP2, 6), drPart(srcOrders, p3, 6)), outcome: Apply, covered: 2,
			results: []Reason{ReasonApplied, ReasonApplied, ReasonApplied},
			actions: append(made(srcP1), "drop partitions sales.orders [[2024-01-01] [2024-01-02] [2024-01-03]]", "add partitions sales.orders [2024-01-01]", "alter database sales"),
			check: func(t *testing.T, d Decision) {
				if dp := d.Actions[1].(DropPartitions); !slices.Equal(dp.Names, []string{"dt=2024-01-01", "dt=2024-01-02", "dt=2024-01-03"}) {
					t.Errorf("drop by names %v", dp.Names)
				}
			},
		},
		{
			name: "an event an operator skips ends the run before it",
			ev:   add(11, srcP1), batch: []*schemas.Event{add(12, srcP2), add(13, p3)},
			state: func() Replica {
				r := base()
				r.Databases["sales"].Parameters[drparam.SkipKey(13)] = "requested by ops"
				return r
			}(),
			outcome: Apply, covered: 1, results: []Reason{ReasonApplied, ReasonApplied},
			actions: append(made(srcP1, srcP2), "add partitions sales.orders [2024-01-01] [2024-01-02]", "alter database sales"),
		},
		{
			name: "a broken chain ends the run before the event",
			ev:   prevID(add(11, srcP1), 10), batch: []*schemas.Event{prevID(add(12, srcP2), 11), prevID(add(14, p3), 13)},
			state: base(), outcome: Apply, covered: 1, results: []Reason{ReasonApplied, ReasonApplied},
			actions: append(made(srcP1, srcP2), "add partitions sales.orders [2024-01-01] [2024-01-02]", "alter database sales"),
		},
		{
			name: "the table's alter comes after its partitions' calls",
			ev:   add(11, srcP1), batch: []*schemas.Event{alterTable(12, srcOrders, withParam(srcOrders, "k", "v")), add(13, srcP2)},
			state: base(), outcome: Apply, covered: 2, results: []Reason{ReasonApplied, ReasonApplied, ReasonApplied},
			actions: append(made(srcP1, srcP2), "add partitions sales.orders [2024-01-01] [2024-01-02]", "alter table sales.orders", "alter database sales"),
		},
		{
			name: "an overwrite prunes first, at its own event",
			ev:   add(11, srcP1), batch: []*schemas.Event{insertOverwrite(12, srcOrders, &srcP1, partFile(srcP1, "d"))},
			state: base(), outcome: Apply, covered: 1, results: []Reason{ReasonApplied, ReasonApplied},
			// (The add's prune keeps the later overwrite's file; the
			// overwrite's removes the add's.)
			actions: []string{"prune files under " + drPath(srcP1.Location) + " keeping 2", "prune files under " + drPath(srcP1.Location) + " keeping 1",
				"add partitions sales.orders [2024-01-01]", "alter database sales"},
			check: func(t *testing.T, d Decision) {
				if pr := d.Actions[1].(PruneFiles); pr.EventID != 12 {
					t.Errorf("prune at event %d", pr.EventID)
				}
			},
		},
		{
			name: "a head that creates a table is planned alone",
			ev:   createTable(11, srcOrders), batch: []*schemas.Event{add(12, srcP1)},
			state: drState(drDB("sales", 10)), outcome: Apply, covered: 0,
			// (The create's prune keeps the later add's file.)
			actions: []string{"prune files under " + drPath(srcOrders.Location) + " keeping 1", "create table sales.orders", "alter database sales"},
		},
		{
			name: "partitions already written are no-ops in the run, counted as such",
			ev:   add(11, srcP1), batch: []*schemas.Event{add(12, srcP2), add(13, p3)},
			state: base(drPart(srcOrders, srcP1, 11), drPart(srcOrders, srcP2, 12)), outcome: Apply, covered: 2,
			results: []Reason{ReasonAlreadyApplied, ReasonAlreadyApplied, ReasonApplied},
			actions: append(made(p3), "add partitions sales.orders [2024-01-03]", "alter database sales"),
		},
		{
			name: "a run wholly written before a crash: a no-op moving the watermark once",
			ev:   add(11, srcP1), batch: []*schemas.Event{add(12, srcP2)},
			state: base(drPart(srcOrders, srcP1, 11), drPart(srcOrders, srcP2, 12)), outcome: NoOp, covered: 1,
			results: []Reason{ReasonAlreadyApplied, ReasonAlreadyApplied},
			actions: []string{"alter database sales"},
		},
		{
			name: "events of other tables of the database join the run: each table's calls in the order first touched, one watermark",
			ev:   add(11, srcP1), batch: []*schemas.Event{insertInto(12, srcCustomers, nil), add(13, srcP2)},
			state: base(drTable(srcCustomers, 5)), outcome: Apply, covered: 2,
			results: []Reason{ReasonApplied, ReasonApplied, ReasonApplied},
			actions: append(made(srcP1, srcP2), "add partitions sales.orders [2024-01-01] [2024-01-02]", "alter table sales.customers", "alter database sales"),
		},
		{
			name: "a drop of a partition another table's event touched does not end the run",
			ev:   insertInto(11, srcCustomers, nil), batch: []*schemas.Event{dropParts(12, srcOrders, srcP1)},
			state: base(drTable(srcCustomers, 5), drPart(srcOrders, srcP1, 5)), outcome: Apply, covered: 1,
			actions: []string{"alter table sales.customers", "drop partitions sales.orders [[2024-01-01]]", "alter database sales"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			copies := c.copies
			if copies == nil {
				copies = map[string]Copy{}
				for _, ev := range append([]*schemas.Event{c.ev}, c.batch...) {
					for k, v := range copied(ev) {
						copies[k] = v
					}
				}
			}
			d := planChecked(t, Input{DB: "sales", Source: "src", Event: c.ev, Batch: c.batch, Replica: c.state, Copies: copies,
				Later: c.later, Policy: testPolicy{}})
			if d.Outcome != c.outcome || d.Covered != c.covered {
				t.Fatalf("%s %s (%s), covers %d; want %s covering %d", d.Outcome, d.Reason, d.Detail, d.Covered, c.outcome, c.covered)
			}
			if c.results != nil && !slices.Equal(d.Results, c.results) {
				t.Errorf("results %v, want %v", d.Results, c.results)
			}
			if c.actions != nil && !slices.Equal(actionNames(d.Actions), c.actions) {
				t.Errorf("actions\n  %v\nwant\n  %v", actionNames(d.Actions), c.actions)
			}
			if c.check != nil {
				c.check(t, d)
			}
		})
	}
}

// TestPlanRunsConverge: a history of long runs on two tables, broken by
// renames (a chain of them), a drop and a create, converges however it is
// re-driven: from every event, from empty, one event at a time, and
// after a crash after any prefix of any step's actions resumed at that
// step or any earlier event (checkConverges). With the watermark written
// once per run, the rename chain A->B->C replayed over objects written
// past the watermark never halts: a run never holds a rename.
func TestPlanRunsConverge(t *testing.T) {
	a := srcTable("sales", "a", []string{"dt"}, "x int")
	b, c := renamedTo(a, "sales", "b"), renamedTo(a, "sales", "c")
	pa := func(i int) schemas.Partition { return srcPart(a, fmt.Sprintf("%02d", i)) }
	pc := func(i int) schemas.Partition { return srcPart(c, fmt.Sprintf("%02d", i)) }
	evs := []*schemas.Event{createDB(10, "sales"), createTable(11, a)}
	id := int64(12)
	next := func() int64 { id++; return id - 1 }
	for i := 1; i <= 5; i++ {
		p := pa(i)
		evs = append(evs, addParts(next(), a, []schemas.Partition{p}, partFile(p, "f")))
	}
	evs = append(evs,
		insertInto(next(), a, ptr(pa(2)), partFile(pa(2), "g")),
		alterPart(next(), a, pa(3), partWithParam(pa(3), "k", "v")),
		insertOverwrite(next(), a, ptr(pa(4)), partFile(pa(4), "h")),
		dropParts(next(), a, pa(5)),
		alterTable(next(), a, b),
		alterTable(next(), b, c),
		addParts(next(), c, []schemas.Partition{pc(6), pc(7)}, partFile(pc(6), "i"), partFile(pc(7), "j")),
		dropParts(next(), c, pc(1)),
		alterTable(next(), c, withParam(c, "k", "v")),
		addParts(next(), c, []schemas.Partition{pc(1)}, partFile(pc(1), "k")),
		truncatePart(next(), c, pc(6)),
		createTable(next(), srcCustomers),
		insertInto(next(), srcCustomers, nil, srcCustomers.Location+"/x"),
		truncateTable(next(), srcCustomers),
		insertInto(next(), srcCustomers, nil, srcCustomers.Location+"/y"),
		alterTable(next(), srcCustomers, withParam(srcCustomers, "k", "v")),
	)
	ms := checkConverges(t, "sales", evs, nil)
	var parts []string
	for k, p := range ms.parts {
		parts = append(parts, k.Name+"/"+k.Values+"@"+p.Parameters[drparam.LastID])
	}
	slices.Sort(parts)
	want := []string{"c/01@26", "c/02@17", "c/03@18", "c/04@19", "c/06@27", "c/07@23"}
	if !slices.Equal(parts, want) {
		t.Errorf("partitions %v, want %v", parts, want)
	}

	// The runs the worker made: fewer plans than events.
	w := &seqWorker{db: "sales", events: evs}
	got := newMemMS()
	got.copyAhead(evs, nil)
	var plans int
	for w.pos < len(evs) {
		stepOnce(t, got, w, nil, testPolicy{})
		plans++
	}
	if plans >= len(evs)-6 {
		t.Errorf("%d plans for %d events: the runs did not form", plans, len(evs))
	}
	t.Logf("%d events in %d plans", len(evs), plans)
}

// TestPlanRunsOfSeveralTablesConverge: a load that interleaves three
// tables of one database (adds, inserts, an insert overwrite, alters of a
// partition and of a table, drops, one of a partition another table's
// event touched) forms runs across the tables, and converges however it
// is re-driven, a crash after any prefix of any run's actions included
// (checkConverges): each table's part of a run is written as a one-table
// run would be.
func TestPlanRunsOfSeveralTablesConverge(t *testing.T) {
	a := srcTable("sales", "a", []string{"dt"}, "x int")
	b := srcTable("sales", "b", []string{"dt"}, "y string")
	evs := []*schemas.Event{createDB(10, "sales"), createTable(11, a), createTable(12, b), createTable(13, srcCustomers)}
	id := int64(14)
	next := func() int64 { id++; return id - 1 }
	pt := func(tb *schemas.Table, i int) schemas.Partition { return srcPart(tb, fmt.Sprintf("%02d", i)) }
	for i := 1; i <= 4; i++ {
		evs = append(evs,
			addParts(next(), a, []schemas.Partition{pt(a, i)}, partFile(pt(a, i), "f")),
			addParts(next(), b, []schemas.Partition{pt(b, i)}, partFile(pt(b, i), "f")),
			insertInto(next(), srcCustomers, nil, srcCustomers.Location+fmt.Sprintf("/c%d", i)))
	}
	evs = append(evs,
		insertInto(next(), a, ptr(pt(a, 1)), partFile(pt(a, 1), "g")),
		dropParts(next(), b, pt(b, 2)),
		alterPart(next(), a, pt(a, 2), partWithParam(pt(a, 2), "k", "v")),
		insertOverwrite(next(), b, ptr(pt(b, 3)), partFile(pt(b, 3), "h")),
		alterTable(next(), srcCustomers, withParam(srcCustomers, "k", "v")),
		dropParts(next(), a, pt(a, 4)),
		addParts(next(), b, []schemas.Partition{pt(b, 2)}, partFile(pt(b, 2), "i")),
		insertInto(next(), srcCustomers, nil, srcCustomers.Location+"/c9"),
	)
	ms := checkConverges(t, "sales", evs, nil)
	var parts []string
	for k, p := range ms.parts {
		parts = append(parts, k.Name+"/"+k.Values+"@"+p.Parameters[drparam.LastID])
	}
	slices.Sort(parts)
	want := []string{"a/01@26", "a/02@28", "a/03@20", "b/01@15", "b/02@32", "b/03@29", "b/04@24"}
	if !slices.Equal(parts, want) {
		t.Errorf("partitions %v, want %v", parts, want)
	}

	w := &seqWorker{db: "sales", events: evs}
	got := newMemMS()
	got.copyAhead(evs, nil)
	var plans int
	for w.pos < len(evs) {
		stepOnce(t, got, w, nil, testPolicy{})
		plans++
	}
	// The creates are plans of their own; the rest is one run, but for
	// the drop of a.04, which an earlier event of the run touched.
	if plans > 4+2 {
		t.Errorf("%d plans for %d events: the runs across tables did not form", plans, len(evs))
	}
	t.Logf("%d events in %d plans", len(evs), plans)
}

func ptr[T any](v T) *T { return &v }

// TestPlanRunsAroundCrossDatabaseRename: both databases' workers have
// runs of events before and after a rename across them. In every
// interleaving of single steps and of crashes part way through a step
// (a run's actions, its watermark last), the handshake holds: the rename
// lands in both orders, and every schedule ends in the same replica.
func TestPlanRunsAroundCrossDatabaseRename(t *testing.T) {
	moved := renamedTo(srcOrders, "archive", "orders")
	rename := alterTable(20, srcOrders, moved)
	other := srcTable("archive", "other", []string{"dt"}, "y int")
	o1, o2 := srcPart(other, "1"), srcPart(other, "2")
	m5 := srcPart(moved, "2024-01-05")
	sales := []*schemas.Event{
		createDB(10, "sales"), createTable(12, srcOrders),
		addParts(14, srcOrders, []schemas.Partition{srcP1}, partFile(srcP1, "a")),
		addParts(15, srcOrders, []schemas.Partition{srcP2}, partFile(srcP2, "b")),
		alterPart(17, srcOrders, srcP1, partWithParam(srcP1, "k", "v")),
		rename,
	}
	archive := []*schemas.Event{
		createDB(11, "archive"), createTable(13, other),
		addParts(16, other, []schemas.Partition{o1}),
		addParts(18, other, []schemas.Partition{o2}),
		rename,
		addParts(21, moved, []schemas.Partition{m5}),
		insertInto(22, moved, &m5, partFile(m5, "c")),
	}
	check := func(t *testing.T, what string, ms *memMS) {
		t.Helper()
		if len(ms.tables) != 2 || ms.tables[TableKey{DB: "archive", Name: "orders"}] == nil || len(ms.parts) != 5 {
			t.Fatalf("%s:\n%s", what, ms.dump())
		}
		if p := ms.parts[PartKey{TableKey: TableKey{DB: "archive", Name: "orders"}, Values: "2024-01-01"}]; p == nil || p.Parameters["k"] != "v" {
			t.Errorf("%s: the renamed table's altered partition: %v", what, p)
		}
		if ms.dbs["sales"].Parameters[drparam.LastID] != "20" || ms.dbs["archive"].Parameters[drparam.LastID] != "22" {
			t.Errorf("%s: watermarks %s %s", what, ms.dbs["sales"].Parameters[drparam.LastID], ms.dbs["archive"].Parameters[drparam.LastID])
		}
	}
	ms := newMemMS()
	ms.copyAhead(append(sales, archive...), nil)
	final := everyInterleaving(t, ms, []*seqWorker{{db: "sales", events: sales}, {db: "archive", events: archive}}, nil, testPolicy{})
	check(t, "every interleaving", final)

	// The same, one event at a time, ends in the same replica.
	one := newMemMS()
	one.copyAhead(append(sales, archive...), nil)
	runAll(t, one, []*seqWorker{{db: "sales", events: sales, batch: 1}, {db: "archive", events: archive, batch: 1}}, nil, testPolicy{})
	if d := diffStates(final.dump(), one.dump()); d != "" {
		t.Errorf("one event at a time ends elsewhere:\n%s", d)
	}
}
