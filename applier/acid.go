package applier

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/internal/acid"
	"github.com/hivedr/hivedr/internal/location"
	"github.com/hivedr/hivedr/schemas"
)

// Transactional (ACID) tables.
//
// Guarantee 3 (committed states only) for them is kept the way Hive's own
// REPL LOAD keeps it: the DR metastore replays each source transaction as
// a replicated one of its own, with the source's write IDs, and a DR
// reader that asks for valid write IDs sees exactly the writes whose
// commits were applied.
//
//   - ALLOC_WRITE_ID opens, on DR, a transaction standing for the source's
//     (open_txns with the replication policy and the source transaction
//     ID: type REPL_CREATED, idempotent) and allocates the source's write
//     IDs to it for the table (allocate_table_write_ids with
//     srcTxnToWriteIdList). Until it commits, those write IDs are open on
//     DR too, so any file under their delta directories is invisible.
//   - COMMIT_TXN carries the transaction's writes (write ID, table,
//     partition, files: from the message, or read by the tailer from the
//     source metastore). Its files are copied first (data before
//     metadata: the commit waits for them, keeping their delta_/base_
//     names so the write IDs stay meaningful); then commit_txn with the
//     writes of this database makes them visible at once. A transaction
//     that wrote two databases is committed in each as that database's
//     worker reaches the commit; one that only allocated here is
//     committed here without writes.
//   - ABORT_TXN aborts the DR transaction: its write IDs become aborted
//     ones, as on the source; its files were never copied.
//   - A write that left a base (base_N: an INSERT OVERWRITE) makes the
//     deltas and bases it covers obsolete: they are removed after its
//     commit, never before, so a DR reader always sees either the old
//     deltas or the new base.
//   - COMMIT_COMPACTION publishes what the compactor wrote (base_N_vT,
//     delta_A_B_vT), copied to DR under a hidden staging name, by renaming
//     each directory into place in one step under its name without the
//     visibility suffix (acid.ReplicaName: T is a source transaction,
//     meaningless to DR), then removes what it made obsolete, a base's
//     only once a DR reader reads that base. So a DR reader sees the old
//     directories or the new one, never part of it and never neither.
//     DR's metastore is not told: a compaction changes no write ID.
//
// The replication policy naming the DR transactions is the DR database's
// name, as REPL LOAD's is, so each database's worker has transactions of
// its own. A replayed event is a no-op on the metastore: open_txns returns
// the transaction already opened for the source's, allocation returns the
// write IDs already given, and commit and abort of a source transaction
// that DR no longer has open do nothing. A crash between a commit and the
// watermark therefore re-runs only the prune of obsolete files, which is
// idempotent too.

// ReplAllocate opens (or finds) the DR transactions standing for the
// source's and allocates the source's write IDs to them for DB.Table.
type ReplAllocate struct {
	Policy    string
	DB, Table string
	Txns      []schemas.TxnWriteID
}

// ReplCommit commits the DR transaction standing for source transaction
// SrcTxn with the writes it made in this database.
//
// Replaced names, by DR location, the files of Writes whose object a
// later event removes or replaces (a drop, a major compaction, an
// overwrite: fileSupersededBy), with that event's ID. Such a file may be
// missing on DR though its copy completed: the prune of an earlier event
// removes a later copy the applier's completions do not show yet when
// the source no longer holds its path (the soak found a delta removed by
// a major compaction's cleaner, copied from the change-management root,
// then pruned by its table's CREATE_TABLE). The commit leaves each such
// file that DR does not hold out of the write's record (the metastore
// reads every file it names, and would refuse the commit for ever); the
// later event brings the object's state on. A file not in Replaced is
// never left out.
type ReplCommit struct {
	Policy   string
	SrcTxn   int64
	Writes   []*hive_metastore.WriteEventInfo
	Replaced map[string]int64
}

// ReplAbort aborts the DR transaction standing for SrcTxn.
type ReplAbort struct {
	Policy string
	SrcTxn int64
}

// PruneObsolete removes, under the DR table or partition directory Dir,
// the files of the delta_, delete_delta_ and base_ directories that a
// base of write ID Base covers: deltas whose write IDs all lie at or
// below Base, and older bases; only once a DR reader of Table
// ("db.table") reads that base (no write ID up to it open on DR): until
// then a reader reads the deltas below it.
type PruneObsolete struct {
	Dir   string
	Base  int64
	Table string
	// EventID is the event that made them obsolete: a file copied for a
	// later event (a table made again at the path) is kept.
	EventID int64
}

