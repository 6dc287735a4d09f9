package applier

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/internal/acid"
	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/schemas"
)

// A bootstrap is the source database as of a cut N, published on its topic
// by the tailer as HIVEDR_SNAPSHOT_BEGIN, a SNAPSHOT_TABLE per table (with
// an unpartitioned table's files), a SNAPSHOT_PARTITION per partition (with
// its files), and SNAPSHOT_END, every record with event_id N. Every event
// at or before N is reflected in it and comes before its BEGIN; every
// event after N comes after its END.
//
// How the applier keeps the guarantees over a bootstrap:
//
//   - Each table and partition is read by the tailer between two heads of
//     the source log with no event touching it in between, and carries
//     that head as its stamp: its state is the source's as of the stamp.
//     On DR it gets repl.last.id = stamp and hivedr.bootstrap.id, so the
//     events after the END at or below the stamp are no-ops for it (the
//     existing rules) and the later ones apply: an object the bootstrap saw
//     newer is never rolled back. A DR object already past a record's stamp
//     is kept as it is (only claimed for the bootstrap).
//   - Data before metadata: a record's files must all be copied before its
//     object is written (filesReady, the same rules as events: a file that
//     cannot be copied is tolerated only when a later event removes the
//     object, which is then left out). DR files under the object's
//     directory that the record does not list are pruned first (as an
//     INSERT OVERWRITE prunes), so a re-bootstrap replaces changed data;
//     files of a later event's copy are kept.
//   - END converges: the DR tables of the bootstrap's scope and the
//     partitions of its tables that it did not write are dropped (the
//     source no longer has them; data stays, as for drops), then one write
//     moves the DR database's repl.last.id to N and clears the bootstrap's
//     parameters (records hivedr.bootstrap.done). Until then repl.last.id
//     stays where it was: a crash anywhere re-applies the bootstrap from
//     the committed offset, every record idempotent by the stamps.
//   - The chain: snapshot records are not checked against repl.last.id
//     (they supersede what came before), nor advance it; after the END the
//     next event's previous_event_id is at most N. Within a bootstrap the
//     records' seq must follow each other, checked against the progress
//     the DR database records (hivedr.bootstrap.applied): a lost record
//     halts chain_broken.
//   - Re-drive: a record of a bootstrap at or below the DR database's
//     position is a no-op, except at exactly its cut N while it is not
//     the bootstrap named done: a database that was at N when a bootstrap
//     of it was requested (a quiet database) is bootstrapped all the same.

func isSnapshot(t schemas.EventType) bool {
	switch t {
	case schemas.EventSnapshotBegin, schemas.EventSnapshotTable, schemas.EventSnapshotPartition, schemas.EventSnapshotEnd:
		return true
	}
	return false
}

// covers reports whether ev, a bootstrap's BEGIN, brings the object
// db.table (the database itself when table is ""): a whole-database
// bootstrap covers everything of its database, a table-scoped one its
// tables.
func covers(ev *schemas.Event, db, table string) bool {
	if ev.EventType != schemas.EventSnapshotBegin || ev.Snapshot == nil || !strings.EqualFold(ev.Database, db) {
		return false
	}
	if len(ev.Snapshot.Tables) == 0 {
		return true
	}
	return table != "" && slices.ContainsFunc(ev.Snapshot.Tables, func(t string) bool { return strings.EqualFold(t, table) })
}

// wholeDatabaseBegin reports whether ev is the BEGIN of a bootstrap of
// all of db: what releases db's halts (Reason.ReleasedByBootstrap).
func wholeDatabaseBegin(db string, ev *schemas.Event) bool {
	return ev != nil && ev.EventType == schemas.EventSnapshotBegin && ev.Snapshot != nil &&
		len(ev.Snapshot.Tables) == 0 && strings.EqualFold(ev.Database, db)
}

