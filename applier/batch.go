package applier

import (
	"fmt"
	"strings"

	"github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/schemas"
)

// Runs: consecutive events of one database on its tables, applied as one
// plan (per table one add_partitions, one alter_partitions, at most one
// drop and one alter_table; one watermark write), instead of five
// metastore calls per event.
//
// What may join a run (RunKey): ADD_PARTITION, ALTER_PARTITION(S),
// DROP_PARTITION, INSERT, and an ALTER_TABLE that keeps the table's name,
// of a table of the topic's database, carrying no tailer error. Events of
// several tables interleave in one run (a warehouse loading many tables
// at once): each event changes only its own table, so the tables' parts
// of a run are independent, and each is folded and written as a
// one-table run would be.
// planRun then plans each event in order against the replica as the
// previous events of the run leave it (Plan, unchanged, on an overlay of
// the state read) and takes the longest prefix whose events are all
// applied or no-ops and whose actions only change that table and its
// partitions (no create, drop or rename of a table, no partition
// rename); a drop of a partition that an earlier event of the run
// touched (on that table) ends the run before it, as do an event an operator skips and
// a broken chain. The worker marks the run's offsets together once its
// actions succeeded (with the tailer's heartbeats between the run's
// events, whose chain the event before each satisfies: worker.following).
//
// Why deferring the database's watermark (repl.last.id) to the end of the
// run keeps every guarantee:
//
//   - Idempotent re-drive and crash safety. Every object the run writes
//     carries the ID of the event that last changed it (repl.last.id on
//     the partition or table), exactly as the events one by one would
//     leave it. After a crash anywhere in the run's actions the offsets
//     are not committed, the database's watermark is still the one before
//     the run, and the run is planned again from its first event: an
//     event whose objects are at or past it is a no-op for them (the
//     object stamps, not the database's watermark, say so), and the rest
//     applies. This is what object stamps alone could not do across a
//     rename: replaying rename A->B then B->C over a stale watermark
//     finds neither A nor B and halts missing_object. A run holds no
//     rename, no create and no drop of a table, so the names it touches
//     do not move; every object an event of the run needs (a partition it
//     alters, inserts into) is removed by no later event of the run (a
//     drop of a partition touched earlier ends the run), so replaying any
//     suffix of the run never finds one missing. At most one plan is ever
//     beyond the watermark (the worker writes the run's watermark before
//     it plans anything else), so a rename, always planned alone, is
//     never replayed behind another rename.
//   - Crash within the run's actions. They run as prunes first, then,
//     table by table, the partition drops, adds and alters and the
//     table's alter, then the watermark. Prunes before metadata, as for one event: once an object
//     carries its stamp a re-run skips it, so its prune must not come
//     after. The table's alter after its partitions: a table stamped past
//     an event makes that event a no-op for its partitions
//     (laterIncarnation), so were it first, a crash before the partition
//     calls would lose them. A stamp on one table says nothing of
//     another, so the tables' parts may come in any order; a crash
//     between two tables replays the first's events as no-ops and
//     applies the second's.
//   - Order. The replica goes from the state before the run to the state
//     after it; the events inside are folded (a partition added then
//     altered is added as altered), which is the state the source had at
//     the run's last event.
//   - Data before metadata. Each event is planned by Plan with the same
//     completions: an event whose files are not all copied waits, and a
//     run ends before it (the events before it apply).
//   - Chain checks. Each event is planned over the overlay, whose
//     database is at the previous event of the run: the chain is checked
//     event by event; a broken link ends the run, and the event then
//     planned alone halts (or accepts the gap) as it would without runs.
//   - The cross-database rename handshake. A rename is never in a run, and
//     a run's watermark is written before its worker plans the next
//     event: when a destination worker reaches a rename, its database's
//     watermark is at the event before the rename (it writes that mark
//     itself), and the source worker's watermark moves past the rename
//     with the rename's own plan. Both workers read each other's
//     watermarks only around the rename, which runs never cover. A run's
//     tables are of the worker's own database, which no other worker
//     writes until this one marks the rename's previous event.
//   - Halts name the event. An event that halts is never inside a run: the
//     run ends before it, and the next plan has it first.