// PublishCompacted moves a directory a compaction wrote, copied to DR
// under Staging (acid.StagingName), to Final (its acid.ReplicaName), in
// one rename. A Final already there is kept (a re-drive after the rename,
// or a base of the same write ID an overwrite left) and what is left at
// Staging removed.
type PublishCompacted struct {
	Staging, Final string
}

// PruneCompacted removes, under the DR table or partition directory Dir,
// the files of the ACID directories that By (the name of a directory a
// compaction wrote, as DR names it) makes obsolete: for a base, only once
// a DR reader of Table ("db.table") reads that base (no write ID up to it
// open on DR); for a minor compaction's delta, the deltas it merged.
type PruneCompacted struct {
	Dir, By, Table string
	// EventID is the compaction's event: a file copied for a later event
	// (a table made again at the path) is kept.
	EventID int64
}

func (ReplAllocate) isAction()     {}
func (ReplCommit) isAction()       {}
func (ReplAbort) isAction()        {}
func (PruneObsolete) isAction()    {}
func (PublishCompacted) isAction() {}
func (PruneCompacted) isAction()   {}

func (a ReplAllocate) String() string {
	return fmt.Sprintf("allocate write ids %v of %s.%s (policy %s)", a.Txns, a.DB, a.Table, a.Policy)
}

func (a ReplCommit) String() string {
	return fmt.Sprintf("commit replicated transaction %d (policy %s, %d writes)", a.SrcTxn, a.Policy, len(a.Writes))
}

func (a ReplAbort) String() string {
	return fmt.Sprintf("abort replicated transaction %d (policy %s)", a.SrcTxn, a.Policy)
}

func (a PruneObsolete) String() string {
	return fmt.Sprintf("prune what base_%d covers under %s", a.Base, a.Dir)
}

func (a PublishCompacted) String() string {
	return fmt.Sprintf("publish compacted %s as %s", a.Staging, a.Final)
}

func (a PruneCompacted) String() string {
	return fmt.Sprintf("prune what %s covers under %s", a.By, a.Dir)
}

// allocWriteIDs plans an ALLOC_WRITE_ID.
func (p *planner) allocWriteIDs(a *schemas.WriteIDAllocation) Decision {
	tk := tableKey(a.Database, a.Table)
	if tk.DB != p.db {
		return halt(ReasonDecode, "%s event %d names table %s on the topic of %s", p.ev.EventType, p.ev.EventID, tk, p.db)
	}
	tbl := p.in.Replica.Tables[tk]
	if tbl == nil {
		return p.missing(objKey{db: tk.DB, table: tk.Name}, "%s does not exist on DR", tk)
	}
	if s := stamp(tbl.Parameters); s > p.ev.EventID {
		return p.laterIncarnation(tk, s)
	}
	if len(a.Allocations) == 0 {
		return p.noop(ReasonTransaction, "%s of %s allocates nothing", p.ev.EventType, tk)
	}
	allocs, d, done := p.allocGuard(tk, a.Allocations) // acid_bootstrap.go
	if done {
		return d
	}
	return apply(ReplAllocate{Policy: p.db, DB: tk.DB, Table: tk.Name, Txns: allocs})
}