// Inventory is what the convergence of a bootstrap's END reads of the DR
// database (InventoryScope says what; the executor reads it in pages):
// names and bootstrap IDs only, never Thrift objects, and at most
// inventoryMaxStale partitions: past that More is set, the END drops those
// and is planned again, so memory does not grow with a table's partitions.
type Inventory struct {
	// Tables are the DR tables in the bootstrap's scope, by lower-case
	// name, each with the bootstrap that wrote it last
	// (drparam.BootstrapID; "" for one an event wrote).
	Tables map[string]string
	// Stale holds, for each table the bootstrap wrote, its partitions
	// that it did not write (they carry another bootstrap's ID or none).
	// Tables the bootstrap created (drparam.BootstrapNew) are not read:
	// all their partitions are its own.
	Stale map[string][]StalePartition
	// More: the DR database has more stale partitions than the inventory
	// holds (its bound): the END drops these and is planned again.
	More bool
}

// StalePartition is a DR partition an END drops: its values, and its name
// as the metastore names it (what the drop asks by).
type StalePartition struct {
	Name   string
	Values []string
}

// InventoryScope says what the convergence of an END record reads of the
// DR database cur: the tables of a table-scoped bootstrap, or all of the
// database's (all). ok is false when nothing needs reading: not an END,
// an END that will be a no-op or halt, or a database the bootstrap's BEGIN
// created (nothing on it predates the bootstrap).
func InventoryScope(ev *schemas.Event, cur *hive_metastore.Database) (tables []string, all, ok bool) {
	s := ev.Snapshot
	if ev.EventType != schemas.EventSnapshotEnd || s == nil || cur == nil || cur.Parameters[drparam.BootstrapID] != s.BootstrapID ||
		cur.Parameters[drparam.BootstrapNew] == s.BootstrapID || bootstrapApplied(ev, cur) {
		return nil, false, false
	}
	for _, t := range s.Tables {
		tables = append(tables, strings.ToLower(t))
	}
	return tables, len(tables) == 0, true
}

// bootstrapApplied reports whether the bootstrap of record ev is applied
// on (or superseded at) the DR database cur already.
func bootstrapApplied(ev *schemas.Event, cur *hive_metastore.Database) bool {
	x := stamp(cur.Parameters)
	return x > ev.EventID || (x == ev.EventID && cur.Parameters[drparam.BootstrapDone] == ev.Snapshot.BootstrapID)
}

