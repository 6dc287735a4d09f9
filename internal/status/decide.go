package status

import (
	"time"

	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/schemas"
)

// DownAfter is how old the tailer's newest checkpoint may be before status
// calls the tailer down: max(3 x (heartbeat_interval + poll_interval), 15s).
//
// Why: a running tailer writes a checkpoint in every transaction, with
// each batch of events and, when the log is quiet, with the heartbeats it
// sends every heartbeat_interval. It checks whether heartbeats are due once
// per poll, so even a quiet tailer writes one at least every
// heartbeat_interval + poll_interval (plus a transaction's milliseconds).
// Three such intervals let two checkpoints be late (a slow transaction, a
// retried step: the tailer's retry backoff starts at 1 s and doubles)
// before the tailer is called down; the 15 s floor keeps short intervals
// (tests run with 2 s) from calling it down over a broker or GC pause of a
// few seconds. A tailer stuck longer than that in one batch or retrying
// is reported down too: either way it is not publishing.
func DownAfter(c config.Tailer) time.Duration {
	return max(3*(c.HeartbeatInterval.Duration+c.PollInterval.Duration), 15*time.Second)
}

// tailerState decides the tailer's state from its checkpoint, the source
// head and the checkpoint's age (CheckpointAge, DownAfter). Pure.
func tailerState(t Tailer) State {
	switch {
	case t.Unknown:
		return TailerUnknown
	case t.CheckpointState == schemas.StateChainBroken:
		// Whatever its age: a stopped tailer's last word stays true.
		return TailerChainBroken
	case t.CheckpointEventID == 0 && t.CheckpointWritten.IsZero():
		return TailerNoCheckpoint
	case t.CheckpointAge != nil && *t.CheckpointAge > t.DownAfter:
		return TailerDown
	case t.SourceHeadEventID > 0 && !t.CaughtUp:
		// Gather re-read the checkpoint for at least one poll interval
		// (plus a second for its transaction) before this: one poll does
		// not explain what is left.
		return TailerBehind
	}
	return TailerRunning
}

// databaseState decides one database's state from the tailer's state and
// the facts gathered for it (with Age and Behind set). Pure. The first
// case that applies wins: the tailer's broken chain concerns every
// database in scope and needs a bootstrap whatever else is true; then
// what could not be read; then the applier's halt (the reason is below
// the table), unless a bootstrap in progress will release it; then the
// bootstrap in progress (its replica is on its way, its figures below the
// table); then the RPO, the promise made to the database's owners;
// then the tailer as the cause upstream of everything the applier does;
// then the applier's own lag and the DR side.
func databaseState(tailer State, d Database) State {
	// The replica is at least as old as its oldest unapplied event was
	// published ago: that event's source time is before its publication.
	breached := d.RPO > 0 && (d.Age != nil && *d.Age > d.RPO || d.Behind != nil && *d.Behind > d.RPO)
	switch {
	case d.InScope && tailer == TailerChainBroken:
		return StateChainBroken
	case !d.known.kafka || !d.known.dr:
		return StateUnknown
	case d.Halted != "" && (d.Bootstrap == nil || d.Bootstrap.Halted != ""):
		// A halt the bootstrap in progress will release (chain_broken,
		// needs_bootstrap, ... before its BEGIN is applied) is not one.
		return StateHalted
	case d.Bootstrap != nil:
		return StateBootstrapping
	case d.TopicExists && !d.OnDR && d.LagEvents == 0 && !d.LagEventsPartial:
		// Its topic applied to the end and no database on DR: the source
		// dropped it and DR applied the drop. No replica is left to age
		// (its RPO cannot be breached), nor anything to lag.
		return StateNotOnDR
	case breached:
		return StateRPOBreached
	case d.InScope && tailer == TailerDown:
		return StateTailerDown
	case d.InScope && tailer == TailerBehind:
		return StateTailerBehind
	case !d.TopicExists:
		return StateNoTopic
	case d.LagEvents > 0:
		return StateLagging
	case d.LagEvents < 0 || d.LagEventsPartial:
		// The topic could not be read far enough to tell.
		return StateUnknown
	case !d.OnDR:
		return StateNotOnDR
	case d.ReplTarget == "":
		return StateNotTarget
	}
	return StateOK
}

