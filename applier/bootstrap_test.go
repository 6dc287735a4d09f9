package applier

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	hms "github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/internal/drparam"
	hivehms "github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/schemas"
)

// ---- a bootstrap's records, as the tailer publishes them

// bootstrap builds the records of one bootstrap of db at cut N: seq from
// 1 (BEGIN), copy task IDs <N>-s<seq>-<i>, the counts END carries.
type bootstrap struct {
	id       string
	db       string
	cut      int64
	tables   []string // a table-scoped bootstrap's
	withData bool
	seq      int64
	nTables  int64
	nParts   int64
	nFiles   int64
}

func newBootstrap(id, db string, cut int64, tables ...string) *bootstrap {
	return &bootstrap{id: id, db: db, cut: cut, tables: tables, withData: true}
}

func (b *bootstrap) record(typ schemas.EventType, table string, payload schemas.Payload, stamp int64, files ...string) *schemas.Event {
	b.seq++
	ev := &schemas.Event{EventID: b.cut, EventType: typ, Database: b.db, Table: table, Databases: []string{b.db},
		MessageFormat: "hivedr", Payload: payload, Snapshot: &schemas.SnapshotInfo{
			BootstrapID: b.id, CutEventID: b.cut, StampEventID: stamp, Seq: b.seq, Tables: b.tables, WithData: b.withData, Reason: "requested"}}
	for i, f := range files {
		ev.Files = append(ev.Files, schemas.FileRef{URI: f, TaskID: fmt.Sprintf("%d-s%d-%d", b.cut, b.seq, i)})
	}
	b.nFiles += int64(len(files))
	return ev
}

func (b *bootstrap) begin() *schemas.Event {
	src := createDB(b.cut, b.db).Payload.(*schemas.DatabaseChange).After
	return b.record(schemas.EventSnapshotBegin, "", &schemas.DatabaseChange{After: src}, 0)
}

func (b *bootstrap) table(t *schemas.Table, stamp int64, files ...string) *schemas.Event {
	b.nTables++
	return b.record(schemas.EventSnapshotTable, t.Name, &schemas.TableChange{After: t}, stamp, files...)
}

func (b *bootstrap) part(t *schemas.Table, p schemas.Partition, stamp int64, files ...string) *schemas.Event {
	b.nParts++
	return b.record(schemas.EventSnapshotPartition, t.Name, &schemas.PartitionChange{Table: t, After: []schemas.Partition{p}}, stamp, files...)
}

func (b *bootstrap) end() *schemas.Event {
	ev := b.record(schemas.EventSnapshotEnd, "", nil, 0)
	ev.Snapshot.TableCount, ev.Snapshot.PartitionCount, ev.Snapshot.FileCount = b.nTables, b.nParts, b.nFiles
	return ev
}

func discontinuity(s int64, db string) *schemas.Event {
	return &schemas.Event{EventID: s, EventType: schemas.EventDiscontinuity, Database: db, Databases: []string{db},
		MessageFormat: "hivedr", Snapshot: &schemas.SnapshotInfo{BootstrapID: "", CutEventID: s, Reason: "discontinuity"}}
}

// ---- DR objects in a bootstrap

// inBootstrap is a DR database with bootstrap id in progress at cut, its
// records handled up to seq.
func inBootstrap(db *hms.Database, id string, cut, seq int64) *hms.Database {
	db.Parameters[drparam.BootstrapID] = id
	db.Parameters[drparam.BootstrapState] = drparam.SnapshotState(cut)
	db.Parameters[drparam.BootstrapApplied] = drparam.FormatProgress(drparam.Progress{Seq: seq})
	return db
}

// ofBootstrap is a DR table or partition's parameters marked as written
// by bootstrap id.
func ofBootstrap[T *hms.Table | *hms.Partition](o T, id string) T {
	switch o := any(o).(type) {
	case *hms.Table:
		o.Parameters[drparam.BootstrapID] = id
	case *hms.Partition:
		o.Parameters[drparam.BootstrapID] = id
	}
	return o
}

// ---- the invariants of a bootstrap record's decision

// checkSnapshotDecision is planChecked for a bootstrap's records: every
// table and partition written is of the bootstrap and stamped with its
// record's stamp (or, claimed, keeps a newer one), and on the DR cluster;
// a prune keeps only DR files and is at the stamp; the database's
// repl.last.id moves only at END, to the cut, with the bootstrap's keys
// gone and the bootstrap named done; BEGIN marks the database and keeps
// its position; a no-op writes only the database's progress.
func checkSnapshotDecision(t *testing.T, ctx string, in Input, d Decision) {
	t.Helper()
	ev := in.Event
	s := ev.Snapshot
	db := strings.ToLower(in.DB)
	cur := in.Replica.Databases[db]
	stamps := map[string]int64{} // partition values → its record's stamp
	for _, r := range append([]*schemas.Event{ev}, in.Batch...) {
		if c, ok := r.Payload.(*schemas.PartitionChange); ok {
			for _, p := range c.After {
				stamps[strings.Join(p.Values, "/")] = snapStamp(r)
			}
		}
	}
	stamped := func(what string, params map[string]string, want int64) {
		got := stamp(params)
		if params[drparam.BootstrapID] != s.BootstrapID {
			t.Errorf("%s: %s has %s=%q, want %s", ctx, what, drparam.BootstrapID, params[drparam.BootstrapID], s.BootstrapID)
		}
		if got < want || (got > want && params[drparam.BootstrapNew] != "") {
			t.Errorf("%s: %s at event %d, want the stamp %d (or a newer state kept)", ctx, what, got, want)
		}
	}
	keepsPosition := func(a AlterDatabase) {
		if cur == nil || a.DB.Parameters[drparam.LastID] != cur.Parameters[drparam.LastID] {
			t.Errorf("%s: %s moves %s from %v to %q", ctx, a, drparam.LastID, cur, a.DB.Parameters[drparam.LastID])
		}
		if a.DB.Parameters[drparam.Target] != drparam.TargetMark(in.Source) || a.DB.Parameters[drparam.Halted] != "" {
			t.Errorf("%s: %s parameters %v", ctx, a, a.DB.Parameters)
		}
	}
	for i, a := range d.Actions {
		switch a := a.(type) {
		case CreateDatabase:
			if ev.EventType != schemas.EventSnapshotBegin || cur != nil {
				t.Errorf("%s: %s", ctx, a)
			}
			p := a.DB.Parameters
			if _, ok := p[drparam.LastID]; ok || p[drparam.BootstrapID] != s.BootstrapID || p[drparam.BootstrapNew] != s.BootstrapID ||
				p[drparam.Target] != drparam.TargetMark(in.Source) || !isDR(a.DB.LocationUri) {
				t.Errorf("%s: %s parameters %v", ctx, a, p)
			}
		case AlterDatabase:
			if a.Name != db || a.DB.Name != db {
				t.Errorf("%s: %s of another database", ctx, a)
			}
			switch {
			case ev.EventType == schemas.EventSnapshotEnd:
				p := a.DB.Parameters
				if i != len(d.Actions)-1 || p[drparam.LastID] != itoa(ev.EventID) || p[drparam.BootstrapDone] != s.BootstrapID {
					t.Errorf("%s: END's watermark %v (action %d of %d)", ctx, p, i+1, len(d.Actions))
				}
				for _, k := range []string{drparam.BootstrapID, drparam.BootstrapState, drparam.BootstrapApplied, drparam.BootstrapNew, drparam.Halted} {
					if _, ok := p[k]; ok {
						t.Errorf("%s: END leaves %s", ctx, k)
					}
				}
			case ev.EventType == schemas.EventSnapshotBegin:
				keepsPosition(a)
				if a.DB.Parameters[drparam.BootstrapID] != s.BootstrapID || a.DB.Parameters[drparam.BootstrapState] != drparam.SnapshotState(ev.EventID) {
					t.Errorf("%s: BEGIN's parameters %v", ctx, a.DB.Parameters)
				}
			default: // the progress, last
				keepsPosition(a)
				prog, err := drparam.ParseProgress(a.DB.Parameters[drparam.BootstrapApplied])
				last := ev
				if len(in.Batch) > 0 {
					last = in.Batch[len(in.Batch)-1]
				}
				if err != nil || prog.Seq != last.Snapshot.Seq || i != len(d.Actions)-1 {
					t.Errorf("%s: progress %q (%v), want it at record %d, last", ctx, a.DB.Parameters[drparam.BootstrapApplied], err, last.Snapshot.Seq)
				}
			}
		case CreateTable:
			stamped(a.String(), a.Table.Parameters, snapStamp(ev))
			onDRCheck(t, ctx, a.String(), a.Table.Sd.Location)
		case AlterTable:
			stamped(a.String(), a.Table.Parameters, snapStamp(ev))
			onDRCheck(t, ctx, a.String(), a.Table.Sd.Location)
			if a.Table.DbName != a.DB || a.Table.TableName != a.Name {
				t.Errorf("%s: a bootstrap renames: %s", ctx, a)
			}
		case AddPartitions:
			for _, p := range a.Parts {
				stamped(a.String(), p.Parameters, stamps[strings.Join(p.Values, "/")])
				onDRCheck(t, ctx, a.String(), p.Sd.Location)
			}
		case AlterPartitions:
			for _, p := range a.Parts {
				stamped(a.String(), p.Parameters, stamps[strings.Join(p.Values, "/")])
				onDRCheck(t, ctx, a.String(), p.Sd.Location)
			}
		case PruneFiles:
			onDRCheck(t, ctx, a.String(), a.Dir)
			for _, k := range a.Keep {
				onDRCheck(t, ctx, a.String(), k)
			}
			ok := a.EventID == snapStamp(ev)
			for _, h := range stamps {
				ok = ok || a.EventID == h
			}
			if !ok {
				t.Errorf("%s: %s at event %d, not a record's stamp", ctx, a, a.EventID)
			}
		case DropTable, DropPartitions:
			if ev.EventType != schemas.EventSnapshotEnd && ev.EventType != schemas.EventSnapshotTable {
				t.Errorf("%s: %s", ctx, a)
			}
		case SetWriteIDs, ResetWriteIDs:
			if ev.EventType != schemas.EventSnapshotTable || s.WriteIDs == nil {
				t.Errorf("%s: %s on a record without write ids", ctx, a)
			}
		default:
			t.Errorf("%s: a bootstrap record runs %s", ctx, a)
		}
	}
	if d.Outcome == NoOp {
		for _, a := range d.Actions {
			if _, ok := a.(AlterDatabase); !ok {
				t.Errorf("%s: a no-op runs %s", ctx, a)
			}
		}
	}
}