// snapshot plans a bootstrap's record (Plan's rules for these).
func (p *planner) snapshot(cur *hive_metastore.Database) Decision {
	ev, s := p.ev, p.ev.Snapshot
	if s == nil || s.BootstrapID == "" {
		return halt(ReasonDecode, "%s record %d carries no bootstrap (snapshot) information", ev.EventType, ev.EventID)
	}
	if s.CutEventID != 0 && s.CutEventID != ev.EventID {
		return halt(ReasonDecode, "%s record of bootstrap %s has event_id %d but cut %d", ev.EventType, s.BootstrapID, ev.EventID, s.CutEventID)
	}
	if d, refused := p.notOurs(cur); refused {
		return d
	}
	if cur != nil && bootstrapApplied(ev, cur) {
		return p.noop(ReasonAlreadyApplied, "bootstrap %s (cut %d) is applied: DR database %s is at event %d", s.BootstrapID, ev.EventID, p.db, stamp(cur.Parameters))
	}
	if len(ev.Errors) > 0 {
		e := ev.Errors[0]
		d := e.Message
		if e.Path != "" && !strings.Contains(d, e.Path) {
			d += " (path " + e.Path + ")"
		}
		return halt(errorReason(e.Kind), "the tailer could not read this record of bootstrap %s: %s", s.BootstrapID, d)
	}
	if ev.EventType == schemas.EventSnapshotBegin {
		return p.begin(cur)
	}
	if cur == nil {
		if sup := p.supersededBy(objKey{db: p.db}); sup != nil {
			return p.noop(supersededReason(sup), "DR database %s does not exist and event %d (%s) drops or replaces it", p.db, sup.EventID, sup.EventType)
		}
		return halt(ReasonDatabaseMissing, "DR database %s does not exist: bootstrap %s's BEGIN made it, and it was dropped since; bootstrap it again: %s", p.db, s.BootstrapID, BootstrapCommand(p.db))
	}
	if got := cur.Parameters[drparam.BootstrapID]; got != s.BootstrapID && stamp(cur.Parameters) >= ev.EventID {
		// Not in this bootstrap, but at its cut: consistent as of it
		// already (a re-drive from the middle of a bootstrap over a later
		// one at the same cut); applying part of it would change nothing.
		return p.noop(ReasonAlreadyApplied, "DR database %s is at event %d, bootstrap %s's cut, and not in it", p.db, ev.EventID, s.BootstrapID)
	}
	if got := cur.Parameters[drparam.BootstrapID]; got != s.BootstrapID {
		was := "no bootstrap"
		if got != "" {
			was = "bootstrap " + got
		}
		return halt(ReasonBootstrapNotBegun, "%s record %d of bootstrap %s, but DR database %s is in %s: its BEGIN was not applied "+
			"(the applier group's offset was moved into the middle of the bootstrap?). Reset the group's offset on the topic to the "+
			"bootstrap's BEGIN, or bootstrap the database again: %s (a bootstrap later on the topic releases this halt)",
			ev.EventType, s.Seq, s.BootstrapID, p.db, was, BootstrapCommand(p.db))
	}
	prog, err := drparam.ParseProgress(cur.Parameters[drparam.BootstrapApplied])
	if err != nil {
		return halt(ReasonDecode, "DR database %s: %v", p.db, err)
	}
	if s.Seq > prog.Seq+1 && s.Seq > 0 {
		// (A record at or below the progress is a re-drive: planned again,
		// idempotent.)
		return halt(ReasonChainBroken, "CHAIN_BROKEN: record %d of bootstrap %s follows record %d on the topic: records %d..%d of it are lost. "+
			"Bootstrap the database again: %s (a bootstrap later on the topic releases this halt)",
			s.Seq, s.BootstrapID, prog.Seq, prog.Seq+1, s.Seq-1, BootstrapCommand(p.db))
	}
	switch ev.EventType {
	case schemas.EventSnapshotTable:
		return p.snapshotTable(cur, prog)
	case schemas.EventSnapshotPartition:
		return p.snapshotPartitions(cur, prog)
	}
	return p.snapshotEnd(cur, prog)
}

// begin plans a BEGIN: the DR database created if missing, or updated from
// the source's definition, and marked with the bootstrap (drparam's
// bootstrap keys). Its repl.last.id stays: the END moves it.
func (p *planner) begin(cur *hive_metastore.Database) Decision {
	s := p.ev.Snapshot
	c, ok := p.ev.Payload.(*schemas.DatabaseChange)
	if !ok || c.After == nil {
		return p.noPayload()
	}
	db, d, ok := p.drDatabase(c.After)
	if !ok {
		return d
	}
	id := s.BootstrapID
	params := db.Parameters
	delete(params, drparam.LastID)
	delete(params, drparam.BootstrapNew)
	var detail string
	if cur != nil {
		if v, ok := cur.Parameters[drparam.LastID]; ok {
			params[drparam.LastID] = v
		}
		if other := cur.Parameters[drparam.BootstrapID]; other != "" && other != id {
			detail = fmt.Sprintf("bootstrap %s supersedes bootstrap %s, which did not end", id, other)
		}
	}
	// BootstrapNew: nothing on the database predates this bootstrap. Kept
	// when the BEGIN is applied again (a re-drive after a crash).
	if cur == nil || (cur.Parameters[drparam.BootstrapID] == id && cur.Parameters[drparam.BootstrapNew] == id) {
		params[drparam.BootstrapNew] = id
	}
	params[drparam.BootstrapID] = id
	params[drparam.BootstrapState] = drparam.SnapshotState(p.ev.EventID)
	params[drparam.BootstrapApplied] = drparam.FormatProgress(drparam.Progress{Seq: s.Seq})
	var a Action = AlterDatabase{Name: p.db, DB: db}
	if cur == nil {
		a = CreateDatabase{DB: db}
	}
	d = apply(a)
	d.Detail = detail
	return d
}

