// Package drparam names the parameters hivedr keeps on the objects of the
// DR metastore: where a replica stands, whose replica it is, why its
// applier halted, and which events operators skipped. The applier writes
// them (it is the only writer); `hivedr status` and operators read them,
// Hive's own `REPL STATUS` too (repl.last.id).
package drparam

import (
	"fmt"
	"strconv"
	"strings"
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
