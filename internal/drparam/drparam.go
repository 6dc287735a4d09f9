// Package drparam names the parameters hivedr keeps on the objects of the
// DR metastore: where a replica stands, whose replica it is, why its
// applier halted, and which events operators skipped. The applier writes
// them (it is the only writer); `hivedr status` and operators read them,
// Hive's own `REPL STATUS` too (repl.last.id).
package drparam

import (
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