// commitTxn plans a COMMIT_TXN: the writes of this database, once their
// files are copied, then the prune of what their bases made obsolete.
func (p *planner) commitTxn(t *schemas.Transaction) Decision {
	if len(t.TxnIDs) != 1 {
		return halt(ReasonDecode, "%s event %d names %d transactions, want 1", p.ev.EventType, p.ev.EventID, len(t.TxnIDs))
	}
	byURI := make(map[string]schemas.FileRef, len(p.ev.Files))
	for _, f := range p.ev.Files {
		byURI[f.URI] = f
	}
	var (
		writes []*hive_metastore.WriteEventInfo
		prunes []Action
		waits  []string
		mine   int
		// replaced: the files of writes to objects a later event removes
		// or replaces (ReplCommit.Replaced)
		replaced map[string]int64
	)
	for _, w := range t.WriteIDs {
		tk := tableKey(w.Database, w.Table)
		if tk.DB != p.db {
			continue // another database's worker commits it there
		}
		mine++
		obj := objKey{db: tk.DB, table: tk.Name}
		tbl := p.in.Replica.Tables[tk]
		if tbl == nil {
			if s := p.supersededBy(obj); s != nil {
				continue // its allocation was left out too: nothing to commit there
			}
			return halt(ReasonMissingObject, "%s does not exist on DR (write %d of transaction %d)", tk, w.WriteID, t.TxnIDs[0])
		}
		if w.Partition != "" && p.in.Replica.Partitions[partKey(tk, schemas.PartitionValues(w.Partition))] == nil {
			// The metastore refuses a write to a partition it lacks.
			if s := p.supersededBy(writtenObj(w)); s != nil {
				continue // left out (a bootstrap's page, an event whose files were gone): so is its write
			}
			return halt(ReasonMissingObject, "%s partition %s does not exist on DR (write %d of transaction %d)", tk, w.Partition, w.WriteID, t.TxnIDs[0])
		}
		if d, bad := p.openAtCutCommit(tk, w, t.TxnIDs[0]); bad { // acid_bootstrap.go
			return d
		}
		files := make([]schemas.FileRef, 0, len(w.Files))
		for _, u := range w.Files {
			f, ok := byURI[u]
			if !ok {
				return halt(ReasonDecode, "%s event %d: file %s of the write to %s is not among the event's files", p.ev.EventType, p.ev.EventID, u, tk)
			}
			files = append(files, f)
		}
		// A file that could not be copied (gone from the source: its
		// compaction's cleaner ran first) is not waited for when a later
		// compaction of the written object covers this write: its rows
		// come with that compaction's output, and the commit leaves the
		// file out (Replaced).
		ready := files
		if s := p.compactedLater(w); s != nil {
			ready = nil
			for _, f := range files {
				if c, done := p.in.Copies[f.TaskID]; done && !c.OK() {
					if err := p.markReplaced(&replaced, f, s.EventID); err != nil {
						return pathHalt(err)
					}
					continue
				}
				ready = append(ready, f)
			}
		}
		if d, ok := p.filesReady(obj, ready); !ok {
			switch {
			case d.Outcome == Wait && d.Reason == ReasonWaitingForFiles:
				waits = append(waits, d.WaitTasks...)
				continue
			case d.Outcome == NoOp:
				// The object goes later: the write is left out. An
				// overwrite's base still makes what it replaced obsolete
				// on DR, or DR would read the rows it replaced until then.
				if _, base, err := p.writeInfo(w, files); err != nil {
					return pathHalt(err)
				} else if base != nil {
					prunes = append(prunes, *base)
				}
				continue
			}
			return d
		}
		info, base, err := p.writeInfo(w, files)
		if err != nil {
			return pathHalt(err)
		}
		if s := p.fileSupersededBy(writtenObj(w)); s != nil {
			for _, f := range files {
				if err := p.markReplaced(&replaced, f, s.EventID); err != nil {
					return pathHalt(err)
				}
			}
		}
		writes = append(writes, info)
		if base != nil {
			prunes = append(prunes, *base)
		}
	}
	if mine == 0 {
		// It allocated here (the tailer publishes a commit to the
		// databases it allocated in as well as those it wrote) and wrote
		// elsewhere, or nothing: its write IDs here become committed ones
		// without data, as on the source. A database where it did not
		// allocate has no DR transaction for it, and the commit does
		// nothing there.
		return apply(ReplCommit{Policy: p.db, SrcTxn: t.TxnIDs[0]})
	}
	if len(waits) > 0 {
		return waitFiles(waits)
	}
	// The commit first: the obsolete deltas go only once the base that
	// covers them is visible.
	return apply(append([]Action{ReplCommit{Policy: p.db, SrcTxn: t.TxnIDs[0], Writes: writes, Replaced: replaced}}, prunes...)...)
}

// markReplaced names f's DR location in *replaced (ReplCommit.Replaced)
// as replaced by event id, making the map when it is nil.
func (p *planner) markReplaced(replaced *map[string]int64, f schemas.FileRef, id int64) error {
	dr, err := p.mapLocation(f.URI)
	if err != nil {
		return err
	}
	if *replaced == nil {
		*replaced = map[string]int64{}
	}
	(*replaced)[dr] = id
	return nil
}