// RunKey says whether ev, on db's topic, may be planned in one run with
// its neighbours: the table it changes, and how many partitions (at
// least 1) it counts for against the run's size bound.
func RunKey(db string, ev *schemas.Event) (TableKey, int, bool) {
	if ev == nil || ev.Snapshot != nil || len(ev.Errors) > 0 || len(ev.Databases) > 1 {
		return TableKey{}, 0, false
	}
	var tk TableKey
	n := 1
	switch c := ev.Payload.(type) {
	case *schemas.PartitionChange:
		switch ev.EventType {
		case schemas.EventAddPartition, schemas.EventAlterPartition, schemas.EventAlterPartitions, schemas.EventDropPartition:
		default:
			return TableKey{}, 0, false
		}
		tk = eventTable(ev, c.Table)
		n = max(1, len(c.After), len(c.Before))
	case *schemas.InsertData:
		if ev.EventType != schemas.EventInsert {
			return TableKey{}, 0, false
		}
		tk = eventTable(ev, c.Table)
	case *schemas.TableChange:
		if ev.EventType != schemas.EventAlterTable || c.Before == nil || c.After == nil {
			return TableKey{}, 0, false
		}
		tk = tableKey(c.Before.Database, c.Before.Name)
		if tableKey(c.After.Database, c.After.Name) != tk {
			return TableKey{}, 0, false // a rename
		}
	default:
		return TableKey{}, 0, false
	}
	if tk.Name == "" || tk.DB != strings.ToLower(db) {
		return TableKey{}, 0, false
	}
	return tk, n, true
}

// planRun plans in.Event and the events of in.Batch after it (a run: see
// RunKey) as one decision covering the longest prefix that can be applied
// together (Decision.Covered). in.Event alone decides when it cannot be
// part of a run; its decision is then Plan's for it.
func planRun(in Input) Decision {
	db := strings.ToLower(in.DB)
	tk, _, ok := RunKey(db, in.Event)
	// (All the events after the head: the run's own first, then the
	// topic's later ones; each event's Later is a suffix of it.)
	later := make([]*schemas.Event, 0, len(in.Batch)+len(in.Later))
	later = append(append(later, in.Batch...), in.Later...)
	head := in
	head.Batch, head.Later = nil, later
	d := Plan(head)
	if !ok || in.Skip || in.AcceptGap || (d.Outcome != Apply && d.Outcome != NoOp) {
		return d
	}
	r := newRun(db, in.Replica)
	if !r.add(tk, in.Event, d) {
		return d
	}
	for i, ev := range in.Batch {
		k, _, ok := RunKey(db, ev)
		if !ok || r.dropsTouched(k, ev) {
			break
		}
		cur := r.view.Databases[db]
		if cur != nil && cur.Parameters[drparam.SkipKey(ev.EventID)] != "" {
			break // planned alone, with its skip note
		}
		e := Plan(Input{DB: in.DB, Source: in.Source, Event: ev, Replica: r.view, Copies: in.Copies,
			Later: later[i+1:], Policy: in.Policy})
		if (e.Outcome != Apply && e.Outcome != NoOp) || !r.add(k, ev, e) {
			break
		}
	}
	if len(r.events) == 1 {
		return d
	}
	return r.decision()
}

// run folds the decisions of a run's events into one.
type run struct {
	db string
	// before is the replica as read; view is it with the run's actions
	// so far applied (what the next event is planned on).
	before, view Replica
	events       []*schemas.Event
	results      []Reason
	applied      bool

	prunes []Action
	tables map[TableKey]*runTable
	order  []TableKey     // tables, first touched first
	mark   *AlterDatabase // the last watermark
}