// topicRecord is what status needs of one committed data record of an
// event topic (transaction markers are not data records).
type topicRecord struct {
	offset    int64
	heartbeat bool  // a Heartbeat; otherwise a MetastoreEvent
	eventID   int64 // an event's source event ID
	// time is the source time the record completes the replica up to once
	// applied: an event's EventTime, a heartbeat's CompleteAt.
	// Zero when not decoded (records that are not applied need none).
	time time.Time
	// published is the record's Kafka timestamp.
	published time.Time
}

// tally follows one event topic's committed data records, in offset order
// from somewhere before the applier group's committed offset, and works
// out what of it is applied to the DR database, how many events are not,
// and the source time up to which the replica is complete.
//
// It relies on the applier's Guarantee 1: a worker applies its topic
// strictly in offset order and marks an offset for commit only once its
// record is done; every event done (applied, a no-op or skipped) moves the
// DR database's repl.last.id to its ID; event IDs grow along a topic. So:
//   - a record below the committed offset is applied;
//   - an event at or past it is applied exactly when its ID is at most
//     repl.last.id (the applier commits every second, the DR is current);
//   - nothing after the first unapplied event is applied;
//   - a heartbeat with no unapplied event before it is applied: every
//     event up to its scanned_event_id is on the topic before it, hence
//     applied, so the DR replica is complete up to it (a running applier
//     consumes it the moment it reaches it; a stopped one has nothing
//     left to apply).
//
// Records before the committed offset may come in any order (Gather reads
// further back when the first window held none). A record's time may be
// set later with completes (Gather decodes only the newest applied ones).
// A dropped DR database has no repl.last.id: its events past the committed
// offset count as unapplied until the applier commits (within a second).
type tally struct {
	committed, lastID int64

	complete time.Time // newest source time an applied record completes to
	events   int64     // unapplied events
	oldest   time.Time // Kafka time of the first unapplied event
	blocked  bool      // an unapplied event was seen
}

// applied reports whether r, the next record in offset order (or any
// record before the committed offset), is applied. Only applied records
// need their time, so only they need decoding.
func (t *tally) applied(r topicRecord) bool {
	switch {
	case r.offset < t.committed:
		return true
	case t.blocked:
		return false
	}
	return r.heartbeat || r.eventID <= t.lastID
}

// add counts r.
func (t *tally) add(r topicRecord) {
	if t.applied(r) {
		t.completes(r.time)
		return
	}
	if r.heartbeat {
		return
	}
	if !t.blocked {
		t.oldest = r.published
	}
	t.blocked = true
	t.events++
}

// completes records that an applied record completes the replica up to
// source time at.
func (t *tally) completes(at time.Time) {
	if at.After(t.complete) {
		t.complete = at
	}
}

// fromCheckpoint sets what the tailer's newest checkpoint says.
func (t *Tailer) fromCheckpoint(cp *schemas.TailerCheckpoint) {
	t.CheckpointEventID, t.CheckpointWritten, t.CheckpointState = cp.LastEventID, cp.Written, cp.State
	t.boots = cp.Bootstraps
}

// fromTally sets what a tally of the database's topic found; partial says
// the topic was not read to its end. With the DR database unread, what is
// applied past the committed offset is not known.
func (d *Database) fromTally(t tally, partial bool) {
	d.Complete, d.LagEvents, d.oldestUnapplied, d.LagEventsPartial = t.complete, t.events, t.oldest, partial
	if !d.known.dr {
		d.LagEvents = -1
	}
}
