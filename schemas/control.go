package schemas

import "time"

// ApplierControlKind says what an ApplierControl asks of a running
// applier.
type ApplierControlKind string

// The kinds of ApplierControl.
const (
	// ControlSeek: consume the database's topic from Offset (the group's
	// committed offset moves there too). `hivedr replay -coordinate`
	// sends it.
	ControlSeek ApplierControlKind = "seek"
	// ControlReplan: stop the database's worker and start it again at the
	// head of its queue, reading the DR state afresh, so a skip recorded
	// on the DR database (hivedr.skipped.<id>) since takes effect, on a
	// halted worker too. `hivedr replay -skip-event` sends it.
	ControlReplan ApplierControlKind = "replan"
	// ControlFence: `hivedr failover` marked the database failed over
	// (drparam.FailedOverAt, with the token Fence in
	// drparam.FailoverFence). The applier that owns its topic stops the
	// database's worker, waiting for the step it is in to end, starts it
	// again at the head of its queue (a new worker reads the DR database
	// before it writes, finds the mark and halts failed_over), and
	// confirms: drparam.FailoverFenced = Fence on the DR database, only if
	// the mark with that token is there.
	ControlFence ApplierControlKind = "fence"
)

// ApplierControlType is the hivedr.type header of an ApplierControl
// record.
const ApplierControlType = "io.hivedr.ApplierControl"

// ApplierControl is an operator's request to the running appliers, a JSON
// value on the applier control topic (kafka.Topics.ApplierControl) keyed
// by database. Every applier reads the topic from its end as of its start
// (a request made while none runs has nothing to act on: the tool acts on
// the group itself then), and acts on the databases whose topics it owns.
// It is JSON, not Avro: only hivedr's own tools write it and only the
// applier reads it.
type ApplierControl struct {
	Kind     ApplierControlKind `json:"kind"`
	Database string             `json:"database"`
	// Offset of the database's topic to consume from (seek).
	Offset int64 `json:"offset,omitempty"`
	// EventID is the event the request is about (the first at Offset
	// for a seek, the skipped one for a replan), for the log.
	EventID int64 `json:"event_id,omitempty"`
	// Fence is the failover's token (fence).
	Fence string    `json:"fence,omitempty"`
	By    string    `json:"by,omitempty"`
	At    time.Time `json:"at"`
}