// snapStamp is the repl.last.id a bootstrap's table or partition record
// gives its object: its stamp, or the cut when the record has none.
func snapStamp(ev *schemas.Event) int64 {
	if ev.Snapshot.StampEventID > 0 {
		return ev.Snapshot.StampEventID
	}
	return ev.EventID
}

func external(t *hive_metastore.Table) bool { return schemas.IsExternal(t.TableType, t.Parameters) }

// prunes reports whether a record of bootstrap s prunes the DR files of
// table t's objects: not for an external table whose data the policy does
// not copy (with_data false), whose DR files hivedr never wrote.
func prunes(s *schemas.SnapshotInfo, t *hive_metastore.Table) bool {
	return s.WithData || !external(t)
}

// claimed reports whether a DR object's parameters show it is at or past
// stamp h and already written (or claimed) by bootstrap id: the record
// has nothing left to do for it.
func claimed(params map[string]string, id string, h int64) bool {
	return params[drparam.BootstrapID] == id && stamp(params) >= h
}

// keepFiles maps a record's files to their DR locations (what a prune
// keeps).
func (p *planner) keepFiles(files []schemas.FileRef) ([]string, error) {
	keep := make([]string, 0, len(files))
	for _, f := range files {
		t, err := p.mapLocation(f.URI)
		if err != nil {
			return nil, err
		}
		// Where the tailer's copy task wrote it: a compactor's directory
		// under its replica name.
		keep = append(keep, acid.ReplicaPath(t))
	}
	return keep, nil
}

// sameShape reports whether DR table cur can be altered into t: Hive
// refuses to change partition keys in place, and a table of another type
// (a view, a managed table) is made anew.
func sameShape(cur, t *hive_metastore.Table) bool {
	if cur.TableType != t.TableType || len(cur.PartitionKeys) != len(t.PartitionKeys) {
		return false
	}
	for i, k := range cur.PartitionKeys {
		o := t.PartitionKeys[i]
		if !strings.EqualFold(k.Name, o.Name) || !strings.EqualFold(k.Type, o.Type) {
			return false
		}
	}
	return true
}

// withProgress appends the DR database's progress write for the records
// handled (recs, with their table, partition and file counts) to d, when
// they are past the progress the database records: an applied record and
// a no-op alike move it, so it counts every record once, and a re-drive
// of records handled already writes nothing.
func (p *planner) withProgress(d Decision, cur *hive_metastore.Database, prog drparam.Progress, recs []*schemas.Event) Decision {
	next := prog
	for _, r := range recs {
		if r.Snapshot.Seq <= next.Seq && r.Snapshot.Seq > 0 {
			continue
		}
		next.Seq = r.Snapshot.Seq
		switch r.EventType {
		case schemas.EventSnapshotTable:
			next.Tables++
		case schemas.EventSnapshotPartition:
			next.Partitions++
		}
		next.Files += int64(len(r.Files))
	}
	if next == prog {
		return d
	}
	db := *cur
	db.Parameters = copyParams(cur.Parameters)
	db.Parameters[drparam.BootstrapApplied] = drparam.FormatProgress(next)
	delete(db.Parameters, drparam.Halted) // as any watermark: the worker runs again
	d.Actions = append(d.Actions, AlterDatabase{Name: p.db, DB: &db})
	return d
}

