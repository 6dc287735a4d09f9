package applier

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/internal/acid"
	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/schemas"
)

// Transactional tables in a bootstrap, and the write IDs around it.
//
// A bootstrap's TABLE record of a transactional table carries the table's
// write-ID state on the source when the tailer listed it
// (snapshot.write_ids: high-water mark H, aborted write IDs, and write
// IDs still open when the tailer stopped waiting for them); its files are
// those a reader with that state reads. The DR table gets that state the
// way Hive's REPL LOAD gives it, with repl_tbl_writeid_state (SetWriteIDs:
// one aborted DR transaction per aborted write ID, NEXT_WRITE_ID = H+1;
// the still-open ones are sent as aborted, so they are invalid on DR).
// What DR already holds for the name decides how (writeIDStep):
//
//   - nothing (no write ID ever allocated under the name): set it;
//   - the snapshot's state already (a re-bootstrap of a table whose
//     transactions DR replayed up to the listing): kept;
//   - another state: the metastore sets a state only where none is
//     (repl_tbl_writeid_state is a no-op over an existing NEXT_WRITE_ID),
//     so the table is made anew: ResetWriteIDs moves the DR table, with
//     its write-ID bookkeeping, out of the way (data kept), the table is
//     created again, its partitions come from their records, and the
//     state is set. Bringing the state forward instead would take one DR
//     transaction per missing write ID and could not turn a write ID DR
//     has aborted into a valid one (the repair after an open-at-cut write
//     committed, below), so a remake is the one way that always converges.
//
// The events after the cut then replay over that state (producer/
// bootstrap_acid.go says why none is lost or resurrected):
//
//   - ALLOC_WRITE_ID of a write ID below DR's next write ID is a no-op
//     (allocGuard): the snapshot's state covers it (or it is a re-drive).
//     Sent, it would be destructive: in the replication flow the
//     metastore sets NEXT_WRITE_ID to the source's write ID and, when that
//     differs from its own, deletes every TXN_TO_WRITE_ID row of the table
//     (its aborted write IDs would turn valid). Its commit then finds no
//     DR transaction (a no-op on the metastore); its files, visible
//     already, are copied identical.
//   - COMMIT_TXN of a write ID that the snapshot marked open and DR holds
//     aborted halts the database (needs_bootstrap): committed on DR it
//     cannot be, and its data would stay invisible. The DR database
//     remembers those write IDs (openAtCutKey), so only such commits read
//     the DR table's state.
//
// Dropping a transactional DR table takes its write-ID bookkeeping with
// it (executor.dropTable), as a drop that deletes the data does on the
// source: the metastore keeps NEXT_WRITE_ID when the data is kept, and a
// later table of the same name would inherit it. So DR's next write ID of
// a name is always that of the table holding it, and the guard is exact.

// TableWriteIDs is what the DR metastore holds of a table's write IDs
// (read for the events WriteIDScope names).
type TableWriteIDs struct {
	// MaxAllocated is the highest write ID allocated under the name
	// (NEXT_WRITE_ID - 1, get_max_allocated_table_write_id); 0 when none.
	MaxAllocated int64
	// State is its write-ID state as a reader starting now sees it
	// (get_valid_write_ids); nil when not read.
	State *acid.WriteIDs
}

