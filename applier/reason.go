package applier

import (
	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/schemas"
)

// Reason is the short label of a Decision: why an event is applied, is a
// no-op, waits or halts. It is also the label of the applier's metrics
// (the result of hivedr_applier_events_total, the reason of
// hivedr_applier_waiting, _wait_seconds_total and _halted) and the reason
// written into hivedr.halted, so every kind is declared here, once.
type Reason string

// Reasons of Apply.
const (
	ReasonApplied Reason = "applied"
	// ReasonGapAccepted: a heartbeat past a broken chain that an operator
	// accepted with --skip-event (see CheckChain).
	ReasonGapAccepted Reason = "gap_accepted"
)

// Reasons of NoOp: the event changes nothing on the replica, and still
// moves the database's repl.last.id.
const (
	// ReasonAlreadyApplied: the objects it touches are at or past it.
	ReasonAlreadyApplied Reason = "already_applied"
	// ReasonSuperseded: a later event of the topic removes or replaces
	// what it would write.
	ReasonSuperseded Reason = "superseded"
	// ReasonSkippedByOperator: --skip-event named it.
	ReasonSkippedByOperator Reason = "skipped_by_operator"
	// ReasonHeartbeat: a heartbeat with nothing to do.
	ReasonHeartbeat Reason = "heartbeat"
	// ReasonInBootstrap: a heartbeat while a bootstrap is applied to the
	// database: no chain to check, and the replica is not complete up to
	// it (it is at the bootstrap's END).
	ReasonInBootstrap Reason = "in_bootstrap"
	// ReasonTransaction: a transaction event with nothing to do in the
	// database (an OPEN_TXN, a commit of writes elsewhere).
	ReasonTransaction Reason = "transaction"
	// ReasonAppliedByOtherDatabase: a rename across databases, which the
	// source database's worker carries out.
	ReasonAppliedByOtherDatabase Reason = "applied_by_other_database"
	// ReasonSupersededByBootstrap: a later bootstrap of the database (or
	// of the record's table) replaces what the record would write: the
	// records before a whole-database bootstrap's BEGIN that a halted
	// worker skips (see ReleasedByBootstrap), or an object left out
	// because a bootstrap after it brings it whole.
	ReasonSupersededByBootstrap Reason = "superseded_by_bootstrap"
	// ReasonBelowNextWriteID: an allocation of write IDs below the DR
	// table's next write ID (allocated already, or covered by the
	// write-ID state a bootstrap gave the table).
	ReasonBelowNextWriteID Reason = "below_next_write_id"

	// Event types the replica has nothing to do for (notReplicated).
	ReasonNotReplicatedColumnStats Reason = "not_replicated_column_stats"
	ReasonNotReplicatedFunctions   Reason = "not_replicated_functions"
	ReasonNotReplicatedConstraints Reason = "not_replicated_constraints"
	ReasonNotReplicatedReload      Reason = "not_replicated_reload"

	// ReasonCompactionGone: a compaction whose table or partition the
	// source no longer had when the tailer read it, so nothing of what it
	// wrote was found (a later event drops the object).
	ReasonCompactionGone Reason = "compaction_gone"
)

// Reasons of Wait.
const (
	// ReasonWaitingForFiles: copy tasks of the event have no completion
	// yet.
	ReasonWaitingForFiles Reason = "waiting_for_files"
	// ReasonCrossDatabase: a rename across databases waits for the other
	// database's worker to reach the event.
	ReasonCrossDatabase Reason = "cross_database"
	// ReasonSourceGone and ReasonCopyFailed: a file of the event could not
	// be copied and no later event removes it. These waits turn into a
	// halt when they last (Config.HaltAfter): nothing but an operator
	// will change them.
	ReasonSourceGone Reason = "source_gone"
	ReasonCopyFailed Reason = "copy_failed"
	// ReasonConverging: a bootstrap's END drops DR objects the snapshot
	// does not have in rounds (more than one inventory holds) and is
	// planned again after each.
	ReasonConverging Reason = "bootstrap_converging"
)