// recordFilesReady is filesReady for the object obj of a bootstrap's
// TABLE or PARTITION record. A file that cannot be copied leaves the
// object out only when a later event removes the object itself (a drop,
// a later bootstrap's BEGIN covering it, an overwrite or truncate, which
// make it again): then that event converges DR. One that only makes the
// file unneeded, a major compaction of the object (its base replaces
// every file before it), keeps the object: it is written without the
// file, as one gone from the source is, and the compaction, after the
// END, brings its base. Left out, the object would be missing for good:
// the events after the END that made it are no-ops by the record's stamp,
// and the compaction, and every commit writing the object, would halt on
// its absence.
func (p *planner) recordFilesReady(obj objKey, files []schemas.FileRef) (Decision, bool) {
	d, ok := p.filesReady(obj, files)
	if ok || d.Outcome != NoOp || p.removedLater(obj) {
		return d, ok
	}
	var pending []string
	for _, f := range files {
		switch c, done := p.in.Copies[f.TaskID]; {
		case !done:
			pending = append(pending, f.TaskID)
		case !c.OK():
			p.gone = append(p.gone, f.URI)
		}
	}
	if len(pending) > 0 {
		return waitFiles(pending), false
	}
	return Decision{}, true
}

// removedLater reports whether a later event on the topic removes obj
// itself, not only files of it (a compaction, which keeps the object),
// following its table's renames.
func (p *planner) removedLater(obj objKey) bool {
	for _, ev := range p.in.Later {
		if len(ev.Errors) > 0 {
			return false
		}
		if _, compaction := ev.Payload.(*schemas.Compaction); !compaction && removes(ev, obj) {
			return true
		}
		obj = renamed(ev, obj)
	}
	return false
}

// snapshotTable plans a TABLE record: the table created, or replaced
// (altered, or dropped and created when its shape changed), as of its
// stamp, its files copied first and the DR files it does not list pruned.
func (p *planner) snapshotTable(cur *hive_metastore.Database, prog drparam.Progress) Decision {
	ev, s := p.ev, p.ev.Snapshot
	recs := []*schemas.Event{ev}
	c, ok := ev.Payload.(*schemas.TableChange)
	if !ok || c.After == nil {
		return p.noPayload()
	}
	tk := tableKey(c.After.Database, c.After.Name)
	if tk.DB != p.db {
		return halt(ReasonDecode, "%s record %d of bootstrap %s names table %s on the topic of %s", ev.EventType, s.Seq, s.BootstrapID, tk, p.db)
	}
	h := snapStamp(ev)
	p.stampID = h
	curT := p.in.Replica.Tables[tk]
	isClaimed := curT != nil && claimed(curT.Parameters, s.BootstrapID, h)
	// A transactional table's write IDs (acid_bootstrap.go): next is the
	// DR database with the table's open-at-cut write IDs as the record
	// leaves them.
	step, next := stateKeep, cur
	if w := s.WriteIDs; w != nil {
		var (
			set bool
			d   Decision
			ok  bool
		)
		if step, set, d, ok = p.writeIDStep(tk, s, isClaimed); !ok {
			return d
		}
		var open []int64
		if set {
			open = w.Open
		}
		next = withOpenAtCut(cur, tk.Name, open)
	}
	switch {
	case isClaimed && step == stateSet:
		// Created (or made anew) by this bootstrap, its write IDs not yet
		// set: a crash came in between.
		d := p.noop(ReasonAlreadyApplied, "%s is at event %d of bootstrap %s; its write ids are set now", tk, stamp(curT.Parameters), s.BootstrapID)
		if a := setWriteIDs(tk, p.db, s.WriteIDs); a != nil {
			d = apply(a)
		}
		return p.progressWith(d, cur, next, prog, recs)
	case isClaimed && step == stateKeep:
		return p.progressWith(p.noop(ReasonAlreadyApplied, "%s is at event %d of bootstrap %s", tk, stamp(curT.Parameters), s.BootstrapID), cur, next, prog, recs)
	case curT != nil && stamp(curT.Parameters) > h:
		// DR holds a newer state than the snapshot read (a re-drive over
		// a later bootstrap's objects): never rolled back, only claimed,
		// so the END keeps it.
		nt := *curT
		nt.Parameters = copyParams(curT.Parameters)
		nt.Parameters[drparam.BootstrapID] = s.BootstrapID
		delete(nt.Parameters, drparam.BootstrapNew)
		d := apply(AlterTable{DB: tk.DB, Name: tk.Name, Table: &nt})
		d.Detail = fmt.Sprintf("%s on DR is at event %d, past the snapshot's %d: kept", tk, stamp(curT.Parameters), h)
		return p.withProgress(d, cur, prog, recs)
	}
	if d, ok := p.recordFilesReady(objKey{db: tk.DB, table: tk.Name}, ev.Files); !ok {
		if d.Outcome == NoOp {
			return p.withProgress(d, cur, prog, recs)
		}
		return d
	}
	t, err := p.table(c.After)
	if err != nil {
		return pathHalt(err)
	}
	t.Parameters[drparam.BootstrapID] = s.BootstrapID
	remake := curT != nil && (!sameShape(curT, t) || step == stateReset)
	if curT == nil || remake {
		t.Parameters[drparam.BootstrapNew] = s.BootstrapID
	}
	// Prune before stamping: once the table carries the stamp a re-run
	// is a no-op, so a crash in between must not lose the prune.
	var acts []Action
	if len(t.PartitionKeys) == 0 && t.Sd != nil && t.Sd.Location != "" && prunes(s, t) {
		keep, err := p.keepFiles(ev.Files)
		if err != nil {
			return pathHalt(err)
		}
		acts = append(acts, PruneFiles{Dir: t.Sd.Location, Keep: keep, EventID: h, Source: c.After.Location})
	}
	switch {
	case step == stateReset:
		// DR holds another state under the name: the table goes with it.
		acts = append(acts, ResetWriteIDs{DB: tk.DB, Table: tk.Name, Def: t}, CreateTable{Table: t})
	case curT == nil:
		acts = append(acts, CreateTable{Table: t})
	case remake:
		acts = append(acts, DropTable{DB: tk.DB, Name: tk.Name}, CreateTable{Table: t})
	default:
		acts = append(acts, AlterTable{DB: tk.DB, Name: tk.Name, Table: t})
	}
	if w := s.WriteIDs; w != nil && (step != stateKeep || remake) {
		// (A transactional table's drop takes its write IDs with it.)
		if a := setWriteIDs(tk, p.db, w); a != nil {
			acts = append(acts, a)
		}
		next = withOpenAtCut(cur, tk.Name, w.Open)
	}
	d := apply(acts...)
	if len(p.gone) > 0 {
		d.Detail = fmt.Sprintf("%s written without %d file(s) gone from the source since the snapshot listed them (first %s); later events converge it",
			tk, len(p.gone), p.gone[0])
	}
	return p.progressWith(d, cur, next, prog, recs)
}

