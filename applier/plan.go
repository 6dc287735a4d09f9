package applier

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/internal/acid"
	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/internal/iceberg"
	"github.com/hivedr/hivedr/internal/location"
	"github.com/hivedr/hivedr/schemas"
)

// Policy is the part of the replication policy the plan needs.
type Policy interface {
	// MapLocation rewrites a source location to its DR location; a
	// location outside the source roots, or no mapping covers, is an error.
	MapLocation(src string) (string, error)
	// Replicated reports whether db.table is in the replication scope.
	Replicated(db, table string) bool
}

// Copy is what the applier knows of one copy task's completion.
type Copy struct {
	Status    schemas.CopyStatus
	TargetURI string
	// Error is copyd's error and evidence, for FAILED and SOURCE_GONE.
	Error string
}

// OK reports whether the file is at its target, verified.
func (c Copy) OK() bool {
	return c.Status == schemas.StatusCopied || c.Status == schemas.StatusSkippedIdentical
}

// TableKey, PartKey and Touched are the names of DR objects Plan reads
// (schemas.Touches says which for an event).
type (
	TableKey = schemas.TableKey
	PartKey  = schemas.PartKey
	Touched  = schemas.Touched
)

func tableKey(db, name string) TableKey { return schemas.NewTableKey(db, name) }

func partKey(t TableKey, values []string) PartKey { return schemas.NewPartKey(t, values) }

// Replica is what the DR metastore holds of the objects an event touches
// (see schemas.Touches); a missing entry means the object does not exist.
type Replica struct {
	Databases  map[string]*hive_metastore.Database
	Tables     map[TableKey]*hive_metastore.Table
	Partitions map[PartKey]*hive_metastore.Partition
}

// Input is everything Plan decides on.
type Input struct {
	// DB is the database whose topic the event came from.
	DB string
	// Source names the primary site; DR databases are marked with it.
	Source string
	Event  *schemas.Event
	// Replica is the DR state of the objects the event touches.
	Replica Replica
	// Copies holds the completions known for the event's files, by task ID.
	Copies map[string]Copy
	// Later are the events after this one already read from the same
	// topic, oldest first: a file that can no longer be copied is
	// tolerated only if one of them removes or replaces its object.
	Later []*schemas.Event
	// Batch are more records right after Event on the topic planned with
	// it as one batch: HIVEDR_SNAPSHOT_PARTITION records of the same
	// bootstrap and table as Event (itself one), or events of the same
	// table that may join Event's run (RunKey, batch.go). Later follows
	// the last of them.
	Batch []*schemas.Event
	// Inventory is what the convergence of a bootstrap's END reads of the
	// DR database (see InventoryScope); nil for every other record.
	Inventory *Inventory
	// WriteIDs are the DR tables' write IDs WriteIDScope names for the
	// event (acid_bootstrap.go); nil when it names none.
	WriteIDs map[TableKey]TableWriteIDs
	// Skip is set when an operator asked to skip this event.
	Skip bool
	// AcceptGap is set when an operator asked to skip the event the
	// record names as the previous one on the topic (a --skip-event for
	// a lost event): a broken chain up to it is accepted.
	AcceptGap bool
	Policy    Policy
}

// Outcome is what a Decision asks the worker to do.
type Outcome int

// The outcomes of Plan.
const (
	// Apply runs Actions, then moves on.
	Apply Outcome = iota
	// NoOp moves on without changing the replica (but Actions may still
	// hold the database's repl.last.id update).
	NoOp
	// Wait retries the same event later: files are not copied yet, or
	// another database's worker must apply the event first.
	Wait
	// Halt stops the database's worker at this event.
	Halt
)

func (o Outcome) String() string {
	switch o {
	case Apply:
		return "apply"
	case NoOp:
		return "noop"
	case Wait:
		return "wait"
	case Halt:
		return "halt"
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// CheckChain is the applier's half of the per-topic chain (guarantee 2 as
// a consumer sees it). A record of db's topic that names prev as the
// event published to the topic before it, read while the DR database is
// at event last (its repl.last.id), shows that the topic lost the records
// of events last+1..prev when prev > last: retention deleted them while
// the applier was stopped, the topic was deleted and recreated, or the DR
// database was restored from an older backup. Going on from the record
// would silently skip those events, so the database halts.
//
// prev <= last is fine: every event of the topic before the record was
// applied (or the DR database's position was moved past them by a
// cross-database rename's handshake). No check is possible when the DR
// database does not exist (it was dropped, or never created: a create
// starts it afresh, anything else halts database_missing) or the record
// predates the chain (prev nil).
func CheckChain(db, record string, prev *int64, cur *hive_metastore.Database) (Decision, bool) {
	if prev == nil || cur == nil {
		return Decision{}, false
	}
	last := stamp(cur.Parameters)
	if *prev <= last {
		return Decision{}, false
	}
	return halt(ReasonChainBroken, "CHAIN_BROKEN: %s says the event published to the topic before it is %d, but DR database %s "+
		"is at event %d: the topic no longer holds the records of events %d..%d (Kafka's retention deleted them while the "+
		"applier was stopped, the topic was recreated, or the DR database was restored from an older backup). If the topic "+
		"still holds them (a restored DR database), reset the applier group's offset on the topic to re-drive; otherwise "+
		"bootstrap the database again: %s (its BEGIN later on the topic releases this halt). To accept the loss and go on, "+
		"restart the applier with --skip-event %s:%d",
		record, *prev, db, last, last+1, *prev, BootstrapCommand(db), db, *prev), true
}

// Decision is Plan's answer.
type Decision struct {
	Outcome Outcome
	// Reason is a short label (metrics, hivedr.halted): see Reason.
	Reason Reason
	// Detail says it for a human, naming the objects and values.
	Detail  string
	Actions []Action
	// WaitTasks are the copy tasks a Wait waits for.
	WaitTasks []string
	// WaitDB is the database whose repl.last.id must reach the event
	// before this worker may go on (cross-database renames).
	WaitDB string
	// Covered is how many records of Input.Batch an Apply or NoOp covers
	// beyond Input.Event (the worker moves past them too): all of a
	// bootstrap's batch, the prefix of a run that applies together.
	Covered int
	// Results are, for a run of events (Covered > 0 and not a bootstrap's
	// records), each covered event's own result: applied, or its no-op
	// reason.
	Results []Reason
}

func eventTable(ev *schemas.Event, t *schemas.Table) TableKey { return schemas.EventTable(ev, t) }

// Plan decides what one event does to the replica. It does no I/O: the
// worker reads the state Touches names, asks Plan, and runs the actions.
//
// Guarantees kept here:
//   - Idempotent re-drive (5): an event at or below the DR database's
//     repl.last.id, or below the stamp of the object it changes, is a no-op.
//   - Data before metadata (4): a table, partition or insert whose files
//     are not all copied and verified waits. A file that cannot be copied
//     (FAILED, SOURCE_GONE) is tolerated only when a later event of the
//     topic removes or replaces its object; then that object is left out
//     (the replica reaches the final state without ever showing it
//     without files), but what a left-out INSERT OVERWRITE or compaction
//     replaced is pruned all the same. Otherwise the worker waits and,
//     after a grace period, halts.
//   - Loud halts (7): events carrying errors from the tailer, unknown
//     types, unmappable locations and missing objects halt the database.
func Plan(in Input) Decision {
	return keepLaterCopies(in, waitOwnCopies(in, plan(in)))
}

// waitOwnCopies makes an event left out because a later event removes
// or replaces its object wait for its own files' copies to complete
// (whatever their status) before the worker moves on. The later event
// prunes the object's directory; a copy of the left-out event still
// running then (copyd retrying through a DataNode restart, or falling
// back to the change-management root) would land after the prune and
// stay, a file the source no longer has (an earlier incarnation's base
// under a table made again at its path, an overwritten file back beside
// the overwrite's). Every copy task completes, so the wait ends.
func waitOwnCopies(in Input, d Decision) Decision {
	if !leftOut(d) {
		return d
	}
	evs := []*schemas.Event{in.Event}
	if d.Covered > 0 && d.Covered <= len(in.Batch) {
		evs = append(evs, in.Batch[:d.Covered]...)
	}
	var pending []string
	p := &planner{in: in}
	for _, ev := range evs {
		pending = append(pending, p.pendingCopies(ev.Files)...)
	}
	if len(pending) == 0 {
		return d
	}
	w := waitFiles(pending)
	w.Detail = fmt.Sprintf("left out (%s), after its %d file copies complete, so that none lands after a later prune (first: task %s)",
		d.Detail, len(pending), pending[0])
	return w
}

// keepLaterCopies adds to every prune of d the DR paths of the files the
// later events name under its directory. Copies run ahead of metadata: a
// later event's file may be on DR already, put there by a copy whose
// completion the applier has not read yet (the executor keeps only those
// whose completion it has), so a prune that went by the completions and
// the source's listing alone would remove it when the source no longer
// holds it either (a compaction's cleaner removed the delta its copy
// took from the change-management root), and DR would lack it for good.
// A kept file a later event removes is pruned by that event. Only events
// after the prune's own event count: a bootstrap record prunes at its
// stamp, and a held-back event at or before it is a no-op on the object
// (the snapshot holds its outcome), so a file it names is no later copy
// but possibly a stale one of the same name.
func keepLaterCopies(in Input, d Decision) Decision {
	if (d.Outcome != Apply && d.Outcome != NoOp) || len(in.Later) == 0 {
		return d
	}
	for i, a := range d.Actions {
		pf, ok := a.(PruneFiles)
		if !ok || pf.Source == "" {
			continue
		}
		// The later events' files under the prune's source directory, as
		// the metastore spells both (a cheap test over the look-ahead,
		// which can hold thousands of events), then where their copies
		// go on DR, as keepFiles names them.
		prefix := strings.TrimSuffix(pf.Source, "/") + "/"
		var keep []string
		for _, ev := range in.Later {
			at := ev.EventID
			if isSnapshot(ev.EventType) && ev.Snapshot != nil {
				at = snapStamp(ev) // a bootstrap record counts at its stamp
			}
			if at <= pf.EventID {
				continue
			}
			for _, f := range ev.Files {
				if !strings.HasPrefix(f.URI, prefix) {
					continue
				}
				if m, err := in.Policy.MapLocation(f.URI); err == nil {
					keep = append(keep, acid.ReplicaPath(m))
				}
			}
		}
		if len(keep) > 0 {
			pf.Keep = slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(pf.Keep), keep...))))
			d.Actions[i] = pf
		}
	}
	return d
}