func onDRCheck(t *testing.T, ctx, what, loc string) {
	t.Helper()
	if !isDR(loc) {
		t.Errorf("%s: %s location %s is not on the DR cluster", ctx, what, loc)
	}
}

// inventory is what the executor's inventory reads of m (the same rules:
// tables of the scope with their bootstrap, stale partitions of the
// bootstrap's tables it did not create).
func (m *memMS) inventory(db, id string, tables []string, all bool) *Inventory {
	inv := &Inventory{Tables: map[string]string{}, Stale: map[string][]StalePartition{}}
	if all {
		for k := range m.tables {
			if k.DB == db {
				tables = append(tables, k.Name)
			}
		}
	}
	for _, n := range tables {
		tk := TableKey{DB: db, Name: n}
		tb := m.tables[tk]
		if tb == nil {
			continue
		}
		inv.Tables[n] = tb.Parameters[drparam.BootstrapID]
		if tb.Parameters[drparam.BootstrapID] != id || tb.Parameters[drparam.BootstrapNew] == id || len(tb.PartitionKeys) == 0 {
			continue
		}
		var keys []PartKey
		for pk, p := range m.parts {
			if pk.TableKey == tk && p.Parameters[drparam.BootstrapID] != id {
				keys = append(keys, pk)
			}
		}
		sort.Slice(keys, func(i, j int) bool { return keys[i].Values < keys[j].Values })
		for _, pk := range keys {
			inv.Stale[n] = append(inv.Stale[n], StalePartition{Name: hivehms.PartitionName(tb.PartitionKeys, m.parts[pk].Values), Values: m.parts[pk].Values})
		}
	}
	return inv
}

// ---- single decisions

