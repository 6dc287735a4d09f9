// Package drparam names the parameters hivedr keeps on the objects of the
// metastores it replicates between: where a replica stands, whose replica
// it is, why its applier halted, which events operators skipped, how far
// a bootstrap has been applied, and a failover's and a failback's marks.
// The applier writes the replication keys; `hivedr failover` and
// `hivedr failback` (internal/failover) write theirs and change Target
// and LastID when they hand a database over; `hivedr drill` writes on its
// scratch databases. `hivedr status`, `hivedr bootstrap`, `hivedr verify`
// and operators read them, Hive's own `REPL STATUS` too (repl.last.id).
package drparam

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/hivedr/hivedr/schemas"
)

// The parameter keys.
const (
	// LastID, on a DR database, table or partition, is the source event ID
	// that last changed it (Hive's own REPL key, so `REPL STATUS` reads a
	// DR database's position). An event at or below the stamp of what it
	// touches is a no-op: that is what makes re-drive idempotent.
	LastID = "repl.last.id"
	// Target marks a DR database as a replication target (Hive's key),
	// with the value TargetMark(source). The applier refuses to write into
	// a database without that value, so neither a user's database of the
	// same name on the DR site nor another pipeline's replica is ever
	// overwritten.
	Target = "repl.target.for"
	// OwnPrefix begins the keys that are hivedr's own bookkeeping, not
	// Hive's: an alter of the source database never carries them, so the
	// applier keeps them across it.
	OwnPrefix = "hivedr."
	// Halted, on a DR database, says why its worker halted: event ID, type
	// and reason. `hivedr status` shows it; a successful apply clears it.
	Halted = OwnPrefix + "halted"
	// SkippedPrefix + event ID (SkipKey) records an operator's
	// --skip-event: who skipped the event, when, and what it was.
	SkippedPrefix = OwnPrefix + "skipped."
)

// The keys of a bootstrap (a snapshot of a whole database, or of some of
// its tables, published as HIVEDR_SNAPSHOT_* records). While one is
// applied, the DR database carries BootstrapID, BootstrapState and
// BootstrapApplied (and BootstrapNew when its BEGIN created the
// database); its END removes them, records BootstrapDone and moves
// LastID to the bootstrap's cut, in one write. So a bootstrap is applied
// on DR exactly when BootstrapDone names it (and LastID >= its cut).
const (
	// BootstrapID, on a DR database, names the bootstrap being applied to
	// it. On a DR table or partition it names the bootstrap that wrote it
	// last: the bootstrap's END keeps the objects it names and drops the
	// others (the source no longer has them). An event that rewrites an
	// object later does not carry it.
	BootstrapID = OwnPrefix + "bootstrap.id"
	// BootstrapState, on a DR database, says where a bootstrap is:
	// "snapshot <cut event ID>" between its BEGIN and its END.
	BootstrapState = OwnPrefix + "bootstrap.state"
	// BootstrapApplied, on a DR database, is how far the bootstrap being
	// applied has come (FormatProgress): the last record handled and the
	// tables, partitions and files handled so far. It is written with
	// every TABLE record and every batch of PARTITION records.
	BootstrapApplied = OwnPrefix + "bootstrap.applied"
	// BootstrapNew marks an object the bootstrap named by its value
	// created: nothing on it predates that bootstrap, so the END's
	// convergence has nothing to read there (on a DR database: its BEGIN
	// created it; on a table: its TABLE record did, so its partitions are
	// all of the bootstrap).
	BootstrapNew = OwnPrefix + "bootstrap.new"
	// BootstrapDone, on a DR database, names the last bootstrap whose END
	// was applied. Kept across later events (as every hivedr key).
	BootstrapDone = OwnPrefix + "bootstrap.done"
)

// SnapshotState is the value of BootstrapState for a bootstrap cut at
// event cut.
func SnapshotState(cut int64) string { return "snapshot " + strconv.FormatInt(cut, 10) }

// Progress is how far a bootstrap's application has come: the Seq of
// the last of its records handled (applied, found applied already, or
// left out because a later event removes the object), and the tables,
// partitions and files of the records handled up to it. At END they are
// the snapshot's TableCount, PartitionCount and FileCount.
type Progress struct {
	Seq, Tables, Partitions, Files int64
}