// plan is Plan before keepLaterCopies.
func plan(in Input) Decision {
	ev := in.Event
	p := planner{in: in, ev: ev, db: strings.ToLower(in.DB), stampID: ev.EventID}
	cur := in.Replica.Databases[p.db]
	if isSnapshot(ev.EventType) {
		// A bootstrap's records have rules of their own (bootstrap.go):
		// they share the cut's event ID, skip the chain and --skip-event.
		d := p.snapshot(cur)
		if d.Outcome == Apply || d.Outcome == NoOp {
			d.Covered = len(in.Batch)
		}
		return d
	}
	if len(in.Batch) > 0 {
		return planRun(in) // batch.go
	}
	if d, refused := p.failedOver(cur); refused {
		return d // before anything else: not even a no-op is planned into it
	}
	if cur != nil && stamp(cur.Parameters) >= ev.EventID {
		return Decision{Outcome: NoOp, Reason: ReasonAlreadyApplied,
			Detail: fmt.Sprintf("DR database %s is at event %d", p.db, stamp(cur.Parameters))}
	}
	if d, refused := p.notOurs(cur); refused {
		return d
	}
	if in.Skip {
		// Skipping still moves the watermark (and carries the skip note
		// the worker adds), like any other no-op.
		d := p.noop(ReasonSkippedByOperator, "event skipped by an operator (see %s%d on the DR database)", drparam.SkippedPrefix, ev.EventID)
		if w := p.watermark(nil); w != nil {
			d.Actions = append(d.Actions, w)
		}
		return d
	}
	gap := "" // the note an accepted gap leaves on the operator's skip record
	// A discontinuity marker is checked its own way (plan): its position
	// is the tailer's start, not an event of the chain.
	if d, broken := CheckChain(p.db, fmt.Sprintf("event %d (%s)", ev.EventID, ev.EventType), ev.PreviousEventID, cur); broken && ev.EventType != schemas.EventDiscontinuity {
		if !in.AcceptGap {
			return d
		}
		gap = fmt.Sprintf("accepted the loss of events %d..%d (CHAIN_BROKEN at event %d)", stamp(cur.Parameters)+1, *ev.PreviousEventID, ev.EventID)
	}
	// Checked after the watermark and the skip: an event the tailer could
	// not decode is exactly what an operator skips, and a re-drive past
	// a skipped one must not halt on it again.
	if len(ev.Errors) > 0 {
		e := ev.Errors[0]
		d := e.Message
		if e.Path != "" && !strings.Contains(d, e.Path) {
			d += " (path " + e.Path + ")"
		}
		return halt(errorReason(e.Kind), "the tailer could not decode or route this event: %s", d)
	}
	if cur == nil && ev.EventType == schemas.EventDropDatabase {
		// Dropped already (a crash after the drop, before the offset
		// commit): the drop leaves no watermark to say so.
		return p.noop(ReasonAlreadyApplied, "DR database %s does not exist", p.db)
	}
	if cur == nil && (ev.EventType == schemas.EventDropTable || ev.EventType == schemas.EventDropPartition) {
		// What it drops went with its database: the state it leads to
		// holds. (Seen when a table's drop commits on the source after its
		// database's: two sessions dropping at once.)
		return p.noop(ReasonAlreadyApplied, "DR database %s does not exist, nor anything in it that %s would drop", p.db, ev.EventType)
	}
	if cur == nil && ev.EventType == schemas.EventDiscontinuity {
		// Nothing on DR can be stale: the next event creates the
		// database, or halts database_missing.
		return p.noop(ReasonAlreadyApplied, "DR database %s does not exist", p.db)
	}
	if cur == nil && ev.EventType != schemas.EventCreateDatabase {
		if s := p.supersededBy(objKey{db: p.db}); s != nil {
			return Decision{Outcome: NoOp, Reason: supersededReason(s),
				Detail: fmt.Sprintf("DR database %s does not exist and event %d (%s) drops or replaces it", p.db, s.EventID, s.EventType)}
		}
		return halt(ReasonDatabaseMissing, "DR database %s does not exist: replicate it from its CREATE_DATABASE event or bootstrap it (%s)", p.db, BootstrapCommand(p.db))
	}
	d := p.plan()
	if d.Outcome == Apply || d.Outcome == NoOp {
		if w := p.watermark(d.Actions); w != nil {
			d.Actions = append(d.Actions, w)
		}
		if gap != "" {
			AppendNote(d.Actions, p.db, drparam.SkipKey(*ev.PreviousEventID), gap)
		}
	}
	return d
}

// AppendNote adds text to parameter key of db in the actions that write
// db's definition (its watermark among them), so the note lands with
// them.
func AppendNote(actions []Action, db, key, text string) {
	for _, a := range actions {
		var d *hive_metastore.Database
		switch a := a.(type) {
		case AlterDatabase:
			if strings.EqualFold(a.Name, db) {
				d = a.DB
			}
		case CreateDatabase:
			if strings.EqualFold(a.DB.Name, db) {
				d = a.DB
			}
		}
		if d == nil {
			continue
		}
		if d.Parameters == nil {
			d.Parameters = map[string]string{}
		}
		if old := d.Parameters[key]; old != "" {
			text = old + "; " + text
		}
		d.Parameters[key] = text
	}
}

// HeartbeatInput is what PlanHeartbeat decides on.
type HeartbeatInput struct {
	// DB is the database whose topic the heartbeat came from.
	DB string
	// Source names the primary site (see Input.Source).
	Source    string
	Heartbeat *schemas.Heartbeat
	// Replica is the DR database; nil when it does not exist.
	Replica *hive_metastore.Database
	// AcceptGap: an operator skipped the heartbeat's previous event.
	AcceptGap bool
}