func TestPlanBootstrap(t *testing.T) {
	ordersV2 := srcTable("sales", "orders", []string{"region"}, "id bigint")
	ext := withParam(srcCustomers, "x", "y") // external (srcTable's are)
	p3 := srcPart(srcOrders, "2024-01-03")
	gone := func(task string) map[string]Copy {
		return map[string]Copy{task: {Status: schemas.StatusSourceGone, Error: "file not found"}}
	}
	type bcase struct {
		planCase
		inv *Inventory
	}
	// A bootstrap b1 of sales at cut 100; its BEGIN is record 1.
	b := func() *bootstrap { return newBootstrap("b1", "sales", 100) }
	at := func(seq int64) *bootstrap { bb := b(); bb.seq = seq; return bb } // the next record is seq+1
	applying := func(last, seq int64) *hms.Database { return inBootstrap(drDB("sales", last), "b1", 100, seq) }
	userDB := &hms.Database{Name: "sales", Parameters: map[string]string{"owner.team": "users"}}
	done := func(last int64, id string) *hms.Database {
		db := drDB("sales", last)
		db.Parameters[drparam.BootstrapDone] = id
		return db
	}
	customersFiles := []string{srcCustomers.Location + "/000000_0", srcCustomers.Location + "/000001_0"}

	// goneP2 is a batch of orders' three partitions whose second's file
	// ended SOURCE_GONE, with later on the topic: all three written.
	goneP2 := func(name string, later ...*schemas.Event) bcase {
		return bcase{planCase: planCase{name: name, ev: at(2).part(srcOrders, srcP1, 106, partFile(srcP1, "a")),
			state: drState(applying(40, 2), ofBootstrap(drTable(srcOrders, 105), "b1")),
			copies: map[string]Copy{"100-s3-0": {Status: schemas.StatusCopied},
				"100-s4-0": {Status: schemas.StatusSourceGone, Error: "file not found"}, "100-s5-0": {Status: schemas.StatusCopied}},
			later: later, outcome: Apply, actions: []string{"prune files under " + drRoot + "sales.db/orders/dt=2024-01-01 keeping 1",
				"prune files under " + drRoot + "sales.db/orders/dt=2024-01-02 keeping 1",
				"prune files under " + drRoot + "sales.db/orders/dt=2024-01-03 keeping 1",
				"add partitions sales.orders [2024-01-01] [2024-01-02] [2024-01-03]", "alter database sales"},
			check: func(t *testing.T, d Decision) {
				if !strings.Contains(d.Detail, "without 1 file(s) gone") {
					t.Errorf("detail %q", d.Detail)
				}
			}}}
	}
	cases := []bcase{
		// BEGIN.
		{planCase: planCase{name: "BEGIN creates the DR database", ev: b().begin(), state: drState(),
			outcome: Apply, actions: []string{"create database sales"},
			check: func(t *testing.T, d Decision) {
				db := d.Actions[0].(CreateDatabase).DB
				if db.Parameters[drparam.BootstrapState] != "snapshot 100" || db.Parameters["owner.team"] != "sales" ||
					db.Parameters[drparam.BootstrapApplied] != "seq=1 tables=0 partitions=0 files=0" || db.LocationUri != drRoot+"sales.db" {
					t.Errorf("database %s", js(db))
				}
			}}},
		{planCase: planCase{name: "BEGIN updates an existing replica, keeping its position", ev: b().begin(),
			state: func() Replica {
				db := drDB("sales", 40)
				db.Parameters["owner.team"] = "old"
				db.Parameters[drparam.SkipKey(33)] = "requested by ops"
				db.Parameters[drparam.Halted] = "event 41 ...: chain_broken: ..."
				return drState(db)
			}(),
			outcome: Apply, actions: []string{"alter database sales"},
			check: func(t *testing.T, d Decision) {
				p := d.Actions[0].(AlterDatabase).DB.Parameters
				if p[drparam.LastID] != "40" || p["owner.team"] != "sales" || p[drparam.SkipKey(33)] == "" || p[drparam.BootstrapNew] != "" {
					t.Errorf("parameters %v", p)
				}
			}}},
		{planCase: planCase{name: "BEGIN on a user's database refuses it", ev: b().begin(), state: drState(userDB),
			outcome: Halt, reason: ReasonNotAReplica}},
		{planCase: planCase{name: "BEGIN on another pipeline's replica refuses it", ev: b().begin(),
			state:   drState(&hms.Database{Name: "sales", Parameters: map[string]string{drparam.Target: "hivedr:other", drparam.LastID: "10"}}),
			outcome: Halt, reason: ReasonNotAReplica}},
		{planCase: planCase{name: "BEGIN of a bootstrap applied (re-drive)", ev: b().begin(), state: drState(done(100, "b1")),
			outcome: NoOp, reason: ReasonAlreadyApplied}},
		{planCase: planCase{name: "BEGIN of a bootstrap the database moved past", ev: b().begin(), state: drState(done(130, "b2")),
			outcome: NoOp, reason: ReasonAlreadyApplied}},
		{planCase: planCase{name: "BEGIN of a quiet database already at the cut", ev: b().begin(), state: drState(done(100, "b0")),
			outcome: Apply, actions: []string{"alter database sales"}}},
		{planCase: planCase{name: "BEGIN at the cut ignores a skip of the event of that ID", ev: b().begin(), state: drState(drDB("sales", 100)),
			skip: true, outcome: Apply, actions: []string{"alter database sales"}}},
		{planCase: planCase{name: "BEGIN supersedes a bootstrap that did not end", ev: b().begin(),
			state: func() Replica {
				db := inBootstrap(drDB("sales", 40), "b0", 90, 7)
				db.Parameters[drparam.BootstrapNew] = "b0"
				return drState(db)
			}(),
			outcome: Apply, actions: []string{"alter database sales"},
			check: func(t *testing.T, d Decision) {
				p := d.Actions[0].(AlterDatabase).DB.Parameters
				if !strings.Contains(d.Detail, "b0") || p[drparam.BootstrapNew] != "" || p[drparam.BootstrapApplied] != "seq=1 tables=0 partitions=0 files=0" {
					t.Errorf("detail %q, parameters %v", d.Detail, p)
				}
			}}},
		{planCase: planCase{name: "BEGIN applied again keeps what it created", ev: b().begin(),
			state: func() Replica {
				db := applying(0, 40)
				delete(db.Parameters, drparam.LastID)
				db.Parameters[drparam.BootstrapNew] = "b1"
				return drState(db)
			}(),
			outcome: Apply, actions: []string{"alter database sales"},
			check: func(t *testing.T, d Decision) {
				if p := d.Actions[0].(AlterDatabase).DB.Parameters; p[drparam.BootstrapNew] != "b1" {
					t.Errorf("parameters %v", p)
				}
			}}},
		{planCase: planCase{name: "BEGIN outside the roots", ev: func() *schemas.Event {
			ev := b().begin()
			ev.Payload.(*schemas.DatabaseChange).After.Location = "s3a://elsewhere/sales.db"
			return ev
		}(), state: drState(), outcome: Halt, reason: ReasonPathOutsideRoots}},

		// TABLE.
		{planCase: planCase{name: "TABLE creates the table, pruning its DR directory to the record's files",
			ev: at(1).table(srcCustomers, 105, customersFiles...), state: drState(applying(40, 1)),
			outcome: Apply, actions: []string{"prune files under " + drRoot + "sales.db/customers keeping 2", "create table sales.customers", "alter database sales"},
			check: func(t *testing.T, d Decision) {
				tb := d.Actions[1].(CreateTable).Table
				if tb.Parameters[drparam.LastID] != "105" || tb.Parameters[drparam.BootstrapNew] != "b1" {
					t.Errorf("table %s", js(tb.Parameters))
				}
				pr := d.Actions[0].(PruneFiles)
				if pr.EventID != 105 || pr.Keep[0] != drRoot+"sales.db/customers/000000_0" {
					t.Errorf("prune %+v", pr)
				}
				if !strings.HasSuffix(pr.Source, "sales.db/customers") || strings.HasPrefix(pr.Source, drRoot) {
					t.Errorf("prune's source directory %q, want the source table's location (a file a later event copied is kept)", pr.Source)
				}
				if p := d.Actions[2].(AlterDatabase).DB.Parameters[drparam.BootstrapApplied]; p != "seq=2 tables=1 partitions=0 files=2" {
					t.Errorf("progress %q", p)
				}
			}}},
		// A catch-up event at or before the record's stamp is a no-op on
		// the table (the snapshot holds its outcome), so the file it names
		// is no later copy: a stale DR file of that name goes. Found by the
		// soak after a purge repair: an old 000000_0_copy_2 outlived the
		// bootstrap because a held-back INSERT (before the stamp) named it.
		{planCase: planCase{name: "TABLE's prune keeps a later event's file, not a catch-up event's it covers",
			ev: at(1).table(srcCustomers, 105, customersFiles...), state: drState(applying(40, 1)),
			later: []*schemas.Event{
				insertInto(103, srcCustomers, nil, srcCustomers.Location+"/000000_0_copy_2"),
				insertInto(110, srcCustomers, nil, srcCustomers.Location+"/000000_0_copy_3"),
			},
			outcome: Apply, actions: []string{"prune files under " + drRoot + "sales.db/customers keeping 3", "create table sales.customers", "alter database sales"},
			check: func(t *testing.T, d Decision) {
				pr := d.Actions[0].(PruneFiles)
				want := []string{drRoot + "sales.db/customers/000000_0", drRoot + "sales.db/customers/000000_0_copy_3", drRoot + "sales.db/customers/000001_0"}
				if !slices.Equal(pr.Keep, want) {
					t.Errorf("the prune keeps %q, want %q", pr.Keep, want)
				}
			}}},
		{planCase: planCase{name: "TABLE replaces an older table", ev: at(1).table(srcCustomers, 105, customersFiles...),
			state:   drState(applying(40, 1), drTable(srcCustomers, 30)),
			outcome: Apply, actions: []string{"prune files under " + drRoot + "sales.db/customers keeping 2", "alter table sales.customers", "alter database sales"},
			check: func(t *testing.T, d Decision) {
				if p := d.Actions[1].(AlterTable).Table.Parameters; p[drparam.BootstrapNew] != "" {
					t.Errorf("an altered table marked new: %v", p)
				}
			}}},
		{planCase: planCase{name: "TABLE of a partitioned table prunes nothing", ev: at(1).table(srcOrders, 105),
			state:   drState(applying(40, 1), drTable(srcOrders, 30)),
			outcome: Apply, actions: []string{"alter table sales.orders", "alter database sales"}}},
		{planCase: planCase{name: "TABLE whose partition keys changed is made anew", ev: at(1).table(ordersV2, 105),
			state:   drState(applying(40, 1), drTable(srcOrders, 30), drPart(srcOrders, srcP1, 30)),
			outcome: Apply, actions: []string{"drop table sales.orders", "create table sales.orders", "alter database sales"}}},
		{planCase: planCase{name: "TABLE: DR newer than the snapshot keeps it, claimed", ev: at(1).table(srcCustomers, 105, customersFiles...),
			state:   drState(applying(40, 1), drTable(srcCustomers, 120)),
			outcome: Apply, actions: []string{"alter table sales.customers", "alter database sales"},
			check: func(t *testing.T, d Decision) {
				if p := d.Actions[0].(AlterTable).Table.Parameters; p[drparam.LastID] != "120" || p[drparam.BootstrapID] != "b1" {
					t.Errorf("parameters %v", p)
				}
			}}},
		{planCase: planCase{name: "TABLE already applied (crash before the progress)", ev: at(1).table(srcCustomers, 105, customersFiles...),
			state:   drState(applying(40, 1), ofBootstrap(drTable(srcCustomers, 105), "b1")),
			outcome: NoOp, reason: ReasonAlreadyApplied, actions: []string{"alter database sales"}}},
		{planCase: planCase{name: "TABLE already applied and counted (re-drive)", ev: at(1).table(srcCustomers, 105, customersFiles...),
			state:   drState(applying(40, 9), ofBootstrap(drTable(srcCustomers, 105), "b1")),
			outcome: NoOp, reason: ReasonAlreadyApplied}},
		{planCase: planCase{name: "TABLE waits for its files", ev: at(1).table(srcCustomers, 105, customersFiles...),
			state: drState(applying(40, 1)), copies: map[string]Copy{"100-s2-1": {Status: schemas.StatusCopied}},
			outcome: Wait, reason: ReasonWaitingForFiles, waitTasks: []string{"100-s2-0"}}},
		{planCase: planCase{name: "TABLE: a file gone, nothing in view removes the table: written without it", ev: at(1).table(srcCustomers, 105, customersFiles...),
			state: drState(applying(40, 1)), copies: map[string]Copy{"100-s2-0": {Status: schemas.StatusSourceGone, Error: "file not found"},
				"100-s2-1": {Status: schemas.StatusCopied}},
			outcome: Apply, actions: []string{"prune files under " + drRoot + "sales.db/customers keeping 2", "create table sales.customers", "alter database sales"},
			check: func(t *testing.T, d Decision) {
				if !strings.Contains(d.Detail, "without 1 file(s) gone") || !strings.Contains(d.Detail, customersFiles[0]) {
					t.Errorf("detail %q", d.Detail)
				}
			}}},
		{planCase: planCase{name: "TABLE: a file failed, nothing removes the table", ev: at(1).table(srcCustomers, 105, customersFiles[0]),
			state: drState(applying(40, 1)), copies: map[string]Copy{"100-s2-0": {Status: schemas.StatusFailed, Error: "checksum mismatch"}},
			outcome: Wait, reason: ReasonCopyFailed, waitTasks: []string{"100-s2-0"}}},
		{planCase: planCase{name: "TABLE: a file gone, a later drop removes the table", ev: at(1).table(srcCustomers, 105, customersFiles[0]),
			state: drState(applying(40, 1), drTable(srcCustomers, 30)), copies: gone("100-s2-0"),
			later:   []*schemas.Event{at(2).end(), dropTable(110, srcCustomers)},
			outcome: NoOp, reason: ReasonSuperseded, actions: []string{"alter database sales"}}},
		{planCase: planCase{name: "TABLE: a file gone, a later bootstrap brings the table", ev: at(1).table(srcCustomers, 105, customersFiles[0]),
			state: drState(applying(40, 1)), copies: gone("100-s2-0"),
			later:   []*schemas.Event{at(2).end(), newBootstrap("b2", "sales", 120).begin()},
			outcome: NoOp, reason: ReasonSupersededByBootstrap, actions: []string{"alter database sales"}}},
		{planCase: planCase{name: "TABLE of an external table whose data is not copied prunes nothing", ev: func() *schemas.Event {
			bb := at(1)
			bb.withData = false
			return bb.table(ext, 105)
		}(), state: drState(applying(40, 1), drTable(srcCustomers, 30)),
			outcome: Apply, actions: []string{"alter table sales.customers", "alter database sales"}}},
		{planCase: planCase{name: "TABLE of a managed table prunes with or without external data", ev: func() *schemas.Event {
			bb := at(1)
			bb.withData = false
			m := *srcCustomers
			m.TableType, m.Parameters = "MANAGED_TABLE", map[string]string{}
			return bb.table(&m, 105, customersFiles...)
		}(), state: drState(applying(40, 1)),
			outcome: Apply, actions: []string{"prune files under " + drRoot + "sales.db/customers keeping 2", "create table sales.customers", "alter database sales"}}},
		{planCase: planCase{name: "TABLE of a bootstrap the database has not begun halts", ev: at(1).table(srcCustomers, 105),
			state: drState(drDB("sales", 40)), outcome: Halt, reason: ReasonBootstrapNotBegun,
			check: func(t *testing.T, d Decision) {
				if !strings.Contains(d.Detail, "b1") || !strings.Contains(d.Detail, "BEGIN") || !strings.Contains(d.Detail, "hivedr bootstrap -db sales") {
					t.Errorf("detail %q", d.Detail)
				}
			}}},
		{planCase: planCase{name: "TABLE of a bootstrap not begun, the database at its cut: a no-op", ev: at(1).table(srcCustomers, 105),
			state: drState(done(100, "b2")), outcome: NoOp, reason: ReasonAlreadyApplied}},
		{planCase: planCase{name: "TABLE of another bootstrap than the one in progress halts", ev: at(1).table(srcCustomers, 105),
			state: drState(inBootstrap(drDB("sales", 40), "b2", 120, 3)), outcome: Halt, reason: ReasonBootstrapNotBegun}},
		{planCase: planCase{name: "TABLE after lost records halts chain_broken", ev: at(4).table(srcCustomers, 105),
			state: drState(applying(40, 2)), outcome: Halt, reason: ReasonChainBroken,
			check: func(t *testing.T, d Decision) {
				if !strings.Contains(d.Detail, "records 3..4 of it are lost") || !strings.Contains(d.Detail, "hivedr bootstrap -db sales") {
					t.Errorf("detail %q", d.Detail)
				}
			}}},
		{planCase: planCase{name: "TABLE ignores the chain of events", ev: prevID(at(1).table(srcCustomers, 105), 99),
			state: drState(applying(40, 1)), outcome: Apply,
			actions: []string{"prune files under " + drRoot + "sales.db/customers keeping 0", "create table sales.customers", "alter database sales"}}},
		{planCase: planCase{name: "TABLE outside the roots", ev: func() *schemas.Event {
			tb := *srcCustomers
			tb.Location = "hdfs://other:8020/c"
			return at(1).table(&tb, 105)
		}(), state: drState(applying(40, 1)), outcome: Halt, reason: ReasonPathOutsideRoots}},
		{planCase: planCase{name: "TABLE the tailer could not list halts", ev: withErrors(at(1).table(srcCustomers, 105),
			schemas.EventError{Kind: schemas.ErrListingFailed, Message: "connection refused"}),
			state: drState(applying(40, 1)), outcome: Halt, reason: ReasonListingFailed}},
		{planCase: planCase{name: "TABLE with the DR database gone halts", ev: at(1).table(srcCustomers, 105),
			state: drState(), outcome: Halt, reason: ReasonDatabaseMissing}},

		// PARTITION batches.
		{planCase: planCase{name: "PARTITION batch: added, altered, already there", ev: at(2).part(srcOrders, srcP1, 106, partFile(srcP1, "a")),
			state: drState(applying(40, 2), ofBootstrap(drTable(srcOrders, 105), "b1"), drPart(srcOrders, srcP2, 30),
				ofBootstrap(drPart(srcOrders, p3, 108), "b1")),
			outcome: Apply, actions: []string{"prune files under " + drRoot + "sales.db/orders/dt=2024-01-01 keeping 1",
				"prune files under " + drRoot + "sales.db/orders/dt=2024-01-02 keeping 0",
				"add partitions sales.orders [2024-01-01]", "alter partitions sales.orders [2024-01-02]", "alter database sales"},
			check: func(t *testing.T, d Decision) {
				if p := d.Actions[4].(AlterDatabase).DB.Parameters[drparam.BootstrapApplied]; p != "seq=5 tables=0 partitions=3 files=1" {
					t.Errorf("progress %q", p)
				}
				if pr := d.Actions[1].(PruneFiles); pr.EventID != 107 {
					t.Errorf("prune at %d, want the partition's stamp 107", pr.EventID)
				}
				if pr := d.Actions[1].(PruneFiles); pr.Source == "" || strings.HasPrefix(pr.Source, drRoot) {
					t.Errorf("prune's source directory %q, want the source partition's location", pr.Source)
				}
			}}},
		{planCase: planCase{name: "PARTITION batch waits for every file", ev: at(2).part(srcOrders, srcP1, 106, partFile(srcP1, "a")),
			state:   drState(applying(40, 2), ofBootstrap(drTable(srcOrders, 105), "b1")),
			copies:  map[string]Copy{"100-s3-0": {Status: schemas.StatusCopied}},
			outcome: Wait, reason: ReasonWaitingForFiles, waitTasks: []string{"100-s4-0", "100-s5-0"}}},
		{planCase: planCase{name: "PARTITION batch: a file failed, a later drop removes that partition",
			ev:    at(2).part(srcOrders, srcP1, 106, partFile(srcP1, "a")),
			state: drState(applying(40, 2), ofBootstrap(drTable(srcOrders, 105), "b1")),
			copies: map[string]Copy{"100-s3-0": {Status: schemas.StatusCopied},
				"100-s4-0": {Status: schemas.StatusFailed, Error: "checksum mismatch"}, "100-s5-0": {Status: schemas.StatusCopied}},
			later:   []*schemas.Event{at(4).end(), dropParts(110, srcOrders, srcP2)},
			outcome: Apply, actions: []string{"prune files under " + drRoot + "sales.db/orders/dt=2024-01-01 keeping 1",
				"prune files under " + drRoot + "sales.db/orders/dt=2024-01-03 keeping 1",
				"add partitions sales.orders [2024-01-01] [2024-01-03]", "alter database sales"}}},
		func() bcase {
			c := goneP2("PARTITION batch: a file gone, a later major compaction of that partition: written without it",
				at(4).end(), compaction(110, &srcP2, "base_0000005_v0000123"))
			// The prune keeps the compaction's two files too.
			c.actions[1] = "prune files under " + drRoot + "sales.db/orders/dt=2024-01-02 keeping 3"
			return c
		}(),
		{planCase: planCase{name: "PARTITION batch: a file failed, a later compaction and a drop of that partition: left out",
			ev:    at(2).part(srcOrders, srcP1, 106, partFile(srcP1, "a")),
			state: drState(applying(40, 2), ofBootstrap(drTable(srcOrders, 105), "b1")),
			copies: map[string]Copy{"100-s3-0": {Status: schemas.StatusCopied},
				"100-s4-0": {Status: schemas.StatusFailed, Error: "checksum mismatch"}, "100-s5-0": {Status: schemas.StatusCopied}},
			later:   []*schemas.Event{at(4).end(), compaction(110, &srcP2, "base_0000005_v0000123"), dropParts(111, srcOrders, srcP2)},
			outcome: Apply, actions: []string{"prune files under " + drRoot + "sales.db/orders/dt=2024-01-01 keeping 1",
				"prune files under " + drRoot + "sales.db/orders/dt=2024-01-03 keeping 1",
				"add partitions sales.orders [2024-01-01] [2024-01-03]", "alter database sales"}}},
		{planCase: planCase{name: "PARTITION batch: a file failed and one pending, a later compaction: waits for the pending one",
			ev:    at(2).part(srcOrders, srcP1, 106, partFile(srcP1, "a")),
			state: drState(applying(40, 2), ofBootstrap(drTable(srcOrders, 105), "b1")),
			copies: map[string]Copy{"100-s3-0": {Status: schemas.StatusCopied},
				"100-s4-0": {Status: schemas.StatusFailed, Error: "checksum mismatch"}},
			later:   []*schemas.Event{at(4).end(), compaction(110, &srcP2, "base_0000005_v0000123")},
			outcome: Wait, reason: ReasonWaitingForFiles, waitTasks: []string{"100-s5-0"}}},
		{planCase: planCase{name: "TABLE: a file gone, a later major compaction of the table: written without it", ev: at(1).table(srcCustomers, 105, customersFiles[0]),
			state: drState(applying(40, 1)), copies: gone("100-s2-0"),
			later: []*schemas.Event{at(2).end(), compaction(110, nil, "base_0000005_v0000123")},
			// (The prune keeps the compaction's two files too.)
			outcome: Apply, actions: []string{"prune files under " + drRoot + "sales.db/customers keeping 3", "create table sales.customers", "alter database sales"}}},
		goneP2("PARTITION batch: a file gone, nothing in view removes it: written without it"),
		{planCase: planCase{name: "PARTITION batch: a file failed, nothing removes it", ev: at(2).part(srcOrders, srcP1, 106, partFile(srcP1, "a")),
			state:   drState(applying(40, 2), ofBootstrap(drTable(srcOrders, 105), "b1")),
			copies:  map[string]Copy{"100-s3-0": {Status: schemas.StatusFailed, Error: "checksum mismatch"}},
			outcome: Wait, reason: ReasonCopyFailed}},
		{planCase: planCase{name: "PARTITION: DR newer than the snapshot keeps it, claimed", ev: at(2).part(srcOrders, srcP1, 106),
			state:   drState(applying(40, 2), ofBootstrap(drTable(srcOrders, 105), "b1"), drPart(srcOrders, srcP1, 130)),
			outcome: Apply, actions: []string{"alter partitions sales.orders [2024-01-01]", "alter database sales"},
			check: func(t *testing.T, d Decision) {
				if p := d.Actions[0].(AlterPartitions).Parts[0].Parameters; p[drparam.LastID] != "130" || p[drparam.BootstrapID] != "b1" {
					t.Errorf("parameters %v", p)
				}
			}}},
		{planCase: planCase{name: "PARTITION batch all applied already (re-drive)", ev: at(2).part(srcOrders, srcP1, 106),
			state: drState(applying(40, 5), ofBootstrap(drTable(srcOrders, 105), "b1"), ofBootstrap(drPart(srcOrders, srcP1, 106), "b1"),
				ofBootstrap(drPart(srcOrders, srcP2, 107), "b1"), ofBootstrap(drPart(srcOrders, srcPart(srcOrders, "2024-01-03"), 108), "b1")),
			outcome: NoOp, reason: ReasonAlreadyApplied}},
		{planCase: planCase{name: "PARTITION of a table left out, a later drop removes it", ev: at(2).part(srcOrders, srcP1, 106),
			state: drState(applying(40, 2)), later: []*schemas.Event{at(3).end(), dropTable(110, srcOrders)},
			outcome: NoOp, reason: ReasonSuperseded, actions: []string{"alter database sales"}}},
		{planCase: planCase{name: "PARTITION of a table DR lacks halts", ev: at(2).part(srcOrders, srcP1, 106),
			state: drState(applying(40, 2)), outcome: Halt, reason: ReasonMissingObject}},
		{planCase: planCase{name: "PARTITION of an older table whose record was left out", ev: at(2).part(srcOrders, srcP1, 106),
			state:   drState(applying(40, 2), drTable(srcOrders, 30)),
			outcome: NoOp, reason: ReasonSuperseded, actions: []string{"alter database sales"}}},
		{planCase: planCase{name: "PARTITION of an external table whose data is not copied prunes nothing", ev: func() *schemas.Event {
			bb := at(2)
			bb.withData = false
			return bb.part(srcOrders, srcP1, 106)
		}(), state: drState(applying(40, 2), ofBootstrap(drTable(srcOrders, 105), "b1")),
			outcome: Apply, actions: []string{"add partitions sales.orders [2024-01-01]", "alter database sales"}}},

		// END.
		{planCase: planCase{name: "END converges: drops what the snapshot does not have, then moves the position", ev: at(9).end(),
			state: drState(applying(40, 9)), outcome: Apply,
			actions: []string{"drop table sales.old", "drop partitions sales.orders [[2023-12-31]]", "alter database sales"},
			check: func(t *testing.T, d Decision) {
				p := d.Actions[2].(AlterDatabase).DB.Parameters
				if p[drparam.LastID] != "100" || p[drparam.BootstrapDone] != "b1" || p["owner.team"] != "sales" {
					t.Errorf("parameters %v", p)
				}
			}},
			inv: &Inventory{Tables: map[string]string{"orders": "b1", "old": "", "customers": "b1"},
				Stale: map[string][]StalePartition{"orders": {{Name: "dt=2023-12-31", Values: []string{"2023-12-31"}}}}}},
		{planCase: planCase{name: "END with more stale partitions than an inventory holds drops a round and waits", ev: at(9).end(),
			state: drState(applying(40, 9)), outcome: Wait, reason: ReasonConverging,
			actions: []string{"drop table sales.old", "drop partitions sales.orders [[2023-12-31]]"}},
			inv: &Inventory{Tables: map[string]string{"orders": "b1", "old": "", "customers": "b1"},
				Stale: map[string][]StalePartition{"orders": {{Name: "dt=2023-12-31", Values: []string{"2023-12-31"}}}}, More: true}},
		{planCase: planCase{name: "END of a database the bootstrap created reads nothing", ev: at(9).end(),
			state: func() Replica {
				db := applying(0, 9)
				delete(db.Parameters, drparam.LastID)
				db.Parameters[drparam.BootstrapNew] = "b1"
				return drState(db)
			}(), outcome: Apply, actions: []string{"alter database sales"}}},
		{planCase: planCase{name: "END without the inventory it needs is a bug", ev: at(9).end(),
			state: drState(applying(40, 9)), outcome: Halt, reason: ReasonDecode}},
		{planCase: planCase{name: "END of a bootstrap applied (re-drive)", ev: at(9).end(), state: drState(done(100, "b1")),
			outcome: NoOp, reason: ReasonAlreadyApplied}},
		{planCase: planCase{name: "END after a lost record halts", ev: at(10).end(), state: drState(applying(40, 9)),
			outcome: Halt, reason: ReasonChainBroken}},

		// DISCONTINUITY.
		{planCase: planCase{name: "DISCONTINUITY past the DR database halts needs_bootstrap", ev: discontinuity(120, "sales"),
			state: drState(drDB("sales", 100)), outcome: Halt, reason: ReasonNeedsBootstrap,
			check: func(t *testing.T, d Decision) {
				for _, want := range []string{"after event 120", "at event 100", "events 101..120", "hivedr bootstrap -db sales", "--skip-event sales:120"} {
					if !strings.Contains(d.Detail, want) {
						t.Errorf("detail %q does not say %q", d.Detail, want)
					}
				}
			}}},
		{planCase: planCase{name: "DISCONTINUITY at or below the DR database changes nothing", ev: discontinuity(90, "sales"),
			state: drState(drDB("sales", 100)), outcome: NoOp, reason: ReasonAlreadyApplied}},
		{planCase: planCase{name: "DISCONTINUITY at the DR database changes nothing", ev: discontinuity(100, "sales"),
			state: drState(drDB("sales", 100)), outcome: NoOp, reason: ReasonAlreadyApplied}},
		{planCase: planCase{name: "DISCONTINUITY without a DR database changes nothing", ev: discontinuity(120, "sales"),
			state: drState(), outcome: NoOp, reason: ReasonAlreadyApplied}},
		{planCase: planCase{name: "DISCONTINUITY is not checked against the chain", ev: prevID(discontinuity(120, "sales"), 110),
			state: drState(drDB("sales", 100)), outcome: Halt, reason: ReasonNeedsBootstrap}},
		{planCase: planCase{name: "DISCONTINUITY the operator accepted", ev: discontinuity(120, "sales"), skip: true,
			state: drState(drDB("sales", 100)), outcome: NoOp, reason: ReasonSkippedByOperator, actions: []string{"alter database sales"},
			check: func(t *testing.T, d Decision) {
				if p := d.Actions[0].(AlterDatabase).DB.Parameters; p[drparam.LastID] != "120" {
					t.Errorf("parameters %v", p)
				}
			}}},
		{planCase: planCase{name: "DISCONTINUITY on a user's database", ev: discontinuity(120, "sales"),
			state: drState(userDB), outcome: Halt, reason: ReasonNotAReplica}},

		// Events after a bootstrap's END: at or below an object's stamp a
		// no-op for it, past it applied.
		{planCase: planCase{name: "an alter at or below the table's stamp is a no-op", ev: alterTable(105, srcOrders, withParam(srcOrders, "k", "v")),
			state:   drState(done(100, "b1"), ofBootstrap(drTable(srcOrders, 110), "b1")),
			outcome: NoOp, reason: ReasonAlreadyApplied, actions: []string{"alter database sales"}}},
		{planCase: planCase{name: "an alter past the table's stamp applies", ev: alterTable(111, srcOrders, withParam(srcOrders, "k", "v")),
			state:   drState(done(100, "b1"), ofBootstrap(drTable(srcOrders, 110), "b1")),
			outcome: Apply, actions: []string{"alter table sales.orders", "alter database sales"}}},
		{planCase: planCase{name: "a partition added before the table's stamp is a no-op", ev: addParts(105, srcOrders, []schemas.Partition{p3}),
			state:   drState(done(100, "b1"), ofBootstrap(drTable(srcOrders, 110), "b1")),
			outcome: NoOp, reason: ReasonAlreadyApplied, actions: []string{"alter database sales"}}},
		{planCase: planCase{name: "a partition altered before its stamp is a no-op", ev: alterPart(108, srcOrders, srcP1, partWithParam(srcP1, "k", "v")),
			state:   drState(done(100, "b1"), ofBootstrap(drTable(srcOrders, 104), "b1"), ofBootstrap(drPart(srcOrders, srcP1, 112), "b1")),
			outcome: NoOp, reason: ReasonAlreadyApplied, actions: []string{"alter database sales"}}},
		{planCase: planCase{name: "a partition altered past its stamp applies", ev: alterPart(113, srcOrders, srcP1, partWithParam(srcP1, "k", "v")),
			state:   drState(done(100, "b1"), ofBootstrap(drTable(srcOrders, 104), "b1"), ofBootstrap(drPart(srcOrders, srcP1, 112), "b1")),
			outcome: Apply, actions: []string{"alter partitions sales.orders [2024-01-01]", "alter database sales"}}},
		{planCase: planCase{name: "a drop past the table's stamp drops it", ev: dropTable(111, srcOrders),
			state:   drState(done(100, "b1"), ofBootstrap(drTable(srcOrders, 110), "b1")),
			outcome: Apply, actions: []string{"drop table sales.orders", "alter database sales"}}},

		// Events before a bootstrap's BEGIN.
		{planCase: planCase{name: "a missing object a later bootstrap brings", ev: alterTable(50, srcOrders, ordersV2),
			state: drState(drDB("sales", 40)), later: []*schemas.Event{b().begin()},
			outcome: NoOp, reason: ReasonSupersededByBootstrap, actions: []string{"alter database sales"}}},
		{planCase: planCase{name: "a missing DR database a later bootstrap brings", ev: createTable(50, srcOrders),
			state: drState(), later: []*schemas.Event{b().begin()}, outcome: NoOp, reason: ReasonSupersededByBootstrap}},
		{planCase: planCase{name: "a missing DR database a later table-scoped bootstrap does not bring", ev: createTable(50, srcOrders),
			state: drState(), later: []*schemas.Event{newBootstrap("b1", "sales", 100, "orders").begin()},
			outcome: Halt, reason: ReasonDatabaseMissing}},
		{planCase: planCase{name: "a file gone a later bootstrap replaces", ev: insertInto(50, srcOrders, &srcP1, partFile(srcP1, "c")),
			state: drState(drDB("sales", 40), drTable(srcOrders, 20), drPart(srcOrders, srcP1, 30)), copies: gone("50-0"),
			later:   []*schemas.Event{b().begin()},
			outcome: NoOp, reason: ReasonSupersededByBootstrap, actions: []string{"alter database sales"}}},
		{planCase: planCase{name: "a bootstrap of another table brings nothing of this one", ev: alterTable(50, srcOrders, ordersV2),
			state: drState(drDB("sales", 40)), later: []*schemas.Event{newBootstrap("b1", "sales", 100, "customers").begin()},
			outcome: Halt, reason: ReasonMissingObject}},
		{planCase: planCase{name: "a rename into the scope a later bootstrap of the table brings", ev: alterTable(50, renamedTo(srcCustomers, "sales", "tmp_customers"), srcCustomers),
			policy: testPolicy{excluded: []string{"sales.tmp_customers"}}, state: drState(drDB("sales", 40)),
			later:   []*schemas.Event{newBootstrap("b1", "sales", 100, "customers").begin()},
			outcome: NoOp, reason: ReasonSupersededByBootstrap, actions: []string{"alter database sales"}}},
		{planCase: planCase{name: "a rename into the scope over a stale holder of the name drops it", ev: alterTable(50, renamedTo(srcCustomers, "sales", "tmp_customers"), srcCustomers),
			policy: testPolicy{excluded: []string{"sales.tmp_customers"}}, state: drState(drDB("sales", 40), drTable(srcCustomers, 20)),
			later:   []*schemas.Event{newBootstrap("b1", "sales", 100, "customers").begin()},
			outcome: Apply, reason: ReasonSupersededByBootstrap, actions: []string{"drop table sales.customers", "alter database sales"}}},
		{planCase: planCase{name: "a rename across databases waits while the destination is bootstrapped", ev: alterTable(50, srcCustomers, renamedTo(srcCustomers, "archive", "customers")),
			state:   drState(drDB("sales", 40), inBootstrap(drDB("archive", 49), "b9", 49, 3), drTable(srcCustomers, 20)),
			outcome: Wait, reason: ReasonCrossDatabase, waitDB: "archive"}},
	}
	// The batch cases: records 3 and 4 after the head (record 3 is the
	// head, seq 3).
	batches := map[string][]*schemas.Event{}
	for _, c := range cases {
		if c.ev.EventType != schemas.EventSnapshotPartition {
			continue
		}
		bb := at(c.ev.Snapshot.Seq)
		bb.withData = c.ev.Snapshot.WithData
		switch {
		case strings.HasPrefix(c.name, "PARTITION batch"):
			files := func(p schemas.Partition, f string) []string {
				if strings.Contains(c.name, "added, altered") {
					return nil
				}
				return []string{partFile(p, f)}
			}
			batches[c.name] = []*schemas.Event{bb.part(srcOrders, srcP2, 107, files(srcP2, "b")...), bb.part(srcOrders, p3, 108, files(p3, "c")...)}
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := Input{DB: "sales", Source: "src", Event: c.ev, Batch: batches[c.name], Inventory: c.inv, Replica: c.state,
				Copies: c.copies, Later: c.later, Skip: c.skip, Policy: c.policy}
			if in.DB = c.db; in.DB == "" {
				in.DB = "sales"
			}
			if in.Copies == nil {
				in.Copies = map[string]Copy{}
				for _, e := range append([]*schemas.Event{c.ev}, in.Batch...) {
					for k, v := range copied(e) {
						in.Copies[k] = v
					}
				}
			}
			if in.Policy == nil {
				in.Policy = testPolicy{}
			}
			d := planChecked(t, in)
			if d.Outcome != c.outcome || (c.reason != "" && d.Reason != c.reason) {
				t.Fatalf("decision %s %s (%s), want %s %s", d.Outcome, d.Reason, d.Detail, c.outcome, c.reason)
			}
			if got := actionNames(d.Actions); !slices.Equal(got, c.actions) {
				t.Fatalf("actions\n  %q\nwant\n  %q", got, c.actions)
			}
			if c.waitTasks != nil && !slices.Equal(d.WaitTasks, c.waitTasks) {
				t.Errorf("wait tasks %v, want %v", d.WaitTasks, c.waitTasks)
			}
			if d.WaitDB != c.waitDB {
				t.Errorf("wait database %q, want %q", d.WaitDB, c.waitDB)
			}
			if c.check != nil {
				c.check(t, d)
			}
		})
	}
}