// runTable is what a run does to one table and its partitions.
type runTable struct {
	key     TableKey
	parts   map[string]*runPart
	order   []string // partition values, first touched first
	touched map[string]bool
	tbl     *hive_metastore.Table // the table's last definition written
}

// runPart is what the run does to one partition: dropped first (it
// existed before the run and an event dropped it), then obj written
// (nil: none, or dropped last).
type runPart struct {
	values  []string
	dropped bool
	obj     *hive_metastore.Partition
}

func newRun(db string, r Replica) *run {
	v := Replica{Databases: map[string]*hive_metastore.Database{}, Tables: map[TableKey]*hive_metastore.Table{},
		Partitions: map[PartKey]*hive_metastore.Partition{}}
	for k, o := range r.Databases {
		v.Databases[k] = o
	}
	for k, o := range r.Tables {
		v.Tables[k] = o
	}
	for k, o := range r.Partitions {
		v.Partitions[k] = o
	}
	return &run{db: db, before: r, view: v, tables: map[TableKey]*runTable{}}
}

// table is the run's record of tk, made when first touched.
func (r *run) table(tk TableKey) *runTable {
	t := r.tables[tk]
	if t == nil {
		t = &runTable{key: tk, parts: map[string]*runPart{}, touched: map[string]bool{}}
		r.tables[tk] = t
		r.order = append(r.order, tk)
	}
	return t
}

// dropsTouched reports whether ev, on table tk, drops a partition an
// earlier event of the run touched: replayed over a crash, that earlier
// event would find its partition gone (see the header).
func (r *run) dropsTouched(tk TableKey, ev *schemas.Event) bool {
	c, ok := ev.Payload.(*schemas.PartitionChange)
	t := r.tables[tk]
	if !ok || ev.EventType != schemas.EventDropPartition || t == nil {
		return false
	}
	for _, p := range c.Before {
		if t.touched[strings.Join(p.Values, "/")] {
			return true
		}
	}
	return false
}

// add folds the decision d of ev, an event on table tk (RunKey), into the
// run, and reports false (changing nothing) when d does something a run
// does not hold: anything but prunes, the watermark last, and changes of
// tk and its partitions.
func (r *run) add(tk TableKey, ev *schemas.Event, d Decision) bool {
	for i, a := range d.Actions {
		switch a := a.(type) {
		case PruneFiles:
		case AddPartitions:
			if tableKey(a.DB, a.Table) != tk {
				return false
			}
		case AlterPartitions:
			if tableKey(a.DB, a.Table) != tk {
				return false
			}
		case DropPartitions:
			if tableKey(a.DB, a.Table) != tk {
				return false
			}
		case AlterTable:
			if tableKey(a.DB, a.Name) != tk || tableKey(a.Table.DbName, a.Table.TableName) != tk {
				return false
			}
		case AlterDatabase:
			if a.Name != r.db || i != len(d.Actions)-1 {
				return false
			}
		default:
			return false
		}
	}
	t := r.table(tk)
	for _, a := range d.Actions {
		switch a := a.(type) {
		case PruneFiles:
			r.prunes = append(r.prunes, a)
		case AddPartitions:
			r.write(t, a.Parts)
		case AlterPartitions:
			r.write(t, a.Parts)
		case DropPartitions:
			for _, v := range a.Values {
				p := t.part(v)
				if r.before.Partitions[partKey(tk, v)] != nil {
					p.dropped = true
				}
				p.obj = nil
				delete(r.view.Partitions, partKey(tk, v))
			}
		case AlterTable:
			t.tbl = a.Table
			r.view.Tables[tk] = a.Table
		case AlterDatabase:
			r.mark = &a
			r.view.Databases[r.db] = a.DB
		}
	}
	for _, v := range touchedValues(ev) {
		t.touched[v] = true
	}
	r.events = append(r.events, ev)
	if d.Outcome == Apply {
		r.applied = true
		r.results = append(r.results, ReasonApplied)
	} else {
		r.results = append(r.results, d.Reason)
	}
	return true
}