// WriteIDScope names the DR tables whose write IDs Plan needs for ev on
// db's topic, each with whether their state (TableWriteIDs.State) is
// needed too: the table of an allocation (its next write ID), the table
// of a bootstrap's record that carries write IDs, and the tables of a
// commit's writes that the DR database remembers as open at a cut.
func WriteIDScope(db string, ev *schemas.Event, rep Replica) map[TableKey]bool {
	db = strings.ToLower(db)
	out := map[TableKey]bool{}
	switch {
	case ev.EventType == schemas.EventSnapshotTable:
		c, ok := ev.Payload.(*schemas.TableChange)
		if ok && c.After != nil && ev.Snapshot != nil && ev.Snapshot.WriteIDs != nil {
			out[tableKey(c.After.Database, c.After.Name)] = true
		}
	case ev.EventType.Canonical() == schemas.EventAllocWriteID:
		if a, ok := ev.Payload.(*schemas.WriteIDAllocation); ok {
			if tk := tableKey(a.Database, a.Table); tk.DB == db && rep.Tables[tk] != nil {
				out[tk] = false
			}
		}
	case ev.EventType.Canonical() == schemas.EventCommitTxn:
		t, ok := ev.Payload.(*schemas.Transaction)
		cur := rep.Databases[db]
		if !ok || cur == nil {
			break
		}
		for _, w := range t.WriteIDs {
			tk := tableKey(w.Database, w.Table)
			if tk.DB == db && rep.Tables[tk] != nil && slices.Contains(openAtCut(cur, tk.Name), w.WriteID) {
				out[tk] = true
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// openAtCutPrefix + table, on a DR database, lists the table's write IDs
// that a bootstrap found open (snapshot.write_ids.open) and DR made
// aborted: a commit of one of them halts.
const openAtCutPrefix = drparam.OwnPrefix + "acid.open_at_cut."

func openAtCutKey(table string) string { return openAtCutPrefix + strings.ToLower(table) }

// openAtCut reads db's list of table's write IDs open at a cut.
func openAtCut(db *hive_metastore.Database, table string) []int64 {
	if db == nil {
		return nil
	}
	var out []int64
	for _, f := range strings.Split(db.Parameters[openAtCutKey(table)], ",") {
		if id, err := strconv.ParseInt(f, 10, 64); err == nil {
			out = append(out, id)
		}
	}
	return out
}

// SetWriteIDs gives a DR table with no write-ID state the snapshot's:
// write IDs up to HighWaterMark allocated, those of Invalid aborted, the
// others valid (repl_tbl_writeid_state, idempotent; see the executor).
type SetWriteIDs struct {
	DB, Table     string
	Policy        string
	HighWaterMark int64
	Invalid       []int64 // ascending
}

// ResetWriteIDs removes DR table DB.Table, keeping its data, together
// with the write-ID bookkeeping the metastore keeps under its name: the
// table is renamed out of the way (its location changed, so that no data
// moves) and that table dropped. When no table holds the name, Def is
// created first to carry the bookkeeping away.
type ResetWriteIDs struct {
	DB, Table string
	Def       *hive_metastore.Table
}

func (SetWriteIDs) isAction()   {}
func (ResetWriteIDs) isAction() {}

func (a SetWriteIDs) String() string {
	return fmt.Sprintf("set the write ids of %s.%s: high-water mark %d, invalid %v", a.DB, a.Table, a.HighWaterMark, a.Invalid)
}

func (a ResetWriteIDs) String() string {
	return fmt.Sprintf("remove %s.%s with its write-id bookkeeping (data kept)", a.DB, a.Table)
}

// invalidIDs are the write IDs a snapshot's state makes invalid on DR:
// the aborted ones and those still open when the tailer listed the
// table, ascending.
func invalidIDs(w *schemas.SnapshotWriteIDs) []int64 {
	out := slices.Concat(w.Aborted, w.Open)
	slices.Sort(out)
	return slices.Compact(out)
}

// subset reports whether every element of a is in b.
func subset(a, b []int64) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// keeps reports whether DR's write IDs dr are the snapshot's w: the same
// high-water mark, the same write IDs open (DR's transactions for them
// are still to end, as on the source) and the same aborted. A write ID
// the source aborted and DR holds valid is not the same state, even
// with no file of it on DR: the table DR holds may be an earlier one of
// the name, whose write ID of that number was committed (a table dropped
// and made again at the source after the cut, the snapshot reading the
// new one: soak seed 1796622539598896547), and a reader of DR would then
// count it valid where the source's reader does not.
func keeps(dr TableWriteIDs, w *schemas.SnapshotWriteIDs) bool {
	if dr.MaxAllocated != w.HighWaterMark || dr.State == nil {
		return false
	}
	same := func(a, b []int64) bool {
		return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
	}
	// (DR's metastore reads a table without a committed row as the
	// source's does: made whole the way the tailer makes the snapshot's.)
	st := dr.State.WithAllocated(dr.MaxAllocated)
	return same(st.Open, w.Open) && same(st.Aborted, w.Aborted)
}

// setDone reports whether SetWriteIDs of w has completed on DR.
func setDone(dr TableWriteIDs, w *schemas.SnapshotWriteIDs) bool {
	return dr.MaxAllocated == w.HighWaterMark && dr.State != nil && len(dr.State.Open) == 0 && subset(dr.State.Aborted, invalidIDs(w))
}

// resumable reports whether a SetWriteIDs of w interrupted by a crash
// can go on from what DR holds (see the executor's steps): nothing set,
// the state below the anchor set, or the anchor (its transaction open or
// committed) and part of the tail allocated (a tail transaction open at
// the highest).
func resumable(dr TableWriteIDs, w *schemas.SnapshotWriteIDs) bool {
	m := dr.MaxAllocated
	anchor := anchorOf(w.HighWaterMark, invalidIDs(w))
	switch {
	case m == 0:
		return true
	case anchor > 0 && m == anchor-1:
		return true
	case anchor > 0 && anchor <= m && m <= w.HighWaterMark:
		return dr.State != nil && subset(dr.State.Open, []int64{anchor, m})
	}
	return m == w.HighWaterMark && dr.State != nil && subset(dr.State.Open, []int64{w.HighWaterMark})
}

// stateStep is what a TABLE record does to the DR name's write IDs.
type stateStep int

const (
	stateKeep  stateStep = iota // DR's are the snapshot's, or none to set
	stateSet                    // none under the name: set them
	stateReset                  // another table's: made anew, then set
)

// writeIDStep decides, for bootstrap record s of transactional table tk
// (s.WriteIDs set), what becomes of the DR name's write IDs; claimed says
// the DR table is this bootstrap's already (a re-drive). set reports
// whether DR's state is (or becomes) the one the record sets, whose open
// write IDs are aborted on DR (the database lists them: openAtCutKey), as
// opposed to DR's own kept; ok is false with a halt.
func (p *planner) writeIDStep(tk TableKey, s *schemas.SnapshotInfo, claimedTable bool) (step stateStep, set bool, d Decision, ok bool) {
	w := s.WriteIDs
	dr, read := p.in.WriteIDs[tk]
	if !read {
		return 0, false, halt(ReasonDecode, "record %d of bootstrap %s planned without reading the write ids of %s on DR (a bug)", s.Seq, s.BootstrapID, tk), false
	}
	switch {
	case keeps(dr, w):
		return stateKeep, false, Decision{}, true
	case claimedTable && setDone(dr, w):
		return stateKeep, true, Decision{}, true
	case claimedTable && resumable(dr, w):
		return stateSet, true, Decision{}, true
	case !claimedTable && dr.MaxAllocated == 0 && (dr.State == nil || len(dr.State.Open)+len(dr.State.Aborted) == 0):
		return stateSet, true, Decision{}, true
	}
	return stateReset, true, Decision{}, true
}

// setWriteIDs is the action giving tk the snapshot's write IDs; nil when
// there is nothing to set (no write ID allocated at the source: the
// table's first replicated allocation makes the state).
func setWriteIDs(tk TableKey, policy string, w *schemas.SnapshotWriteIDs) Action {
	if w.HighWaterMark == 0 {
		return nil
	}
	return SetWriteIDs{DB: tk.DB, Table: tk.Name, Policy: policy, HighWaterMark: w.HighWaterMark, Invalid: invalidIDs(w)}
}

// withOpenAtCut returns the DR database cur with table's write IDs open
// at the cut recorded (when the snapshot's state was set: ids), or their
// record removed (nil ids); cur itself when nothing changes.
func withOpenAtCut(cur *hive_metastore.Database, table string, ids []int64) *hive_metastore.Database {
	key := openAtCutKey(table)
	val := ""
	if len(ids) > 0 {
		s := make([]string, len(ids))
		for i, id := range ids {
			s[i] = strconv.FormatInt(id, 10)
		}
		val = strings.Join(s, ",")
	}
	if cur == nil || cur.Parameters[key] == val {
		return cur
	}
	db := *cur
	db.Parameters = copyParams(cur.Parameters)
	if val == "" {
		delete(db.Parameters, key)
	} else {
		db.Parameters[key] = val
	}
	return &db
}

// progressWith is withProgress over the DR database next (cur with the
// record's open-at-cut list): the list is written with the progress, or
// alone when the progress does not move.
func (p *planner) progressWith(d Decision, cur, next *hive_metastore.Database, prog drparam.Progress, recs []*schemas.Event) Decision {
	n := len(d.Actions)
	d = p.withProgress(d, next, prog, recs)
	if len(d.Actions) == n && next != cur {
		db := *next
		db.Parameters = copyParams(next.Parameters)
		delete(db.Parameters, drparam.Halted)
		d.Actions = append(d.Actions, AlterDatabase{Name: p.db, DB: &db})
	}
	return d
}

// allocGuard keeps, of an allocation's write IDs for tk, those at or
// above DR's next write ID (all when DR's was not read); done (with a
// no-op) when none is.
func (p *planner) allocGuard(tk TableKey, allocs []schemas.TxnWriteID) ([]schemas.TxnWriteID, Decision, bool) {
	dr, ok := p.in.WriteIDs[tk]
	if !ok {
		return allocs, Decision{}, false
	}
	next := dr.MaxAllocated + 1
	var keep, below []schemas.TxnWriteID
	for _, a := range allocs {
		if a.WriteID < next {
			below = append(below, a)
		} else {
			keep = append(keep, a)
		}
	}
	if len(keep) == 0 {
		return nil, p.noop(ReasonBelowNextWriteID, "%s event %d allocates write ids %v of %s, below DR's next write id %d: allocated there already "+
			"(a re-drive) or covered by the write-ID state a bootstrap gave the table; replayed, the allocation would reset the table's write-ID bookkeeping",
			p.ev.EventType, p.ev.EventID, below, tk, next), true
	}
	return keep, Decision{}, false
}

// openAtCutCommit halts a commit of write w of tk (in source transaction
// txn) that a bootstrap found open and DR holds aborted.
func (p *planner) openAtCutCommit(tk TableKey, w schemas.TableWriteID, txn int64) (Decision, bool) {
	if !slices.Contains(openAtCut(p.in.Replica.Databases[p.db], tk.Name), w.WriteID) {
		return Decision{}, false
	}
	dr, ok := p.in.WriteIDs[tk]
	if !ok || dr.State == nil {
		return halt(ReasonDecode, "%s event %d planned without reading the write ids of %s on DR (a bug)", p.ev.EventType, p.ev.EventID, tk), true
	}
	// Read whole: with no committed row DR's own reading of the table
	// shows only its lowest aborted write ID (acid.WriteIDs.WithAllocated).
	if !slices.Contains(dr.State.WithAllocated(dr.MaxAllocated).Aborted, w.WriteID) {
		return Decision{}, false // not aborted on DR (any more): the commit goes on
	}
	return halt(ReasonNeedsBootstrap, "%s event %d commits write id %d of %s (source transaction %d), which was open when a bootstrap listed the table "+
		"(tailer.bootstrap_open_txn_wait passed) and is aborted on DR: its data would stay invisible there. Bootstrap the database again to set "+
		"the table's write ids anew: %s (its BEGIN later on the topic releases this halt)",
		p.ev.EventType, p.ev.EventID, w.WriteID, tk, txn, BootstrapCommand(p.db)), true
}