// TestPlanHeartbeatInBootstrap: a heartbeat while a bootstrap is applied
// checks no chain (the DR database's position is the one before the
// bootstrap until its END).
func TestPlanHeartbeatInBootstrap(t *testing.T) {
	prev := int64(90)
	d := PlanHeartbeat(HeartbeatInput{DB: "sales", Source: "src", Heartbeat: &schemas.Heartbeat{Database: "sales", PreviousEventID: &prev},
		Replica: inBootstrap(drDB("sales", 40), "b1", 100, 3)})
	if d.Outcome != NoOp || d.Reason != ReasonInBootstrap {
		t.Errorf("decision %s %s (%s), want a no-op in_bootstrap", d.Outcome, d.Reason, d.Detail)
	}
}

func TestInventoryScope(t *testing.T) {
	b := newBootstrap("b1", "sales", 100)
	b.seq = 8
	end := b.end()
	scoped := newBootstrap("b1", "sales", 100, "Orders")
	scoped.seq = 3
	scopedEnd := scoped.end()
	created := inBootstrap(drDB("sales", 0), "b1", 100, 8)
	created.Parameters[drparam.BootstrapNew] = "b1"
	for _, c := range []struct {
		name   string
		ev     *schemas.Event
		db     *hms.Database
		tables []string
		all    bool
		ok     bool
	}{
		{"whole database", end, inBootstrap(drDB("sales", 40), "b1", 100, 8), nil, true, true},
		{"table-scoped", scopedEnd, inBootstrap(drDB("sales", 40), "b1", 100, 3), []string{"orders"}, false, true},
		{"created by the BEGIN", end, created, nil, false, false},
		{"another bootstrap in progress", end, inBootstrap(drDB("sales", 40), "b2", 100, 8), nil, false, false},
		{"applied already", end, func() *hms.Database { d := drDB("sales", 100); d.Parameters[drparam.BootstrapDone] = "b1"; return d }(), nil, false, false},
		{"no database", end, nil, nil, false, false},
		{"not an END", b.begin(), inBootstrap(drDB("sales", 40), "b1", 100, 8), nil, false, false},
	} {
		tables, all, ok := InventoryScope(c.ev, c.db)
		if !slices.Equal(tables, c.tables) || all != c.all || ok != c.ok {
			t.Errorf("%s: %v %v %v, want %v %v %v", c.name, tables, all, ok, c.tables, c.all, c.ok)
		}
	}
}