// PlanHeartbeat decides what a heartbeat does: nothing (NoOp), unless it
// shows the topic lost records (CheckChain): then the database halts, or,
// when an operator accepted the loss, its repl.last.id moves to the
// heartbeat's previous event (Apply). A quiet database's gap shows on its
// heartbeats, so its replica age cannot look fresh over lost events.
func PlanHeartbeat(in HeartbeatInput) Decision {
	db, cur := strings.ToLower(in.DB), in.Replica
	if d, refused := failedOverHalt(db, cur); refused {
		return d // loud even when only heartbeats come
	}
	if cur == nil || cur.Parameters[drparam.Target] != drparam.TargetMark(in.Source) {
		return Decision{Outcome: NoOp, Reason: ReasonHeartbeat} // events decide what to do with such a database
	}
	if cur.Parameters[drparam.BootstrapID] != "" {
		// While a bootstrap is applied, the DR database's repl.last.id
		// stays where it was before it (its END moves it to the cut), and
		// the records it skipped are not lost: the chain resumes after the
		// END. Nor is the replica complete up to the heartbeat before it.
		return Decision{Outcome: NoOp, Reason: ReasonInBootstrap}
	}
	d, broken := CheckChain(db, "a heartbeat", in.Heartbeat.PreviousEventID, cur)
	switch {
	case !broken:
		return Decision{Outcome: NoOp, Reason: ReasonHeartbeat}
	case !in.AcceptGap:
		return d
	}
	prev := *in.Heartbeat.PreviousEventID
	next := *cur
	next.Parameters = copyParams(cur.Parameters)
	next.Parameters[drparam.LastID] = strconv.FormatInt(prev, 10)
	delete(next.Parameters, drparam.Halted)
	note := fmt.Sprintf("accepted the loss of events %d..%d (CHAIN_BROKEN at a heartbeat)", stamp(cur.Parameters)+1, prev)
	actions := []Action{AlterDatabase{Name: db, DB: &next}}
	AppendNote(actions, db, drparam.SkipKey(prev), note)
	return Decision{Outcome: Apply, Reason: ReasonGapAccepted, Actions: actions, Detail: note}
}

type planner struct {
	in Input
	ev *schemas.Event
	db string
	// stampID is the repl.last.id the objects written get: the event's
	// ID, or for a bootstrap's table or partition its stamp.
	stampID int64
	// gone are the files of bootstrap records written without them: the
	// source no longer had them (filesReady).
	gone []string
}

// notOurs refuses a DR database that is not this pipeline's replica.
func (p *planner) notOurs(cur *hive_metastore.Database) (Decision, bool) {
	if d, refused := p.failedOver(cur); refused {
		return d, true
	}
	if cur == nil || cur.Parameters[drparam.Target] == drparam.TargetMark(p.in.Source) {
		return Decision{}, false
	}
	if got := cur.Parameters[drparam.Target]; got != "" {
		return halt(ReasonNotAReplica, "DR database %s is the replication target of %s=%s, not of this pipeline (%s): refusing to write into it",
			p.db, drparam.Target, got, drparam.TargetMark(p.in.Source)), true
	}
	return halt(ReasonNotAReplica, "DR database %s exists but is not a replication target (no %s parameter): refusing to write into it", p.db, drparam.Target), true
}

// failedOver refuses a DR database that `hivedr failover` made the
// primary (drparam.FailedOverAt).
func (p *planner) failedOver(cur *hive_metastore.Database) (Decision, bool) {
	return failedOverHalt(p.db, cur)
}

func failedOverHalt(db string, cur *hive_metastore.Database) (Decision, bool) {
	if cur == nil || cur.Parameters[drparam.FailedOverAt] == "" {
		return Decision{}, false
	}
	return halt(ReasonFailedOver, "DR database %s was failed over at %s (%s, reflecting source event %s): it is the primary now; refusing to write into it (stop this pipeline's applier for it, or fail back)",
		db, cur.Parameters[drparam.FailedOverAt], cur.Parameters[drparam.FailoverMode], cur.Parameters[drparam.FailoverEventID]), true
}