func (r *run) write(t *runTable, parts []*hive_metastore.Partition) {
	for _, np := range parts {
		t.part(np.Values).obj = np
		r.view.Partitions[partKey(t.key, np.Values)] = np
	}
}

func (t *runTable) part(values []string) *runPart {
	k := strings.Join(values, "/")
	p := t.parts[k]
	if p == nil {
		p = &runPart{values: values}
		t.parts[k] = p
		t.order = append(t.order, k)
	}
	return p
}

// touchedValues are the partitions ev names (joined values).
func touchedValues(ev *schemas.Event) []string {
	var out []string
	switch c := ev.Payload.(type) {
	case *schemas.PartitionChange:
		for _, ps := range [][]schemas.Partition{c.Before, c.After} {
			for _, p := range ps {
				out = append(out, strings.Join(p.Values, "/"))
			}
		}
	case *schemas.InsertData:
		if c.Partition != nil {
			out = append(out, strings.Join(c.Partition.Values, "/"))
		}
	}
	return out
}

// decision is the run's actions in the order the header argues for:
// prunes; then, table by table in the order the run first touched them,
// the partition drops, adds and alters and the table's alter; the
// watermark last.
func (r *run) decision() Decision {
	acts := append([]Action(nil), r.prunes...)
	names := make([]string, 0, len(r.order))
	for _, tk := range r.order {
		acts = append(acts, r.tables[tk].actions(r.before)...)
		names = append(names, tk.String())
	}
	if r.mark != nil {
		acts = append(acts, *r.mark)
	}
	first, last := r.events[0], r.events[len(r.events)-1]
	d := Decision{Outcome: NoOp, Reason: ReasonAlreadyApplied, Actions: acts, Covered: len(r.events) - 1, Results: r.results,
		Detail: fmt.Sprintf("%d events on %s (%d..%d) in one plan", len(r.events), strings.Join(names, ", "), first.EventID, last.EventID)}
	if r.applied {
		d.Outcome, d.Reason = Apply, ReasonApplied
	}
	return d
}

// actions are what the run does to t: one drop, one add and one alter of
// partitions, and the table's alter last (see the header), given the
// replica as read.
func (t *runTable) actions(before Replica) []Action {
	var acts []Action
	var drop DropPartitions
	var add, alter []*hive_metastore.Partition
	var keys []*hive_metastore.FieldSchema // (nil when the replica has no table: the drop then goes by values)
	if tb := before.Tables[t.key]; tb != nil {
		keys = tb.PartitionKeys
	}
	for _, k := range t.order {
		p := t.parts[k]
		existed := before.Partitions[partKey(t.key, p.values)] != nil
		if p.dropped {
			drop.Values = append(drop.Values, p.values)
			if keys != nil {
				drop.Names = append(drop.Names, hms.PartitionName(keys, p.values))
			}
		}
		switch {
		case p.obj == nil:
		case !existed || p.dropped:
			add = append(add, p.obj)
		default:
			alter = append(alter, p.obj)
		}
	}
	if len(drop.Values) > 0 {
		drop.DB, drop.Table = t.key.DB, t.key.Name
		if len(drop.Names) != len(drop.Values) {
			drop.Names = nil
		}
		acts = append(acts, drop)
	}
	if len(add) > 0 {
		acts = append(acts, AddPartitions{DB: t.key.DB, Table: t.key.Name, Parts: add})
	}
	if len(alter) > 0 {
		acts = append(acts, AlterPartitions{DB: t.key.DB, Table: t.key.Name, Parts: alter})
	}
	if t.tbl != nil {
		acts = append(acts, AlterTable{DB: t.key.DB, Name: t.key.Name, Table: t.tbl})
	}
	return acts
}