// ---- whole histories

// chainedTopic sets previous_event_id as the tailer does on one topic:
// each record names the last event before it; a bootstrap's records (and
// a discontinuity marker) do not advance the chain.
func chainedTopic(evs []*schemas.Event) []*schemas.Event {
	var last int64
	for _, ev := range evs {
		prevID(ev, last)
		if !ev.EventType.IsHivedr() {
			last = ev.EventID
		}
	}
	return evs
}

// semantic is a replica with what a bootstrap legitimately changes
// left out (repl.last.id stamps, hivedr's own parameters): the objects,
// their definitions and the DR files.
func semantic(m *memMS) string {
	strip := func(p map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range p {
			if k != drparam.LastID && !strings.HasPrefix(k, drparam.OwnPrefix) {
				out[k] = v
			}
		}
		return out
	}
	n := newMemMS()
	for k, v := range m.dbs {
		c := *v
		c.Parameters = strip(v.Parameters)
		n.dbs[k] = &c
	}
	for k, v := range m.tables {
		c := *v
		c.Parameters = strip(v.Parameters)
		n.tables[k] = &c
	}
	for k, v := range m.parts {
		c := *v
		c.Parameters = strip(v.Parameters)
		n.parts[k] = &c
	}
	for k := range m.files {
		n.files[k] = 0
	}
	return n.dump()
}