// snapshotPartitions plans a batch of PARTITION records of one table (the
// record and in.Batch): one add_partitions of those DR lacks, one
// alter_partitions of those it has, each partition as of its record's
// stamp, after every file of the batch is copied and the DR files the
// records do not list are pruned. The worker marks the batch's offsets
// together once it is applied; a crash before re-applies it, a no-op for
// every partition already written (claimed).
func (p *planner) snapshotPartitions(cur *hive_metastore.Database, prog drparam.Progress) Decision {
	head, s := p.ev, p.ev.Snapshot
	recs := append([]*schemas.Event{head}, p.in.Batch...)
	c0, ok := head.Payload.(*schemas.PartitionChange)
	if !ok || len(c0.After) != 1 {
		return p.noPayload()
	}
	tk := eventTable(head, c0.Table)
	for i, r := range recs {
		c, ok := r.Payload.(*schemas.PartitionChange)
		switch {
		case r.EventType != schemas.EventSnapshotPartition || r.Snapshot == nil || r.Snapshot.BootstrapID != s.BootstrapID || r.EventID != head.EventID:
			return halt(ReasonDecode, "a batch of bootstrap %s's partition records holds %s record %d (a bug)", s.BootstrapID, r.EventType, r.EventID)
		case !ok || len(c.After) != 1:
			return halt(ReasonDecode, "%s record %d of bootstrap %s does not carry exactly one partition", r.EventType, r.Snapshot.Seq, s.BootstrapID)
		case eventTable(r, c.Table) != tk:
			return halt(ReasonDecode, "a batch of %s's partition records holds one of %s (a bug)", tk, eventTable(r, c.Table))
		case s.Seq > 0 && r.Snapshot.Seq != s.Seq+int64(i):
			return halt(ReasonChainBroken, "CHAIN_BROKEN: record %d of bootstrap %s follows record %d on the topic: the records between are lost. "+
				"Bootstrap the database again: %s (a bootstrap later on the topic releases this halt)", r.Snapshot.Seq, s.BootstrapID, s.Seq+int64(i)-1,
				BootstrapCommand(p.db))
		}
	}
	tbl := p.in.Replica.Tables[tk]
	if tbl == nil {
		if sup := p.supersededBy(objKey{db: tk.DB, table: tk.Name}); sup != nil {
			return p.withProgress(p.noop(supersededReason(sup), "%s does not exist on DR; event %d (%s) removes or replaces it", tk, sup.EventID, sup.EventType), cur, prog, recs)
		}
		return halt(ReasonMissingObject, "%s does not exist on DR, but bootstrap %s has partitions of it (its TABLE record comes first)", tk, s.BootstrapID)
	}
	if tbl.Parameters[drparam.BootstrapID] != s.BootstrapID {
		// Its TABLE record was left out (a file of it cannot be copied and
		// a later event removes the table): what DR holds under the name
		// is an older table, which the END drops.
		return p.withProgress(p.noop(ReasonSuperseded, "%s on DR is not of bootstrap %s: its table record was left out (a later event removes it)", tk, s.BootstrapID), cur, prog, recs)
	}
	prune := prunes(s, tbl)
	var (
		add, alter []*hive_metastore.Partition
		prunesActs []Action
		waits      []string
		skipped    []string
	)
	for _, r := range recs {
		part := r.Payload.(*schemas.PartitionChange).After[0]
		h := snapStamp(r)
		p.ev, p.stampID = r, h // (what partition and filesReady read)
		pk := partKey(tk, part.Values)
		curP := p.in.Replica.Partitions[pk]
		switch {
		case curP != nil && claimed(curP.Parameters, s.BootstrapID, h):
			continue
		case curP != nil && stamp(curP.Parameters) > h:
			// Newer on DR than the snapshot read: kept, claimed.
			np := *curP
			np.Parameters = copyParams(curP.Parameters)
			np.Parameters[drparam.BootstrapID] = s.BootstrapID
			alter = append(alter, &np)
			continue
		}
		if d, ok := p.recordFilesReady(objKey{db: tk.DB, table: tk.Name, values: pk.Values}, r.Files); !ok {
			switch {
			case d.Outcome == NoOp:
				skipped = append(skipped, pk.Values)
				continue
			case d.Outcome == Wait && d.Reason == ReasonWaitingForFiles:
				waits = append(waits, d.WaitTasks...)
				continue
			}
			return d
		}
		np, err := p.partition(tbl, &part)
		if err != nil {
			return pathHalt(err)
		}
		np.Parameters[drparam.BootstrapID] = s.BootstrapID
		if prune && np.Sd != nil && np.Sd.Location != "" {
			keep, err := p.keepFiles(r.Files)
			if err != nil {
				return pathHalt(err)
			}
			prunesActs = append(prunesActs, PruneFiles{Dir: np.Sd.Location, Keep: keep, EventID: h, Source: part.Location})
		}
		if curP == nil {
			add = append(add, np)
		} else {
			alter = append(alter, np)
		}
	}
	p.ev, p.stampID = head, snapStamp(head)
	if len(waits) > 0 {
		return waitFiles(waits)
	}
	// Prunes first: once a partition carries its stamp a re-run skips it,
	// so a crash in between must not lose the prune.
	acts := prunesActs
	if len(add) > 0 {
		acts = append(acts, AddPartitions{DB: tk.DB, Table: tk.Name, Parts: add})
	}
	if len(alter) > 0 {
		acts = append(acts, AlterPartitions{DB: tk.DB, Table: tk.Name, Parts: alter})
	}
	var d Decision
	switch {
	case len(acts) > 0:
		d = apply(acts...)
		if len(skipped) > 0 {
			d.Detail = fmt.Sprintf("partitions %v of %s left out: a later event removes them", skipped, tk)
		}
		if len(p.gone) > 0 {
			d.Detail = strings.TrimPrefix(d.Detail+"; ", "; ") + fmt.Sprintf("partitions of %s written without %d file(s) gone from the source since the snapshot listed them (first %s); later events converge them",
				tk, len(p.gone), p.gone[0])
		}
	case len(skipped) > 0:
		d = p.noop(ReasonSuperseded, "partitions %v of %s are removed by a later event", skipped, tk)
	default:
		d = p.noop(ReasonAlreadyApplied, "the %d partitions of %s are at bootstrap %s's stamps", len(recs), tk, s.BootstrapID)
	}
	return p.withProgress(d, cur, prog, recs)
}