func halt(reason Reason, format string, args ...any) Decision {
	return Decision{Outcome: Halt, Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

func (p *planner) noop(reason Reason, format string, args ...any) Decision {
	return Decision{Outcome: NoOp, Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

func apply(actions ...Action) Decision {
	return Decision{Outcome: Apply, Reason: ReasonApplied, Actions: actions}
}

// Event types the replica has nothing to do for, by reason. They still
// advance the database's repl.last.id and are counted by type.
var notReplicated = map[schemas.EventType]Reason{
	schemas.EventUpdateTableColStat:          ReasonNotReplicatedColumnStats,
	schemas.EventDeleteTableColStat:          ReasonNotReplicatedColumnStats,
	schemas.EventUpdatePartitionColStat:      ReasonNotReplicatedColumnStats,
	schemas.EventDeletePartitionColStat:      ReasonNotReplicatedColumnStats,
	schemas.EventUpdatePartitionColStatBatch: ReasonNotReplicatedColumnStats,
	schemas.EventCreateFunction:              ReasonNotReplicatedFunctions,
	schemas.EventDropFunction:                ReasonNotReplicatedFunctions,
	schemas.EventAddPrimaryKey:               ReasonNotReplicatedConstraints,
	schemas.EventAddForeignKey:               ReasonNotReplicatedConstraints,
	schemas.EventAddUniqueConstraint:         ReasonNotReplicatedConstraints,
	schemas.EventAddNotNullConstraint:        ReasonNotReplicatedConstraints,
	schemas.EventAddDefaultConstraint:        ReasonNotReplicatedConstraints,
	schemas.EventAddCheckConstraint:          ReasonNotReplicatedConstraints,
	schemas.EventDropConstraint:              ReasonNotReplicatedConstraints,
	schemas.EventReload:                      ReasonNotReplicatedReload,
}

func (p *planner) plan() Decision {
	ev := p.ev
	typ := ev.EventType.Canonical()
	switch typ {
	case schemas.EventCreateDatabase, schemas.EventAlterDatabase:
		c, ok := ev.Payload.(*schemas.DatabaseChange)
		if !ok || c.After == nil {
			return p.noPayload()
		}
		return p.putDatabase(c.After)
	case schemas.EventDropDatabase:
		return apply(DropDatabase{Name: p.db})
	case schemas.EventCreateTable, schemas.EventAlterTable, schemas.EventDropTable:
		c, ok := ev.Payload.(*schemas.TableChange)
		if !ok {
			return p.noPayload()
		}
		switch {
		case ev.EventType == schemas.EventCreateTable && c.After != nil:
			return p.createTable(c.After)
		case ev.EventType == schemas.EventDropTable && c.Before != nil:
			return p.dropTable(c.Before)
		case ev.EventType == schemas.EventAlterTable && c.Before != nil && c.After != nil:
			return p.alterTable(c)
		}
		return p.noPayload()
	case schemas.EventAddPartition, schemas.EventAlterPartition, schemas.EventAlterPartitions, schemas.EventDropPartition:
		c, ok := ev.Payload.(*schemas.PartitionChange)
		if !ok {
			return p.noPayload()
		}
		return p.partitions(c)
	case schemas.EventInsert:
		c, ok := ev.Payload.(*schemas.InsertData)
		if !ok {
			return p.noPayload()
		}
		return p.insert(c)
	case schemas.EventAllocWriteID:
		a, ok := ev.Payload.(*schemas.WriteIDAllocation)
		if !ok {
			return p.noPayload()
		}
		return p.allocWriteIDs(a) // acid.go
	case schemas.EventCommitTxn:
		t, ok := ev.Payload.(*schemas.Transaction)
		if !ok {
			return p.noPayload()
		}
		return p.commitTxn(t)
	case schemas.EventAbortTxn:
		t, ok := ev.Payload.(*schemas.Transaction)
		if !ok || len(t.TxnIDs) != 1 {
			return p.noPayload()
		}
		return apply(ReplAbort{Policy: p.db, SrcTxn: t.TxnIDs[0]})
	case schemas.EventCommitCompaction:
		c, ok := ev.Payload.(*schemas.Compaction)
		if !ok {
			return p.noPayload()
		}
		return p.compaction(c) // acid.go
	case schemas.EventOpenTxn:
		// DR opens its transaction when the source's allocates a write ID
		// in this database (OPEN_TXN names no database: the tailer
		// publishes none).
		return p.noop(ReasonTransaction, "%s: opened on DR with its first write ID", ev.EventType)
	case schemas.EventAcidWrite, schemas.EventBatchAcidWrite:
		return p.noop(ReasonAcidWriteAtCommit, "%s on %s.%s: the write is applied with its COMMIT_TXN", ev.EventType, ev.Database, ev.Table)
	case schemas.EventDiscontinuity:
		// Plan returned already if the DR database is at or past S.
		x := stamp(p.in.Replica.Databases[p.db].Parameters)
		return halt(ReasonNeedsBootstrap, "%s: a tailer started without a checkpoint after event %d, but DR database %s is at event %d: "+
			"events %d..%d of the database may never have been published. Bootstrap the database (%s); a bootstrap "+
			"of it later on the topic releases this halt. To accept the possible loss instead, restart the applier with --skip-event %s:%d",
			ev.EventType, ev.EventID, p.db, x, x+1, ev.EventID, BootstrapCommand(p.db), p.db, ev.EventID)
	}
	if r, ok := notReplicated[typ]; ok {
		return p.noop(r, "%s events are not replicated", ev.EventType)
	}
	return halt(ReasonUnknownEventType, "event type %s is not known to the applier", ev.EventType)
}

func (p *planner) noPayload() Decision {
	return halt(ReasonDecode, "%s event %d has no decoded payload of the expected kind (got %T)", p.ev.EventType, p.ev.EventID, p.ev.Payload)
}

// watermark is the action that moves the worker's DR database to this
// event, or nil when the actions already did (or dropped it).
func (p *planner) watermark(actions []Action) Action {
	db := p.in.Replica.Databases[p.db]
	for _, a := range actions {
		switch a := a.(type) {
		case DropDatabase:
			if a.Name == p.db {
				return nil
			}
		case CreateDatabase:
			if strings.EqualFold(a.DB.Name, p.db) {
				return nil
			}
		case AlterDatabase:
			if a.Name == p.db {
				return nil
			}
		}
	}
	if db == nil {
		return nil
	}
	next := *db
	next.Parameters = copyParams(db.Parameters)
	next.Parameters[drparam.LastID] = strconv.FormatInt(p.ev.EventID, 10)
	delete(next.Parameters, drparam.Halted)
	return AlterDatabase{Name: p.db, DB: &next}
}

// stamp is the source event ID recorded in a DR object's parameters; 0
// when there is none.
func stamp(params map[string]string) int64 {
	n, _ := strconv.ParseInt(params[drparam.LastID], 10, 64)
	return n
}

func copyParams(m map[string]string) map[string]string {
	out := make(map[string]string, len(m)+2)
	for k, v := range m {
		out[k] = v
	}
	return out
}

// ---- databases

func (p *planner) putDatabase(src *schemas.Database) Decision {
	db, d, ok := p.drDatabase(src)
	if !ok {
		return d
	}
	db.Parameters[drparam.LastID] = strconv.FormatInt(p.ev.EventID, 10)
	if p.in.Replica.Databases[p.db] == nil {
		return apply(CreateDatabase{DB: db})
	}
	return apply(AlterDatabase{Name: p.db, DB: db})
}

// drDatabase is the DR database for the source's src: its definition,
// locations mapped, hivedr's own parameters of the current DR database
// kept (but the halt note), the source's own dropped, and marked as this
// pipeline's replica; no repl.last.id. ok is false when it cannot be made (d says why).
func (p *planner) drDatabase(src *schemas.Database) (db *hive_metastore.Database, d Decision, ok bool) {
	if !strings.EqualFold(src.Name, p.db) {
		return nil, halt(ReasonDecode, "%s event %d names database %s on the topic of %s", p.ev.EventType, p.ev.EventID, src.Name, p.db), false
	}
	db = &hive_metastore.Database{
		Name: p.db, Description: src.Description, Parameters: copyParams(src.Parameters),
		CatalogName: strPtr("hive"),
	}
	if src.Owner != "" {
		db.OwnerName = strPtr(src.Owner)
		user := hive_metastore.PrincipalType_USER
		db.OwnerType = &user
	}
	var err error
	if db.LocationUri, err = p.mapLocation(src.Location); err != nil {
		return nil, pathHalt(err), false
	}
	if src.ManagedLocation != "" {
		m, err := p.mapLocation(src.ManagedLocation)
		if err != nil {
			return nil, pathHalt(err), false
		}
		db.ManagedLocationUri = &m
	}
	for k := range db.Parameters {
		// A source that is itself a replica, or was one (a reverse
		// pipeline after a failover reads the failed-over database),
		// carries hivedr's bookkeeping of its own pipeline: it means
		// nothing here, and its failover mark would stop this applier.
		if strings.HasPrefix(k, drparam.OwnPrefix) {
			delete(db.Parameters, k)
		}
	}
	cur := p.in.Replica.Databases[p.db]
	if cur != nil {
		for k, v := range cur.Parameters { // our own bookkeeping survives the source's alters
			if strings.HasPrefix(k, drparam.OwnPrefix) && k != drparam.Halted {
				db.Parameters[k] = v
			}
		}
	}
	delete(db.Parameters, drparam.LastID) // the source's own, if any, means nothing here
	db.Parameters[drparam.Target] = drparam.TargetMark(p.in.Source)
	return db, Decision{}, true
}

func strPtr(s string) *string { return &s }

type pathError struct{ err error }

func (e pathError) Error() string { return e.err.Error() }

func pathHalt(err error) Decision {
	return halt(ReasonPathOutsideRoots, "%v", err)
}

func (p *planner) mapLocation(loc string) (string, error) {
	if loc == "" {
		return "", nil
	}
	m, err := p.in.Policy.MapLocation(loc)
	if err != nil {
		return "", pathError{fmt.Errorf("location %s of event %d: %w", loc, p.ev.EventID, err)}
	}
	return m, nil
}

// ---- tables

func (p *planner) createTable(src *schemas.Table) Decision {
	k := tableKey(src.Database, src.Name)
	cur := p.in.Replica.Tables[k]
	if cur != nil && stamp(cur.Parameters) >= p.ev.EventID {
		return p.noop(ReasonAlreadyApplied, "%s is at event %d", k, stamp(cur.Parameters))
	}
	if d, ok := p.filesReady(objKey{db: k.DB, table: k.Name}, p.ev.Files); !ok {
		return d
	}
	t, err := p.table(src)
	if err != nil {
		return pathHalt(err)
	}
	// The DR directory is made to hold what the event names (prunes.go),
	// before the table is: an earlier object's files at the same path
	// must never show in it.
	acts, err := p.recreatePrune(t.Sd, p.ev.Files, src.Location)
	if err != nil {
		return pathHalt(err)
	}
	if cur != nil { // an older incarnation the replica never saw dropped
		acts = append(acts, DropTable{DB: k.DB, Name: k.Name})
	}
	return apply(append(acts, CreateTable{Table: t})...)
}

func (p *planner) dropTable(src *schemas.Table) Decision {
	k := tableKey(src.Database, src.Name)
	cur := p.in.Replica.Tables[k]
	if cur == nil {
		return p.noop(ReasonAlreadyApplied, "%s does not exist on DR", k)
	}
	if stamp(cur.Parameters) >= p.ev.EventID {
		return p.noop(ReasonAlreadyApplied, "%s on DR is a newer incarnation (event %d)", k, stamp(cur.Parameters))
	}
	acts, err := p.dropPrune(src, src.Location)
	if err != nil {
		return pathHalt(err)
	}
	return apply(append(acts, DropTable{DB: k.DB, Name: k.Name})...)
}

func (p *planner) alterTable(c *schemas.TableChange) Decision {
	bk, ak := tableKey(c.Before.Database, c.Before.Name), tableKey(c.After.Database, c.After.Name)
	if bk == ak {
		return p.alterInPlace(c, bk)
	}
	return p.rename(c, bk, ak)
}

// alterInPlace plans an alter of table k that keeps its name (a
// truncate among them).
func (p *planner) alterInPlace(c *schemas.TableChange, k TableKey) Decision {
	cur := p.in.Replica.Tables[k]
	e := p.ev.EventID
	// A truncate replaces an unpartitioned table's contents whole, so
	// it also brings back a table left out earlier because a file of
	// it could not be copied (see supersededBy).
	recreate := cur == nil && c.IsTruncate && len(c.After.PartitionKeys) == 0
	if cur == nil && !recreate {
		return p.missing(objKey{db: k.DB, table: k.Name}, "%s does not exist on DR", k)
	}
	if cur != nil && stamp(cur.Parameters) >= e {
		return p.noop(ReasonAlreadyApplied, "%s is at event %d", k, stamp(cur.Parameters))
	}
	if d, ok := p.icebergChain(c, cur); !ok {
		return d
	}
	// Data before metadata: the files the alter brings (an external
	// table moved to another directory; an Iceberg commit's new
	// snapshot, whose metadata DR's pointer names only after the flip).
	if len(p.ev.Files) > 0 {
		if d, ok := p.filesReady(objKey{db: k.DB, table: k.Name}, p.ev.Files); !ok {
			return d
		}
	}
	t, err := p.table(c.After)
	if err != nil {
		return pathHalt(err)
	}
	// Prune before stamping: once the table carries the event's stamp
	// a re-run is a no-op, so a crash in between must not lose the prune.
	var acts []Action
	if c.IsTruncate && len(t.PartitionKeys) == 0 && t.Sd != nil && t.Sd.Location != "" {
		acts = append(acts, PruneFiles{Dir: t.Sd.Location, EventID: e, Source: c.After.Location})
	}
	if a, ok := expireIceberg(cur, t, e); ok {
		acts = append(acts, a)
	}
	if recreate {
		return apply(append(acts, CreateTable{Table: t})...)
	}
	return apply(append(acts, AlterTable{DB: k.DB, Name: k.Name, Table: t})...)
}

// expireIceberg is the removal of what the snapshots an Iceberg commit
// expired reached, when DR's table cur is an Iceberg table whose pointer
// the commit (to t) moves: the executor reads both metadata files on DR
// and removes nothing unless snapshots went.
func expireIceberg(cur, t *hive_metastore.Table, e int64) (ExpireIceberg, bool) {
	if cur == nil || t.Sd == nil || t.Sd.Location == "" || !iceberg.IsTable(cur.Parameters) || !iceberg.IsTable(t.Parameters) {
		return ExpireIceberg{}, false
	}
	prev, next := cur.Parameters[iceberg.ParamMetadataLocation], t.Parameters[iceberg.ParamMetadataLocation]
	if prev == "" || next == "" || prev == next {
		return ExpireIceberg{}, false
	}
	return ExpireIceberg{DB: t.DbName, Table: t.TableName, Root: t.Sd.Location, Prev: prev, Next: next, EventID: e}, true
}

// rename plans the rename of table bk to ak.
func (p *planner) rename(c *schemas.TableChange, bk, ak TableKey) Decision {
	cur, dst := p.in.Replica.Tables[bk], p.in.Replica.Tables[ak]
	e := p.ev.EventID
	if dst != nil && stamp(dst.Parameters) >= e {
		return p.renamedAlready(bk, ak, cur, dst)
	}
	fromInScope := p.in.Policy.Replicated(bk.DB, bk.Name)
	cross := ak.DB != bk.DB
	if cross && p.db == ak.DB && fromInScope {
		return p.renameAtDestination(bk, ak)
	}
	if !fromInScope {
		return p.renameIntoScope(bk, ak, dst)
	}
	if !p.in.Policy.Replicated(ak.DB, ak.Name) { // leaving the scope
		if cur == nil || stamp(cur.Parameters) >= e {
			return p.noop(ReasonAlreadyApplied, "%s no longer on DR", bk)
		}
		return apply(DropTable{DB: bk.DB, Name: bk.Name})
	}
	if cur == nil {
		return p.renameMissing(c, bk, ak, dst, cross)
	}
	if stamp(cur.Parameters) >= e {
		return p.noop(ReasonAlreadyApplied, "%s is at event %d", bk, stamp(cur.Parameters))
	}
	if dstDB := p.in.Replica.Databases[ak.DB]; cross && (dstDB == nil || stamp(dstDB.Parameters) < e-1 || dstDB.Parameters[drparam.BootstrapID] != "") {
		// Wait until the destination database's worker has applied
		// everything before the rename (it records event-1 when it gets
		// here): a table it still has to rename away or drop may hold the
		// name. If the database never comes, that worker halts on
		// database_missing. While a bootstrap is applied to it, its
		// repl.last.id says nothing of its tables (and its END would drop
		// a table renamed in meanwhile, not being of the bootstrap): the
		// worker reaches the rename after the END.
		return Decision{Outcome: Wait, Reason: ReasonCrossDatabase, WaitDB: ak.DB,
			Detail: fmt.Sprintf("rename of %s to %s waits until database %s is applied up to event %d", bk, ak, ak.DB, e-1)}
	}
	t, err := p.table(c.After)
	if err != nil {
		return pathHalt(err)
	}
	var acts []Action
	if dst != nil { // a name reused: the old holder was dropped at the source
		acts = append(acts, DropTable{DB: ak.DB, Name: ak.Name})
	}
	return apply(append(acts, AlterTable{DB: bk.DB, Name: bk.Name, Table: t})...)
}

// renamedAlready plans a rename whose new name ak holds the table at or
// after the event on DR.
func (p *planner) renamedAlready(bk, ak TableKey, cur, dst *hive_metastore.Table) Decision {
	if cur != nil && stamp(cur.Parameters) < p.ev.EventID && bk.DB == p.db && p.in.Policy.Replicated(bk.DB, bk.Name) {
		// The new name was read after the rename (a bootstrap read the
		// table under it), while the old name still holds an older
		// state (the bootstrap had published it before the rename):
		// the rename is done under the new name, and the old name is
		// gone at the source, so it goes here too (data kept, as for
		// drops). A table made again under the old name later carries
		// a later stamp, so a re-drive never drops it.
		d := apply(DropTable{DB: bk.DB, Name: bk.Name})
		d.Detail = fmt.Sprintf("%s is already on DR under its new name %s (at event %d, read after the rename); the old name goes", bk, ak, stamp(dst.Parameters))
		return d
	}
	return p.noop(ReasonAlreadyApplied, "%s is at event %d", ak, stamp(dst.Parameters))
}

// renameAtDestination is the destination database's worker's part of a
// cross-database rename. A cross-database rename changes both
// databases, so it must land in both orders: the destination worker
// first records that everything before the rename is applied
// (repl.last.id = event-1), then waits while the source database's
// worker, which waited for that, renames.
func (p *planner) renameAtDestination(bk, ak TableKey) Decision {
	e := p.ev.EventID
	if own := p.in.Replica.Databases[p.db]; own != nil && stamp(own.Parameters) < e-1 {
		next := *own
		next.Parameters = copyParams(own.Parameters)
		next.Parameters[drparam.LastID] = strconv.FormatInt(e-1, 10)
		delete(next.Parameters, drparam.Halted) // as any watermark: the worker runs again
		return Decision{Outcome: Wait, Reason: ReasonCrossDatabase, WaitDB: bk.DB, Actions: []Action{AlterDatabase{Name: p.db, DB: &next}},
			Detail: fmt.Sprintf("rename of %s to %s: database %s is applied up to it; database %s's worker renames", bk, ak, ak.DB, bk.DB)}
	}
	if src := p.in.Replica.Databases[bk.DB]; src == nil || stamp(src.Parameters) < e {
		return Decision{Outcome: Wait, Reason: ReasonCrossDatabase, WaitDB: bk.DB,
			Detail: fmt.Sprintf("rename of %s to %s is applied by database %s's worker", bk, ak, bk.DB)}
	}
	return p.noop(ReasonAppliedByOtherDatabase, "rename of %s to %s was handled by database %s's worker", bk, ak, bk.DB)
}

// renameIntoScope plans a rename from a name out of the replication
// scope. Guarantee 4: the table's data was never copied (its database or
// name was out of scope), so creating it would show a table without its
// files. A bootstrap of the table (the tailer starts one after such a
// rename) or of its database, later on the topic, brings it with its
// files: until then the name stays empty (a stale holder of it goes), so
// the events in between find the table missing and are left out too.
func (p *planner) renameIntoScope(bk, ak TableKey, dst *hive_metastore.Table) Decision {
	if s := p.supersededBy(objKey{db: ak.DB, table: ak.Name}); s != nil && s.EventType == schemas.EventSnapshotBegin {
		d := p.noop(ReasonSupersededByBootstrap, "%s is renamed into the replication scope from %s; bootstrap %s (event %d) brings it",
			ak, bk, s.Snapshot.BootstrapID, s.EventID)
		if dst != nil && ak.DB == p.db {
			d.Outcome, d.Actions = Apply, []Action{DropTable{DB: ak.DB, Name: ak.Name}}
		}
		return d
	}
	return halt(ReasonEntersScope, "%s is renamed into the replication scope from %s, which is not replicated: its files were never copied; "+
		"copy them (hivedr copy) and skip this event, or bootstrap the table", ak, bk)
}

// renameMissing plans a rename within the scope whose old name bk is
// not on DR.
func (p *planner) renameMissing(c *schemas.TableChange, bk, ak TableKey, dst *hive_metastore.Table, cross bool) Decision {
	if dst != nil && !cross {
		// The old name is gone from DR and the new one holds an older
		// stamp: a bootstrap read the table under its new name, after the
		// rename (a table cannot be renamed onto a name that exists, so no
		// other holder of the name can be older than the rename on a
		// replica applied up to it). The rename is done; its event sets
		// the table as a re-drive would.
		t, err := p.table(c.After)
		if err != nil {
			return pathHalt(err)
		}
		d := apply(AlterTable{DB: ak.DB, Name: ak.Name, Table: t})
		d.Detail = fmt.Sprintf("%s is already on DR under its new name %s (at event %d, read after the rename)", bk, ak, stamp(dst.Parameters))
		return d
	}
	// Left out earlier (a file of it could not be copied) because a
	// later event removes or replaces it: that event names the table
	// by its new name, after this rename.
	if s := p.supersededBy(objKey{db: ak.DB, table: ak.Name}); s != nil {
		d := p.noop(supersededReason(s), "%s (renamed to %s) does not exist on DR; event %d (%s) removes or replaces it",
			bk, ak, s.EventID, s.EventType)
		if dst != nil && ak.DB == p.db { // a stale holder of the new name
			d.Outcome, d.Actions = Apply, append([]Action{DropTable{DB: ak.DB, Name: ak.Name}}, d.Actions...)
		}
		return d
	}
	return p.missing(objKey{db: bk.DB, table: bk.Name}, "%s (renamed to %s) does not exist on DR", bk, ak)
}

// ---- partitions

func (p *planner) partitions(c *schemas.PartitionChange) Decision {
	tk := eventTable(p.ev, c.Table)
	tbl := p.in.Replica.Tables[tk]
	e := p.ev.EventID
	if tbl == nil {
		if p.ev.EventType == schemas.EventDropPartition {
			return p.noop(ReasonAlreadyApplied, "%s does not exist on DR", tk)
		}
		return p.missing(objKey{db: tk.DB, table: tk.Name}, "%s does not exist on DR", tk)
	}
	if s := stamp(tbl.Parameters); s > e {
		return p.laterIncarnation(tk, s)
	}
	if p.ev.EventType == schemas.EventDropPartition {
		var vals [][]string
		var prunes []Action
		for _, part := range c.Before {
			cur := p.in.Replica.Partitions[partKey(tk, part.Values)]
			if cur != nil && stamp(cur.Parameters) < e {
				vals = append(vals, part.Values)
				acts, err := p.dropPrune(c.Table, part.Location)
				if err != nil {
					return pathHalt(err)
				}
				prunes = append(prunes, acts...)
			}
		}
		if len(vals) == 0 {
			return p.noop(ReasonAlreadyApplied, "the dropped partitions of %s are not on DR", tk)
		}
		return apply(append(prunes, DropPartitions{DB: tk.DB, Table: tk.Name, Values: vals})...)
	}

	var (
		add, alter []*hive_metastore.Partition
		renames    []Action
		prunes     []Action
		waits      []string
		skipped    []string
	)
	claimed := make([]bool, len(p.ev.Files))
	for i, part := range c.After {
		pk := partKey(tk, part.Values)
		cur := p.in.Replica.Partitions[pk]
		var files []schemas.FileRef
		if p.ev.EventType == schemas.EventAddPartition {
			// Claimed before any skip below: files of a partition already
			// added are not the table's.
			files = filesUnder(p.ev.Files, part.Location, claimed)
		}
		var before []string
		if p.ev.EventType != schemas.EventAddPartition && i < len(c.Before) {
			before = c.Before[i].Values
		}
		renamed := before != nil && strings.Join(before, "/") != pk.Values
		if renamed {
			if cur != nil && stamp(cur.Parameters) >= e {
				continue
			}
			old := p.in.Replica.Partitions[partKey(tk, before)]
			if old == nil {
				return p.missing(objKey{db: tk.DB, table: tk.Name, values: pk.Values}, "%s (renamed from %v) does not exist on DR", pk, before)
			}
		} else if cur != nil && stamp(cur.Parameters) >= e {
			continue
		}
		obj := objKey{db: tk.DB, table: tk.Name, values: pk.Values}
		if p.ev.EventType == schemas.EventAddPartition {
			d, ok := p.filesReady(obj, files)
			if !ok {
				switch d.Outcome {
				case NoOp: // superseded: leave the partition out
					skipped = append(skipped, pk.Values)
					continue
				case Wait:
					if d.Reason != ReasonWaitingForFiles {
						return d
					}
					waits = append(waits, d.WaitTasks...)
					continue
				default:
					return d
				}
			}
		} else if cur == nil && !renamed && !c.IsTruncate {
			// (A truncate empties the partition whole, so it also brings
			// back one left out earlier because a file of it could not be
			// copied: it is added, empty.)
			if s := p.supersededBy(obj); s != nil {
				skipped = append(skipped, pk.Values)
				continue
			}
			return halt(ReasonMissingObject, "%s does not exist on DR (event %d %s)", pk, e, p.ev.EventType)
		}
		np, err := p.partition(tbl, &c.After[i])
		if err != nil {
			return pathHalt(err)
		}
		switch {
		case renamed:
			renames = append(renames, RenamePartition{DB: tk.DB, Table: tk.Name, Values: before, Part: np})
		case cur == nil:
			add = append(add, np)
		default:
			alter = append(alter, np)
		}
		if c.IsTruncate && np.Sd != nil && np.Sd.Location != "" {
			prunes = append(prunes, PruneFiles{Dir: np.Sd.Location, EventID: e, Source: c.After[i].Location})
		}
		if p.ev.EventType == schemas.EventAddPartition {
			acts, err := p.recreatePrune(np.Sd, files, part.Location)
			if err != nil {
				return pathHalt(err)
			}
			prunes = append(prunes, acts...)
		}
	}
	// Files of an ADD_PARTITION that no partition's location holds belong
	// to the table.
	var rest []schemas.FileRef
	for i, f := range p.ev.Files {
		if !claimed[i] {
			rest = append(rest, f)
		}
	}
	if len(rest) > 0 {
		if d, ok := p.filesReady(objKey{db: tk.DB, table: tk.Name}, rest); !ok && d.Outcome != NoOp {
			if d.Outcome != Wait || d.Reason != ReasonWaitingForFiles {
				return d
			}
			waits = append(waits, d.WaitTasks...)
		}
	}
	if len(waits) > 0 {
		return waitFiles(waits)
	}
	// Prunes first: once a partition carries the event's stamp a re-run
	// skips it, so a crash in between must not lose the prune.
	acts := prunes
	if len(add) > 0 {
		acts = append(acts, AddPartitions{DB: tk.DB, Table: tk.Name, Parts: add})
	}
	if len(alter) > 0 {
		acts = append(acts, AlterPartitions{DB: tk.DB, Table: tk.Name, Parts: alter})
	}
	acts = append(acts, renames...)
	if len(acts) == 0 {
		if len(skipped) > 0 {
			return p.noop(ReasonSuperseded, "partitions %v of %s are removed by a later event", skipped, tk)
		}
		return p.noop(ReasonAlreadyApplied, "the partitions of %s are at or past event %d", tk, e)
	}
	d := apply(acts...)
	if len(skipped) > 0 {
		d.Detail = fmt.Sprintf("partitions %v of %s left out: a later event removes them", skipped, tk)
	}
	return d
}

// filesUnder returns the files lying under dir, marking them claimed.
// Both are compared in canonical form (package location): the metastore
// spells a partition's directory its way, the tailer's listing of an
// external table's files answers in canonical form. A location that does
// not parse is compared as written.
func filesUnder(files []schemas.FileRef, dir string, claimed []bool) []schemas.FileRef {
	if dir == "" {
		return nil
	}
	d, dirErr := location.Parse(dir)
	prefix := strings.TrimSuffix(dir, "/") + "/"
	var out []schemas.FileRef
	for i, f := range files {
		if claimed[i] {
			continue
		}
		under := strings.HasPrefix(f.URI, prefix)
		if l, err := location.Parse(f.URI); err == nil && dirErr == nil {
			rel, ok := l.Rel(d)
			under = ok && rel != ""
		}
		if under {
			claimed[i] = true
			out = append(out, f)
		}
	}
	return out
}

// ---- inserts

func (p *planner) insert(c *schemas.InsertData) Decision {
	tk := eventTable(p.ev, c.Table)
	tbl := p.in.Replica.Tables[tk]
	e := p.ev.EventID
	obj := objKey{db: tk.DB, table: tk.Name}
	// An INSERT OVERWRITE replaces its table's or partition's contents
	// whole and carries its definition, so it also brings back one left
	// out earlier because a file of it could not be copied (see
	// supersededBy): the table is created, the partition added.
	recreate := tbl == nil && c.Replace && c.Partition == nil && c.Table != nil && len(c.Table.PartitionKeys) == 0
	if tbl == nil && !recreate {
		return p.missing(obj, "%s does not exist on DR", tk)
	}
	var cur *hive_metastore.Partition
	switch {
	case recreate:
	case c.Partition != nil:
		if s := stamp(tbl.Parameters); s > e {
			return p.laterIncarnation(tk, s)
		}
		pk := partKey(tk, c.Partition.Values)
		obj.values = pk.Values
		if cur = p.in.Replica.Partitions[pk]; cur == nil && !c.Replace {
			return p.missing(obj, "%s does not exist on DR", pk)
		}
		if cur != nil && stamp(cur.Parameters) >= e {
			return p.noop(ReasonAlreadyApplied, "%s is at event %d", pk, stamp(cur.Parameters))
		}
	case stamp(tbl.Parameters) >= e:
		return p.noop(ReasonAlreadyApplied, "%s is at event %d", tk, stamp(tbl.Parameters))
	}
	if d, ok := p.filesReady(obj, p.ev.Files); !ok {
		return p.overwriteLeftOut(c, tbl, cur, d)
	}
	var meta Action
	var dir string
	switch {
	case recreate:
		t, err := p.table(c.Table)
		if err != nil {
			return pathHalt(err)
		}
		meta = CreateTable{Table: t}
		if t.Sd != nil {
			dir = t.Sd.Location
		}
	case c.Partition != nil:
		np, err := p.partition(tbl, c.Partition)
		if err != nil {
			return pathHalt(err)
		}
		var curParams map[string]string
		if cur != nil {
			curParams = cur.Parameters
			if np.Sd == nil || np.Sd.Location == "" {
				np.Sd = cur.Sd
			}
		}
		np.Parameters = mergeParams(curParams, c.Partition.Parameters, e)
		parts := []*hive_metastore.Partition{np}
		if cur == nil {
			meta = AddPartitions{DB: tk.DB, Table: tk.Name, Parts: parts}
		} else {
			meta = AlterPartitions{DB: tk.DB, Table: tk.Name, Parts: parts}
		}
		if np.Sd != nil {
			dir = np.Sd.Location
		}
	default:
		nt := *tbl
		src := map[string]string(nil)
		if c.Table != nil {
			src = c.Table.Parameters
		}
		nt.Parameters = mergeParams(tbl.Parameters, src, e)
		meta = AlterTable{DB: tk.DB, Name: tk.Name, Table: &nt}
		if nt.Sd != nil {
			dir = nt.Sd.Location
		}
	}
	// Prune before stamping: once the object carries the event's stamp a
	// re-run is a no-op, so a crash in between must not lose the prune.
	var acts []Action
	if c.Replace && dir != "" {
		keep := make([]string, 0, len(p.ev.Files))
		for _, f := range p.ev.Files {
			t, err := p.mapLocation(f.URI)
			if err != nil {
				return pathHalt(err)
			}
			keep = append(keep, t)
		}
		acts = append(acts, PruneFiles{Dir: dir, Keep: keep, EventID: e, Source: insertSource(c)})
	}
	return apply(append(acts, meta)...)
}

// overwriteLeftOut is d, the decision for an INSERT left out because a
// file of it could not be copied and a later event removes or replaces
// its object; for an INSERT OVERWRITE it also prunes what the overwrite
// replaced. Without the prune the replica would go on showing the files
// before the overwrite until the later event, files the source had at no
// point after it (the soak's checker found them); with it the object
// lacks only files the source removed after the event (guarantee 4).
// The overwrite's files that were copied are kept; its metadata is not
// written, and the object keeps its stamp, so a re-drive prunes again.
func (p *planner) overwriteLeftOut(c *schemas.InsertData, tbl *hive_metastore.Table, cur *hive_metastore.Partition, d Decision) Decision {
	if !c.Replace || !leftOut(d) {
		return d
	}
	var dir string
	switch {
	case c.Partition != nil && cur != nil && cur.Sd != nil:
		dir = cur.Sd.Location
	case c.Partition == nil && tbl != nil && tbl.Sd != nil:
		dir = tbl.Sd.Location
	}
	if dir == "" {
		return d
	}
	var keep []string
	for _, f := range p.ev.Files {
		if cp, ok := p.in.Copies[f.TaskID]; ok && cp.OK() {
			t, err := p.mapLocation(f.URI)
			if err != nil {
				return pathHalt(err)
			}
			keep = append(keep, t)
		}
	}
	d.Actions = append(d.Actions, PruneFiles{Dir: dir, Keep: keep, EventID: p.ev.EventID, Source: insertSource(c)})
	d.Detail += "; what it replaced is pruned"
	return d
}

// laterIncarnation is the no-op for an event on a table whose DR object is
// stamped after the event. This worker stamps in event order, so only
// another database's worker can have written it: a rename into this
// database, applied in that database's order while this worker lags. The
// event concerns an earlier table of that name, dropped before the
// rename, and must not touch the new one's partitions or files.
func (p *planner) laterIncarnation(tk TableKey, s int64) Decision {
	return p.noop(ReasonAlreadyApplied, "%s on DR is a later incarnation (event %d)", tk, s)
}

// mergeParams is the DR object's parameters updated with the source's (when
// the event carries them) and stamped with the event.
func mergeParams(cur, src map[string]string, e int64) map[string]string {
	out := copyParams(cur)
	for k, v := range src {
		out[k] = v
	}
	out[drparam.LastID] = strconv.FormatInt(e, 10)
	return out
}

// ---- files and superseding events

// objKey names a replica object: a database (table ""), a table (values
// "") or a partition.
type objKey struct{ db, table, values string }

func (o objKey) String() string {
	if o.values == "" {
		return o.db + "." + o.table
	}
	return o.db + "." + o.table + " [" + o.values + "]"
}

// pendingCopies are the copy tasks of files without a completion yet.
func (p *planner) pendingCopies(files []schemas.FileRef) []string {
	var out []string
	for _, f := range files {
		if _, done := p.in.Copies[f.TaskID]; f.TaskID != "" && !done {
			out = append(out, f.TaskID)
		}
	}
	return out
}

// filesReady checks the completions of files belonging to obj. ok means
// every file is copied and verified. Otherwise the decision says what to
// do: wait for pending copies, leave obj out because a later event
// supersedes it (NoOp, once the copies of its other files completed),
// or wait on a copy that cannot succeed.
func (p *planner) filesReady(obj objKey, files []schemas.FileRef) (Decision, bool) {
	var pending []string
	for _, f := range files {
		if f.TaskID == "" {
			return halt(ReasonPathOutsideRoots, "file %s of event %d has no copy task", f.URI, p.ev.EventID), false
		}
		c, ok := p.in.Copies[f.TaskID]
		if !ok {
			pending = append(pending, f.TaskID)
			continue
		}
		if c.OK() {
			continue
		}
		if s := p.fileSupersededBy(obj); s != nil {
			// Left out; but not before the copies of its other files
			// complete, so that none lands after the later event's prune
			// (as waitOwnCopies does for a whole event left out).
			if w := p.pendingCopies(files); len(w) > 0 {
				d := waitFiles(w)
				d.Detail = fmt.Sprintf("%s is left out (file %s could not be copied, %s, and event %d %s removes or replaces it), after its other %d file copies complete (first: task %s)",
					obj, f.URI, c.Status, s.EventID, s.EventType, len(w), w[0])
				return d, false
			}
			return p.noop(supersededReason(s), "file %s could not be copied (%s) but event %d (%s) removes or replaces it",
				f.URI, c.Status, s.EventID, s.EventType), false
		}
		if c.Status == schemas.StatusSourceGone && isSnapshot(p.ev.EventType) {
			// A bootstrap's record lists the files its object had when the
			// tailer listed it; one gone since was removed after that
			// listing. If the metastore removed it (a drop, an overwrite)
			// the event that did is past the record's stamp and comes after
			// the END, usually far beyond the look-ahead (the rest of the
			// snapshot is in between), so waiting for it would only halt;
			// if something else removed it the source no longer has it at
			// all. Either way the object is written without the file and the
			// events after the stamp converge it (guarantee 4 is kept by the
			// END: the replica is complete again only once those events are
			// applied in their order). A FAILED copy still waits.
			p.gone = append(p.gone, f.URI)
			continue
		}
		reason := ReasonCopyFailed
		if c.Status == schemas.StatusSourceGone {
			reason = ReasonSourceGone
		}
		return Decision{Outcome: Wait, Reason: reason, WaitTasks: []string{f.TaskID},
			Detail: fmt.Sprintf("file %s (task %s) completed %s: %s; no later event removes it, so the replica cannot show it",
				f.URI, f.TaskID, c.Status, c.Error)}, false
	}
	if len(pending) > 0 {
		return waitFiles(pending), false
	}
	return Decision{}, true
}

// insertSource is the source directory an INSERT wrote to, as the event
// names it ("" when it does not).
func insertSource(c *schemas.InsertData) string {
	switch {
	case c.Partition != nil:
		return c.Partition.Location
	case c.Table != nil:
		return c.Table.Location
	}
	return ""
}

func waitFiles(tasks []string) Decision {
	return Decision{Outcome: Wait, Reason: ReasonWaitingForFiles, WaitTasks: tasks,
		Detail: fmt.Sprintf("waiting for %d file copies (first: task %s)", len(tasks), tasks[0])}
}

// missing handles an event whose object is not on the replica: fine when a
// later event removes it (it was left out earlier), a halt otherwise.
func (p *planner) missing(obj objKey, format string, args ...any) Decision {
	if s := p.supersededBy(obj); s != nil {
		return p.noop(supersededReason(s), format+"; event %d (%s) removes or replaces it", append(args, s.EventID, s.EventType)...)
	}
	return halt(ReasonMissingObject, format, args...)
}

// supersededBy returns the first later event of the topic that removes or
// replaces obj as a whole: drops it (or its table or database), truncates
// it, overwrites it with an INSERT OVERWRITE, or begins a bootstrap that
// covers it (the bootstrap brings it whole as of its cut, files first, or
// drops it at its END if the source no longer has it). A later rename of
// obj's table is followed: the events after it name the table by its new
// name (the soak found an INSERT OVERWRITE of a renamed table's partition
// taken for an unrelated event, and the database halted).
func (p *planner) supersededBy(obj objKey) *schemas.Event { return p.superseded(obj, true) }

// fileSupersededBy is supersededBy for an object on DR one of whose files
// could not be copied: a later rename away does not remove it (the file
// moved with the table; the object under its new name still needs it),
// so the rename is followed to an event that removes or replaces the
// renamed object.
func (p *planner) fileSupersededBy(obj objKey) *schemas.Event { return p.superseded(obj, false) }

// superseded is supersededBy; renameRemoves says whether a later rename
// of obj's table away counts as removing obj (for an object missing on
// DR: a bootstrap that read the table under its new name holds what the
// events on the old name before the rename did).
func (p *planner) superseded(obj objKey, renameRemoves bool) *schemas.Event {
	for _, ev := range p.in.Later {
		if len(ev.Errors) > 0 {
			return nil // the worker halts there; nothing beyond counts
		}
		if removes(ev, obj) {
			return ev
		}
		next := renamed(ev, obj)
		if renameRemoves && next != obj {
			return ev
		}
		obj = next
	}
	return nil
}

// renamed is obj under the name ev gives its table, when ev renames it.
func renamed(ev *schemas.Event, obj objKey) objKey {
	c, ok := ev.Payload.(*schemas.TableChange)
	if !ok || ev.EventType != schemas.EventAlterTable || obj.table == "" || c.Before == nil || c.After == nil {
		return obj
	}
	before, after := tableKey(c.Before.Database, c.Before.Name), tableKey(c.After.Database, c.After.Name)
	if before != (TableKey{DB: obj.db, Name: obj.table}) || before == after {
		return obj
	}
	obj.db, obj.table = after.DB, after.Name
	return obj
}

// supersededReason is the no-op reason of a record left out because s
// removes or replaces its object.
func supersededReason(s *schemas.Event) Reason {
	if s.EventType == schemas.EventSnapshotBegin {
		return ReasonSupersededByBootstrap
	}
	return ReasonSuperseded
}

func removes(ev *schemas.Event, obj objKey) bool {
	if ev.EventType == schemas.EventSnapshotBegin {
		return covers(ev, obj.db, obj.table)
	}
	if ev.EventType == schemas.EventDropDatabase {
		return strings.EqualFold(ev.Database, obj.db)
	}
	if obj.table == "" {
		return false
	}
	tk := TableKey{DB: obj.db, Name: obj.table}
	switch c := ev.Payload.(type) {
	case *schemas.TableChange:
		if c.Before == nil || tableKey(c.Before.Database, c.Before.Name) != tk {
			return false
		}
		if ev.EventType == schemas.EventDropTable {
			return true
		}
		return c.IsTruncate && obj.values == ""
	case *schemas.PartitionChange:
		if obj.values == "" || eventTable(ev, c.Table) != tk {
			return false
		}
		switch {
		case ev.EventType == schemas.EventDropPartition:
			for _, part := range c.Before {
				if strings.Join(part.Values, "/") == obj.values {
					return true
				}
			}
		case c.IsTruncate:
			for _, part := range c.After {
				if strings.Join(part.Values, "/") == obj.values {
					return true
				}
			}
		}
	case *schemas.InsertData:
		if !c.Replace || eventTable(ev, c.Table) != tk {
			return false
		}
		if c.Partition == nil {
			return obj.values == ""
		}
		return strings.Join(c.Partition.Values, "/") == obj.values
	case *schemas.Compaction:
		// A major compaction's base replaces every file written before
		// it: a file the source's cleaner removed after it (a delta, an
		// earlier compaction's output) is not needed on DR either.
		return compacted(c) == obj && writesBase(c)
	}
	return false
}