// FormatProgress is the value of BootstrapApplied for p:
// "seq=12 tables=3 partitions=2000 files=4100".
func FormatProgress(p Progress) string {
	return fmt.Sprintf("seq=%d tables=%d partitions=%d files=%d", p.Seq, p.Tables, p.Partitions, p.Files)
}

// ParseProgress reads a BootstrapApplied value; "" is the zero Progress.
func ParseProgress(s string) (Progress, error) {
	var p Progress
	if s == "" {
		return p, nil
	}
	for _, f := range strings.Fields(s) {
		k, v, ok := strings.Cut(f, "=")
		n, err := strconv.ParseInt(v, 10, 64)
		if !ok || err != nil || n < 0 {
			return Progress{}, fmt.Errorf("%s=%q: %q is not key=count", BootstrapApplied, s, f)
		}
		switch k {
		case "seq":
			p.Seq = n
		case "tables":
			p.Tables = n
		case "partitions":
			p.Partitions = n
		case "files":
			p.Files = n
		default:
			return Progress{}, fmt.Errorf("%s=%q: unknown count %q", BootstrapApplied, s, k)
		}
	}
	return p, nil
}

// TargetMark is the value of Target on the replicas of source.
func TargetMark(source string) string { return "hivedr:" + source }

// SkipKey is the DR database parameter that records an operator's
// --skip-event of event id.
func SkipKey(id int64) string { return SkippedPrefix + strconv.FormatInt(id, 10) }

// SkippedEvent returns the event ID a SkipKey names; ok is false for any
// other key.
func SkippedEvent(key string) (id int64, ok bool) {
	s, ok := strings.CutPrefix(key, SkippedPrefix)
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseInt(s, 10, 64)
	return id, err == nil
}

// FormatHalt is the value of Halted for a halt on event id of type typ
// for reason, with detail: "event 42 ADD_PARTITION: missing_object: ...".
func FormatHalt(id int64, typ, reason, detail string) string {
	return fmt.Sprintf("event %d %s: %s: %s", id, typ, reason, detail)
}

// HaltReason returns the reason a Halted value (FormatHalt) names; "" when
// it names none.
func HaltReason(v string) string {
	_, rest, ok := strings.Cut(v, ": ")
	if !ok {
		return ""
	}
	reason, _, _ := strings.Cut(rest, ": ")
	return reason
}

// The halt reasons a bootstrap of the database releases (the applier's
// Reason of the same names; a halted worker whose topic then brings a
// bootstrap's BEGIN skips the records before it): a topic that lost
// records, a tailer started over a gap, records of a bootstrap not begun,
// objects missing on DR, and an Iceberg table whose DR pointer is not the
// one a commit follows. The other halts (a record that does not
// decode, a location outside the roots, the metastore refusing, ...) need
// the operator whatever follows.
const (
	HaltChainBroken       = schemas.ReasonChainBroken
	HaltNeedsBootstrap    = "needs_bootstrap"
	HaltBootstrapNotBegun = "bootstrap_not_begun"
	HaltDatabaseMissing   = "database_missing"
	HaltMissingObject     = "missing_object"
	HaltEntersScope       = "enters_scope"
	HaltIcebergChain      = "iceberg_chain"
)

// ReleasedByBootstrap reports whether a bootstrap of the database
// releases a halt for reason (a HaltReason).
func ReleasedByBootstrap(reason string) bool {
	switch reason {
	case HaltChainBroken, HaltNeedsBootstrap, HaltBootstrapNotBegun,
		HaltDatabaseMissing, HaltMissingObject, HaltEntersScope, HaltIcebergChain:
		return true
	}
	return false
}