// compactedLater returns the first later event of the topic that
// compacts w's object over w's write ID: a major compaction's base at or
// above it, or a minor compaction's delta whose range holds it.
func (p *planner) compactedLater(w schemas.TableWriteID) *schemas.Event {
	obj := writtenObj(w)
	for _, ev := range p.in.Later {
		c, ok := ev.Payload.(*schemas.Compaction)
		if !ok || compacted(c) != obj {
			continue
		}
		for _, name := range c.Dirs {
			d, ok := acid.ParseDir(name)
			if ok && (d.Kind == acid.Base && d.Max >= w.WriteID || d.Kind != acid.Base && d.Min <= w.WriteID && w.WriteID <= d.Max) {
				return ev
			}
		}
	}
	return nil
}

// writtenObj is the object a write wrote: its partition, or its table.
func writtenObj(w schemas.TableWriteID) objKey {
	tk := tableKey(w.Database, w.Table)
	obj := objKey{db: tk.DB, table: tk.Name}
	if w.Partition != "" {
		obj.values = strings.Join(schemas.PartitionValues(w.Partition), "/")
	}
	return obj
}

// writeInfo is the DR's record of one write: its files as DR names them,
// each as uri#checksum#cmroot#subdir (the metastore reads the sub-directory
// from it), joined as the source's commit joins them; and the prune its
// base calls for, if it wrote one.
func (p *planner) writeInfo(w schemas.TableWriteID, files []schemas.FileRef) (*hive_metastore.WriteEventInfo, *PruneObsolete, error) {
	entries := make([]string, 0, len(files))
	var base *PruneObsolete
	for _, f := range files {
		dr, err := p.mapLocation(f.URI)
		if err != nil {
			return nil, nil, err
		}
		entries = append(entries, dr+"#"+f.Checksum+"##"+f.Subdir)
		if dir, n, ok := baseDir(dr); ok && (base == nil || n > base.Base) {
			base = &PruneObsolete{Dir: dir, Base: n, Table: strings.ToLower(w.Database + "." + w.Table), EventID: p.ev.EventID}
		}
	}
	info := &hive_metastore.WriteEventInfo{WriteId: w.WriteID, Database: strings.ToLower(w.Database), Table: strings.ToLower(w.Table),
		Files: strings.Join(entries, "]")}
	if w.Partition != "" {
		info.Partition = &w.Partition
	}
	return info, base, nil
}

// baseDir returns, for a file inside a base_N directory, the directory
// holding that base (the table's or partition's) and N.
func baseDir(file string) (dir string, n int64, ok bool) {
	parent := path.Dir(strings.TrimSuffix(file, "/"))
	d, ok := acid.ParseDir(path.Base(parent))
	if !ok || d.Kind != acid.Base {
		return "", 0, false
	}
	n = d.Max
	l, err := location.Parse(file)
	if err != nil {
		return "", 0, false
	}
	return l.Dir().Dir().String(), n, true
}