// TestPlanBootstrapConverges: a DR database applied up to event 15 misses
// events 16..21 (a tailer restarted without its checkpoint), and a
// bootstrap at cut 21 brings it back: a table dropped at the source since
// (old) goes, one changed (customers, overwritten) gets its new files and
// loses the old, a partition dropped (p2) goes, a partition overwritten
// (p1) loses its old file, a new table and partition come, and objects the
// tailer read after later events (stamps 22, 23) are not rolled back by
// them. Then the events after the cut apply over it, chained as the
// tailer chains them. The replica is then what replaying the whole
// source history makes (but for stamps and hivedr's keys), and re-drive
// from any record, a second run, or a crash anywhere ends the same.
func TestPlanBootstrapConverges(t *testing.T) {
	old := srcTable("sales", "old", nil, "x int")
	fresh := srcTable("sales", "fresh", nil, "x int")
	p3, p4 := srcPart(srcOrders, "2024-01-03"), srcPart(srcOrders, "2024-01-04")
	ordersV2 := withParam(srcOrders, "comment", "v2")
	p1v2 := partWithParam(srcP1, "k", "v")
	customersV2 := withParam(srcCustomers, "z", "1")
	before := []*schemas.Event{ // on the topic, applied
		createDB(10, "sales"),
		createTable(11, srcOrders),
		addParts(12, srcOrders, []schemas.Partition{srcP1, srcP2}, partFile(srcP1, "a"), partFile(srcP2, "b")),
		createTable(13, srcCustomers),
		insertInto(14, srcCustomers, nil, srcCustomers.Location+"/x"),
		createTable(15, old, old.Location+"/o"),
	}
	lost := []*schemas.Event{ // never published
		dropTable(16, old),
		dropParts(17, srcOrders, srcP2),
		addParts(18, srcOrders, []schemas.Partition{p3}, partFile(p3, "c")),
		insertOverwrite(19, srcCustomers, nil, srcCustomers.Location+"/y"),
		createTable(20, fresh, fresh.Location+"/f"),
		insertOverwrite(21, srcOrders, &p1v2, partFile(srcP1, "h")),
	}
	after := []*schemas.Event{ // published after the END
		alterTable(22, srcOrders, ordersV2),
		alterTable(23, srcCustomers, customersV2),
		addParts(24, ordersV2, []schemas.Partition{p4}, partFile(p4, "d")),
		dropTable(25, fresh),
		insertInto(26, ordersV2, &p3, partFile(p3, "e")),
	}
	// The tailer's reads: customers and fresh before event 22, orders and
	// its partitions after it (with its comment), the partition page after
	// event 23 (which touched only customers).
	b := newBootstrap("b1", "sales", 21)
	snap := []*schemas.Event{
		b.begin(),
		b.table(srcCustomers, 21, srcCustomers.Location+"/y"),
		b.table(fresh, 21, fresh.Location+"/f"),
		b.table(ordersV2, 22),
		b.part(ordersV2, p1v2, 23, partFile(srcP1, "h")),
		b.part(ordersV2, p3, 23, partFile(p3, "c")),
		b.end(),
	}
	topic := chainedTopic(slices.Concat(before, snap, after))

	truth := newMemMS()
	all := slices.Concat(before, lost, after)
	truth.copyAhead(all, nil)
	runAll(t, truth, []*seqWorker{{db: "sales", events: all}}, nil, testPolicy{})

	ms := checkConverges(t, "sales", topic, nil) // partition records in batches
	one := newMemMS()
	one.copyAhead(topic, nil)
	runAll(t, one, []*seqWorker{{db: "sales", events: topic, batch: 1}}, nil, testPolicy{})
	if d := diffStates(ms.dump(), one.dump()); d != "" {
		t.Fatalf("one record at a time ends elsewhere than batches:\n%s", d)
	}
	if d := diffStates(semantic(truth), semantic(ms)); d != "" {
		t.Errorf("the bootstrapped replica differs from replaying the whole history:\n%s", d)
	}
	db := ms.dbs["sales"]
	if db.Parameters[drparam.LastID] != "26" || db.Parameters[drparam.BootstrapDone] != "b1" || db.Parameters[drparam.BootstrapID] != "" {
		t.Errorf("database %v", db.Parameters)
	}
	if o := ms.tables[TableKey{DB: "sales", Name: "orders"}]; o.Parameters[drparam.LastID] != "22" || o.Parameters["comment"] != "v2" {
		t.Errorf("orders %v: event 22 rolled the snapshot back or was lost", o.Parameters)
	}
	if c := ms.tables[TableKey{DB: "sales", Name: "customers"}]; c.Parameters[drparam.LastID] != "23" || c.Parameters["z"] != "1" {
		t.Errorf("customers %v: event 23 was not applied over the snapshot", c.Parameters)
	}
	if _, ok := ms.files[drRoot+"sales.db/customers/x"]; ok {
		t.Error("customers' file x, overwritten at the source, survived the bootstrap")
	}
	if _, ok := ms.files[drRoot+"sales.db/orders/dt=2024-01-01/a"]; ok {
		t.Error("partition 2024-01-01's file a, overwritten at the source, survived the bootstrap")
	}
}