// The keys of a failover (`hivedr failover`), written on a DR database in
// the one write that also removes Target: from then on the database is
// the primary, writable by users, and the applier refuses to write into
// it (halt reason failed_over) whatever its topic still brings.
const (
	// FailoverPrefix begins every failover key.
	FailoverPrefix = OwnPrefix + "failover."
	// FailedOverAt is when the failover was recorded (RFC 3339, UTC). Its
	// presence is what marks a failed-over database.
	FailedOverAt = FailoverPrefix + "at"
	// FailoverMode is "planned" or "unplanned".
	FailoverMode = FailoverPrefix + "mode"
	// FailoverEventID is the source event ID the database reflects: it is
	// complete up to it (its repl.last.id, or further when heartbeats
	// showed the source had nothing more for it).
	FailoverEventID = FailoverPrefix + "event_id"
	// FailoverSourceTime is the source time (RFC 3339) of FailoverEventID.
	FailoverSourceTime = FailoverPrefix + "source_time"
	// FailoverCut is the consistent cut of the set of databases failed
	// over together: the newest event every one of them reached.
	FailoverCut = FailoverPrefix + "cut"
	// FailoverSet names the databases failed over together, comma-separated.
	FailoverSet = FailoverPrefix + "set"
	// FailoverRPOEvents is the achieved RPO in events: source events of
	// the database after FailoverEventID that DR never got ("unknown"
	// when the source could not be read; failback counts them then, from
	// the old primary's log, and writes the count here).
	FailoverRPOEvents = FailoverPrefix + "rpo_events"
	// FailoverRPOCountedAt is when failback counted FailoverRPOEvents
	// (RFC 3339, UTC), the failover having found the source unreadable;
	// absent when the failover counted them itself.
	FailoverRPOCountedAt = FailoverPrefix + "rpo_counted_at"
	// FailoverRPOSeconds is the achieved RPO in seconds: how much of the
	// source's history is not on DR (0 when nothing is lost; else from
	// the source time the replica is complete to the failover time).
	FailoverRPOSeconds = FailoverPrefix + "rpo_seconds"
	// FailoverTarget keeps the Target value the database had, so that
	// failback knows whose replica it was.
	FailoverTarget = FailoverPrefix + "was_target_for"
	// FailoverDRLogHead is the DR metastore's notification log head when
	// the failover was recorded: the reverse pipeline's tailer starts
	// after it, and failback reads the new primary's changes from it.
	FailoverDRLogHead = FailoverPrefix + "dr_log_head"
	// FailoverFence is the token of the failover that marked the
	// database, written with the mark; the failover asks the running
	// appliers to confirm it (schemas.ControlFence).
	FailoverFence = FailoverPrefix + "fence"
	// FailoverFenced is written by the applier that owns the database's
	// topic once its worker has stopped and it read the mark: the value
	// is the FailoverFence token it saw. From then on no write of that
	// applier lands on the database (the worker that made them is gone,
	// and every new one reads the mark before it writes and halts
	// failed_over).
	FailoverFenced = FailoverPrefix + "fenced"
)

// The keys `hivedr failback` writes on an old primary's database when it
// makes it the reverse pipeline's replica (beside Target and LastID).
const (
	// FailbackAt is when the failback marked the database (RFC 3339, UTC).
	// A database carrying the reverse pipeline's Target was failed back
	// already: failback refuses it unless asked to run again.
	FailbackAt = OwnPrefix + "failback.at"
	// FailbackDRLogHead is the new primary's log head the failback
	// resumed the database from (its LastID then).
	FailbackDRLogHead = OwnPrefix + "failback.dr_log_head"
	// FailbackDone, on the new primary's database, is the FailedOverAt
	// of the failover whose failback finished there: the old primary
	// marked and the requests to the reverse pipeline written. An old
	// primary marked while the new primary's database lacks it is one a
	// failback was cut short on (by an outage), which a run again resumes.
	FailbackDone = OwnPrefix + "failback.done"
)

// The host and agent DR transactions are opened with.
const (
	// ReplTxnAgentPrefix begins the host and agent (TXNS.TXN_HOST and
	// TXN_AGENT_INFO) of every transaction the applier opens on DR to
	// stand for a source transaction; ReplTxnAgent adds the database.
	// (Hive 4.0 stores the host and drops the agent.)
	ReplTxnAgentPrefix = "hivedr-apply:"
	// maxAgent is the length of those columns (varchar(128)).
	maxAgent = 128
)

// ReplTxnAgent is the host and agent of the DR transactions the applier
// opens for database db (the replication policy they are opened under),
// so that `hivedr failover` finds those a failed-over database leaves
// open. A name too long for the column keeps its start and a hash of the
// whole.
func ReplTxnAgent(db string) string {
	a := ReplTxnAgentPrefix + strings.ToLower(db)
	if len(a) <= maxAgent {
		return a
	}
	h := fnv.New32a()
	h.Write([]byte(a))
	return fmt.Sprintf("%s~%08x", a[:maxAgent-9], h.Sum32())
}