// compaction plans a COMMIT_COMPACTION: once every file the compaction
// wrote is copied (under its directories' staging names), each directory
// is published under its replica name, then what it made obsolete goes.
// An object DR does not have is left out when a later event removes it,
// as for any event; one stamped after the event already holds a state of
// the source at least as new (a bootstrap read it after the compaction).
func (p *planner) compaction(c *schemas.Compaction) Decision {
	tk := tableKey(c.Database, c.Table)
	if tk.DB != p.db {
		return halt(ReasonDecode, "%s event %d names table %s on the topic of %s", p.ev.EventType, p.ev.EventID, tk, p.db)
	}
	obj := objKey{db: tk.DB, table: tk.Name}
	what := tk.String()
	tbl := p.in.Replica.Tables[tk]
	if tbl == nil {
		return p.missing(obj, "%s does not exist on DR (compaction %d)", tk, c.CompactionID)
	}
	if s := stamp(tbl.Parameters); s > p.ev.EventID {
		return p.laterIncarnation(tk, s)
	}
	if c.Partition != "" {
		vals := schemas.PartitionValues(c.Partition)
		obj.values = strings.Join(vals, "/")
		what = partKey(tk, vals).String()
		part := p.in.Replica.Partitions[partKey(tk, vals)]
		if part == nil {
			return p.missing(obj, "%s does not exist on DR (compaction %d)", what, c.CompactionID)
		}
		if s := stamp(part.Parameters); s > p.ev.EventID {
			return p.noop(ReasonAlreadyApplied, "%s is at event %d", what, s)
		}
	}
	if c.Location == "" || len(c.Dirs) == 0 {
		return p.noop(ReasonCompactionGone, "compaction %d of %s: the tailer found nothing it wrote (the source no longer had the object)", c.CompactionID, what)
	}
	ready, ok := p.filesReady(obj, p.ev.Files)
	if !ok && ready.Outcome == Wait && (ready.Reason == ReasonSourceGone || ready.Reason == ReasonCopyFailed) {
		// Its output is gone from the source: a later compaction's
		// cleaner removed it. That compaction's output covers it.
		if s := p.compactionCoveredLater(c); s != nil {
			if w := p.pendingCopies(p.ev.Files); len(w) > 0 {
				d := waitFiles(w)
				d.Detail = fmt.Sprintf("compaction %d of %s is left out (event %d's compaction covers what it wrote), after its other %d file copies complete (first: task %s)",
					c.CompactionID, what, s.EventID, len(w), w[0])
				return d
			}
			ready = p.noop(ReasonSuperseded, "compaction %d of %s: %s; event %d's compaction covers what it wrote", c.CompactionID, what, ready.Detail, s.EventID)
		}
	}
	if !ok && !leftOut(ready) {
		return ready
	}
	dir, err := p.mapLocation(c.Location)
	if err != nil {
		return pathHalt(err)
	}
	dir = strings.TrimSuffix(dir, "/")
	var publish, prune []Action
	for _, d := range c.Dirs {
		name := acid.ReplicaName(d)
		publish = append(publish, PublishCompacted{Staging: dir + "/" + acid.StagingName(d), Final: dir + "/" + name})
		prune = append(prune, PruneCompacted{Dir: dir, By: name, Table: tk.String(), EventID: p.ev.EventID})
	}
	if !ok {
		// Left out: a file of it could not be copied and a later event
		// removes or replaces the object. What it made obsolete goes all
		// the same, so that DR does not show the directories it merged (a
		// base the source's cleaner removed) until that later event, only
		// lacks what the source removed after this one (guarantee 4).
		ready.Actions = append(ready.Actions, prune...)
		ready.Detail += "; what it made obsolete is pruned"
		return ready
	}
	return apply(append(publish, prune...)...)
}

// leftOut reports whether d leaves its event out because a later event
// removes or replaces the event's object.
func leftOut(d Decision) bool {
	return d.Outcome == NoOp && (d.Reason == ReasonSuperseded || d.Reason == ReasonSupersededByBootstrap)
}

// compactionCoveredLater returns the first later compaction of c's
// object whose output covers every directory c wrote: a major one's base
// at or above each, or a minor one's directory of the same kind whose
// write IDs hold each one's. The source's cleaner of that compaction
// removes c's output, which DR then no longer needs.
func (p *planner) compactionCoveredLater(c *schemas.Compaction) *schemas.Event {
	obj := compacted(c)
	for _, ev := range p.in.Later {
		l, ok := ev.Payload.(*schemas.Compaction)
		if !ok || compacted(l) != obj || len(c.Dirs) == 0 {
			continue
		}
		all := true
		for _, name := range c.Dirs {
			d, ok := acid.ParseDir(name)
			all = all && ok && slices.ContainsFunc(l.Dirs, func(ln string) bool {
				x, ok := acid.ParseDir(ln)
				return ok && (x.Kind == acid.Base && x.Max >= d.Max || x.Kind == d.Kind && x.Min <= d.Min && d.Max <= x.Max)
			})
		}
		if all {
			return ev
		}
	}
	return nil
}

// compacted is the object a compaction rewrote.
func compacted(c *schemas.Compaction) objKey {
	tk := tableKey(c.Database, c.Table)
	obj := objKey{db: tk.DB, table: tk.Name}
	if c.Partition != "" {
		obj.values = strings.Join(schemas.PartitionValues(c.Partition), "/")
	}
	return obj
}

// writesBase reports whether a compaction wrote a base (a major one).
func writesBase(c *schemas.Compaction) bool {
	return slices.ContainsFunc(c.Dirs, func(d string) bool {
		x, ok := acid.ParseDir(d)
		return ok && x.Kind == acid.Base
	})
}