// TestPlanBootstrapTableScoped: a table renamed into the scope (from an
// excluded name) is followed by a bootstrap of that table alone: the
// rename is left out for the bootstrap, which brings the table; the END
// touches only its tables (another DR table, written by events, stays).
func TestPlanBootstrapTableScoped(t *testing.T) {
	tmp := renamedTo(srcCustomers, "sales", "tmp_customers")
	pol := testPolicy{excluded: []string{"sales.tmp_customers"}}
	b := newBootstrap("b7", "sales", 14, "customers")
	topic := chainedTopic([]*schemas.Event{
		createDB(10, "sales"),
		createTable(11, srcOrders),
		addParts(12, srcOrders, []schemas.Partition{srcP1}, partFile(srcP1, "a")),
		alterTable(13, tmp, srcCustomers),                             // enters the scope
		insertInto(14, srcCustomers, nil, srcCustomers.Location+"/w"), // before the cut: in the snapshot
		b.begin(),
		b.table(srcCustomers, 15, srcCustomers.Location+"/v", srcCustomers.Location+"/w"),
		b.end(),
		alterTable(16, srcCustomers, withParam(srcCustomers, "k", "v")),
		addParts(17, srcOrders, []schemas.Partition{srcP2}, partFile(srcP2, "b")),
	})
	ms := newMemMS()
	ms.copyAhead(topic, nil)
	runAll(t, ms, []*seqWorker{{db: "sales", events: topic}}, nil, pol)
	c := ms.tables[TableKey{DB: "sales", Name: "customers"}]
	if c == nil || c.Parameters["k"] != "v" || c.Parameters[drparam.LastID] != "16" {
		t.Fatalf("customers not brought by its bootstrap:\n%s", ms.dump())
	}
	if o := ms.tables[TableKey{DB: "sales", Name: "orders"}]; o == nil || o.Parameters[drparam.BootstrapID] != "" || len(ms.parts) != 2 {
		t.Errorf("the table-scoped bootstrap touched orders:\n%s", ms.dump())
	}
	if ms.dbs["sales"].Parameters[drparam.LastID] != "17" {
		t.Errorf("database %v", ms.dbs["sales"].Parameters)
	}
}