// snapshotEnd plans an END: the convergence (the DR tables of the scope
// and the partitions of the bootstrap's tables that it did not write are
// dropped), then the one write that makes the bootstrap applied: the DR
// database's repl.last.id moves to the cut and the bootstrap's parameters
// go (hivedr.bootstrap.done names it).
func (p *planner) snapshotEnd(cur *hive_metastore.Database, prog drparam.Progress) Decision {
	ev, s := p.ev, p.ev.Snapshot
	inv := p.in.Inventory
	if _, _, needed := InventoryScope(ev, cur); needed && inv == nil {
		return halt(ReasonDecode, "END of bootstrap %s planned without reading the DR database's tables (a bug)", s.BootstrapID)
	}
	var acts []Action
	var tables, parts int
	if inv != nil {
		names := make([]string, 0, len(inv.Tables))
		for n := range inv.Tables {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if inv.Tables[n] != s.BootstrapID {
				acts = append(acts, DropTable{DB: p.db, Name: n})
				tables++
			}
		}
		for _, n := range names {
			if stale := inv.Stale[n]; inv.Tables[n] == s.BootstrapID && len(stale) > 0 {
				d := DropPartitions{DB: p.db, Table: n}
				for _, sp := range stale {
					d.Values, d.Names = append(d.Values, sp.Values), append(d.Names, sp.Name)
				}
				acts = append(acts, d)
				parts += len(stale)
			}
		}
	}
	if inv != nil && inv.More {
		// A round of a large convergence: these drops now, the END again
		// (its next inventory finds the rest) before the database moves.
		return Decision{Outcome: Wait, Reason: ReasonConverging, Actions: acts,
			Detail: fmt.Sprintf("bootstrap %s's END drops %d tables and %d partitions of DR database %s the snapshot does not have, and reads it again for more",
				s.BootstrapID, tables, parts, p.db)}
	}
	db := *cur
	db.Parameters = copyParams(cur.Parameters)
	db.Parameters[drparam.LastID] = strconv.FormatInt(ev.EventID, 10)
	for _, k := range []string{drparam.BootstrapID, drparam.BootstrapState, drparam.BootstrapApplied, drparam.BootstrapNew, drparam.Halted} {
		delete(db.Parameters, k)
	}
	db.Parameters[drparam.BootstrapDone] = s.BootstrapID
	d := apply(append(acts, AlterDatabase{Name: p.db, DB: &db})...)
	d.Detail = fmt.Sprintf("bootstrap %s applied at event %d: dropped %d tables and %d partitions the snapshot does not have", s.BootstrapID, ev.EventID, tables, parts)
	if s.Seq > 0 && (prog.Tables != s.TableCount || prog.Partitions != s.PartitionCount) {
		d.Detail += fmt.Sprintf(" (handled %d tables and %d partitions; the snapshot says %d and %d)", prog.Tables, prog.Partitions, s.TableCount, s.PartitionCount)
	}
	return d
}