// Reasons of Halt.
const (
	// ReasonFailedOver: the DR database was failed over (`hivedr
	// failover`, drparam.FailedOverAt): it is the primary now, and nothing
	// of the old pipeline may write into it. Nothing is written on it,
	// not even hivedr.halted; the log and the metric say it.
	ReasonFailedOver Reason = "failed_over"
	// ReasonNotAReplica: the DR database is not a replication target of
	// this pipeline (drparam.Target).
	ReasonNotAReplica Reason = "not_a_replica"
	// ReasonDatabaseMissing: the DR database does not exist and the event
	// does not create it.
	ReasonDatabaseMissing Reason = drparam.HaltDatabaseMissing
	// ReasonMissingObject: a table or partition the event changes is not
	// on the DR, and no later event removes it.
	ReasonMissingObject Reason = drparam.HaltMissingObject
	// ReasonEntersScope: a table renamed into the scope from a database
	// that is not replicated (its files were never copied).
	ReasonEntersScope Reason = drparam.HaltEntersScope
	// ReasonIcebergChain: an Iceberg commit whose previous metadata is
	// not what DR's table points at (an earlier commit was skipped, or
	// the DR table was changed on DR): the commit's files are what it
	// adds to its previous metadata, so DR would point at a snapshot
	// whose older files it may never have copied.
	ReasonIcebergChain Reason = drparam.HaltIcebergChain
	// ReasonAcidWriteAtCommit: an ACID write, applied with its
	// transaction's COMMIT_TXN (which lists the same write).
	ReasonAcidWriteAtCommit Reason = "acid_write_at_commit"
	// ReasonUnknownEventType: an event type the applier does not know.
	ReasonUnknownEventType Reason = "unknown_event_type"
	// ReasonDecode: the event has no payload of the kind its type needs,
	// or the tailer could not decode it (schemas.ErrDecode).
	ReasonDecode Reason = "decode"
	// ReasonPathOutsideRoots: a location that no path mapping or root
	// covers, from the tailer (schemas.ErrPathOutsideRoots) or the
	// applier's own mapping.
	ReasonPathOutsideRoots Reason = "path_outside_roots"
	// ReasonListingFailed: the tailer could not list an external table's
	// directory (schemas.ErrListingFailed).
	ReasonListingFailed Reason = "listing_failed"
	// ReasonWritesUnavailable: a COMMIT_TXN whose writes the tailer could
	// not read whole from the source metastore
	// (schemas.ErrWritesUnavailable).
	ReasonWritesUnavailable Reason = "writes_unavailable"
	// ReasonRecordTooLarge: the tailer could not publish the event's
	// record whole: it was larger than the topics take
	// (schemas.ErrRecordTooLarge).
	ReasonRecordTooLarge Reason = "record_too_large"
	// ReasonUnknownError: the tailer recorded an error of a kind this
	// applier does not know (schemas.ErrUnknown).
	ReasonUnknownError Reason = "unknown"
	// ReasonChainBroken: the topic lost records (see CheckChain), or a
	// bootstrap's records are not consecutive (a record of it is lost).
	ReasonChainBroken Reason = drparam.HaltChainBroken
	// ReasonNeedsBootstrap: a tailer started without a checkpoint past the
	// DR database's position (HIVEDR_DISCONTINUITY): events in between may
	// never have been published.
	ReasonNeedsBootstrap Reason = drparam.HaltNeedsBootstrap
	// ReasonBootstrapNotBegun: a TABLE, PARTITION or END record of a
	// bootstrap whose BEGIN the DR database has not seen (the group's
	// offset was moved into the middle of the bootstrap).
	ReasonBootstrapNotBegun Reason = drparam.HaltBootstrapNotBegun
	// ReasonUndecodableRecord: a record of the topic does not decode.
	ReasonUndecodableRecord Reason = "undecodable_record"
	// ReasonMetastoreRefused: the DR metastore refused an action for a
	// reason retrying will not change, or failed it (TransientError) for
	// longer than Config.HaltAfter.
	ReasonMetastoreRefused Reason = "metastore_refused"
)

// BootstrapCommand is the command that bootstraps db again: the repair a
// halt that a bootstrap releases (ReleasedByBootstrap) names.
func BootstrapCommand(db string) string { return "hivedr bootstrap -db " + db }

// errorReason is the halt reason of an event carrying an error of kind k
// from the tailer.
func errorReason(k schemas.EventErrorKind) Reason {
	switch k {
	case schemas.ErrDecode:
		return ReasonDecode
	case schemas.ErrUnknownEventType:
		return ReasonUnknownEventType
	case schemas.ErrPathOutsideRoots:
		return ReasonPathOutsideRoots
	case schemas.ErrListingFailed:
		return ReasonListingFailed
	case schemas.ErrWritesUnavailable:
		return ReasonWritesUnavailable
	case schemas.ErrRecordTooLarge:
		return ReasonRecordTooLarge
	}
	return ReasonUnknownError
}

// ReleasedByBootstrap reports whether a halt for r ends when a bootstrap
// of the whole database comes later on its topic: every record before the
// bootstrap's BEGIN is then skipped (superseded_by_bootstrap), since the
// bootstrap replaces the database as of its cut. These are the halts a
// bootstrap is the cure for; the others (a record that does not decode, a
// location outside the roots, the metastore refusing, ...) need the
// operator whatever follows.
func (r Reason) ReleasedByBootstrap() bool { return drparam.ReleasedByBootstrap(string(r)) }

// replannable reports whether a halt for r may end by itself when more of
// the topic is read: its record is planned again with the longer
// look-ahead, in which a later event may remove the missing object, or a
// later bootstrap (of the database or of the table) bring it.
func (r Reason) replannable() bool {
	switch r {
	case ReasonDatabaseMissing, ReasonMissingObject, ReasonEntersScope:
		return true
	}
	return false
}