// TestPlanBootstrapReplayedOverALaterOne: a topic with two bootstraps at
// the same cut (nothing happened at the source in between), re-driven
// from its start over the replica both made: the first one is applied
// again (its cut equals the DR position and it is not the one done) and
// the second again after it; the replica ends as it was.
func TestPlanBootstrapReplayedOverALaterOne(t *testing.T) {
	fresh := srcTable("sales", "fresh", nil, "x int")
	b1, b2 := newBootstrap("b1", "sales", 12), newBootstrap("b2", "sales", 12)
	topic := chainedTopic([]*schemas.Event{
		createDB(10, "sales"), createTable(11, srcOrders), addParts(12, srcOrders, []schemas.Partition{srcP1}),
		b1.begin(), b1.table(srcOrders, 12), b1.part(srcOrders, srcP1, 12), b1.end(),
		// fresh was created after the first bootstrap's read, before the
		// second's: its create (13) comes after the second END.
		b2.begin(), b2.table(fresh, 13), b2.table(srcOrders, 13), b2.part(srcOrders, srcP1, 13), b2.end(),
		createTable(13, fresh),
	})
	checkConverges(t, "sales", topic, nil)

	// Nothing after them: the DR database ends at the cut, so a re-drive
	// applies both again (neither BEGIN is below the position, and the
	// first is not the one done), and ends where it was.
	b1, b2 = newBootstrap("b1", "sales", 12), newBootstrap("b2", "sales", 12)
	topic = chainedTopic([]*schemas.Event{
		createDB(10, "sales"), createTable(11, srcOrders), addParts(12, srcOrders, []schemas.Partition{srcP1}),
		b1.begin(), b1.table(srcOrders, 12), b1.part(srcOrders, srcP1, 12), b1.end(),
		b2.begin(), b2.table(srcOrders, 12), b2.part(srcOrders, srcP1, 12), b2.end(),
	})
	ms := checkConverges(t, "sales", topic, nil)
	if db := ms.dbs["sales"]; db.Parameters[drparam.LastID] != "12" || db.Parameters[drparam.BootstrapDone] != "b2" {
		t.Errorf("database %v", db.Parameters)
	}
}
