// Package status is `hivedr status`: it gathers, for each replicated
// database, the DR metastore's position (repl.last.id), halts and skipped
// events, the applier group's lag on the database's topic, and the tailer's
// checkpoint against the source log; it decides whether replication is
// caught up and writes the result as a table or as JSON.
//
// Gather does the I/O (Kafka, the schema registry, the source and the DR
// metastore); deciding each database's state and the verdict is pure
// (summarize), and so is the output (WriteText, WriteJSON).
package status

import "time"

// Database states, the values of Database.State.
const (
	// StateOK: the database is on the DR, a replication target, applied to
	// its topic's end and not halted.
	StateOK = "ok"
	// StateLagging: the applier group has not committed the topic's end.
	StateLagging = "lagging"
	// StateHalted: the database's applier worker halted (hivedr.halted).
	StateHalted = "HALTED"
	// StateNoTopic: no <prefix>.events.<db> topic exists yet.
	StateNoTopic = "no topic"
	// StateNotOnDR: the DR metastore has no such database yet.
	StateNotOnDR = "not on DR"
	// StateNotTarget: the DR database has no repl.target.for.
	StateNotTarget = "not a target"
	// StateUnknown: Kafka or the DR metastore could not be asked.
	StateUnknown = "unknown"
)

// Report is what `hivedr status` prints: the tailer's position, one row
// per replicated database, totals, and what could not be reached. Its JSON
// form is the output of `hivedr status -json`.
type Report struct {
	// Time is when gathering started; ages in the table are relative to it.
	Time    time.Time `json:"time"`
	Tailer  Tailer    `json:"tailer"`
	Applier Applier   `json:"applier"`
	// Databases are sorted by name.
	Databases []Database `json:"databases"`
	Total     Total      `json:"total"`
	// CaughtUp is the verdict, and `hivedr status` exits 0 exactly when it
	// is true: no errors, the tailer reached the source head, and every
	// database is ok (or, unless named with -db, has nothing replicated
	// yet: no topic or not on the DR).
	CaughtUp bool `json:"caught_up"`
	// Errors name what could not be reached or read.
	Errors   []string        `json:"errors,omitempty"`
	required map[string]bool // databases named with -db
}

// Tailer is the tailer's position against the source log.
type Tailer struct {
	// Source is the configured source name (source.name).
	Source string `json:"source"`
	// CheckpointEventID is the newest event the tailer published (or
	// filtered), from <prefix>.tailer.checkpoints; 0 with no checkpoint.
	CheckpointEventID int64 `json:"checkpoint_event_id"`
	// CheckpointWritten is when that checkpoint was written; zero with none.
	CheckpointWritten time.Time `json:"checkpoint_written,omitzero"`
	// SourceHeadEventID is the source log's newest event when status
	// started; 0 when the source could not be read.
	SourceHeadEventID int64 `json:"source_head_event_id"`
	// CaughtUp: the checkpoint reached the source head within the
	// tailer wait given to Gather.
	CaughtUp bool `json:"caught_up"`
	// Unknown: the checkpoint could not be read (see the report's errors).
	Unknown bool `json:"unknown,omitempty"`
}

// Applier is the applier group and the DR metastore it applies to.
type Applier struct {
	// Group is the applier's consumer group.
	Group string `json:"group"`
	// Members is the number of the group's members; -1 when unknown.
	Members int `json:"members"`
	// Metastore is the DR metastore's address.
	Metastore string `json:"dr_metastore"`
}

// Database is one replicated database: its topic, its DR database and the
// applier group's position on the topic.
type Database struct {
	// Database is the lower-case database name.
	Database string `json:"database"`
	// Topic is the database's <prefix>.events.<db> topic; TopicExists
	// whether Kafka has it.
	Topic       string `json:"topic"`
	TopicExists bool   `json:"topic_exists"`
	// InConfig: replication.databases names the database (not a pattern).
	InConfig bool `json:"in_config"`
	// OnDR: the DR metastore has the database; ReplTarget is its
	// repl.target.for and LastEventID its repl.last.id (0 when absent).
	OnDR        bool   `json:"on_dr"`
	ReplTarget  string `json:"repl_target_for,omitempty"`
	LastEventID int64  `json:"repl_last_id"`
	// Halted is the database's hivedr.halted parameter: why its applier
	// worker stopped; empty when it did not.
	Halted string `json:"halted,omitempty"`
	// Skipped are the events operators skipped (hivedr.skipped.*), by ID.
	Skipped []SkippedEvent `json:"skipped,omitempty"`
	// Committed is the applier group's committed offset on the topic; -1
	// when the group has committed nothing.
	Committed int64 `json:"committed_offset"`
	// End is the topic's last stable offset.
	End int64 `json:"end_offset"`
	// Lag is the number of records (events, heartbeats, transaction
	// markers) from the committed offset to End; -1 when unknown.
	Lag int64 `json:"lag"`
	// Behind is how many seconds ago the oldest uncommitted record was
	// published; nil when nothing lags or it could not be read.
	Behind *float64 `json:"behind_seconds,omitempty"`
	// Newest and NewestType are the time and type (event, heartbeat) of
	// the topic's newest data record; zero when unread.
	Newest     time.Time `json:"newest_record_time,omitzero"`
	NewestType string    `json:"newest_record_type,omitempty"`
	// State is one of the State constants.
	State string `json:"state"`
	// known records which systems answered for the database; a database
	// one of them did not answer for is StateUnknown.
	known struct{ dr, kafka bool }
}

// SkippedEvent is one event an operator skipped with apply -skip-event.
type SkippedEvent struct {
	// EventID is the skipped source event.
	EventID int64 `json:"event_id"`
	// Note is the parameter's value: who skipped it, when.
	Note string `json:"note"`
}

// Total sums the report's databases.
type Total struct {
	// Databases is the number of databases in the report.
	Databases int `json:"databases"`
	// Lag is the sum of the lagging databases' Lag.
	Lag int64 `json:"lag"`
	// Lagging, Halted: how many databases lag, halted.
	Lagging int `json:"lagging"`
	Halted  int `json:"halted"`
	// Skipped is the number of skipped events of all databases.
	Skipped int `json:"skipped"`
}

// summarize sets each database's state, the totals and CaughtUp. It is
// pure: it reads only the report.
func (r *Report) summarize() {
	r.Total = Total{Databases: len(r.Databases)}
	r.CaughtUp = len(r.Errors) == 0 && r.Tailer.CaughtUp
	for i := range r.Databases {
		d := &r.Databases[i]
		req := r.required[d.Database]
		switch {
		case !d.known.kafka || !d.known.dr:
			d.State = StateUnknown
		case d.Halted != "":
			d.State = StateHalted
		case !d.TopicExists:
			d.State = StateNoTopic
		case d.Lag > 0:
			d.State = StateLagging
		case !d.OnDR:
			d.State = StateNotOnDR
		case d.ReplTarget == "":
			d.State = StateNotTarget
		default:
			d.State = StateOK
		}
		if d.Lag > 0 {
			r.Total.Lag += d.Lag
			r.Total.Lagging++
		}
		if d.Halted != "" {
			r.Total.Halted++
		}
		r.Total.Skipped += len(d.Skipped)
		switch d.State {
		case StateOK:
		case StateNoTopic, StateNotOnDR:
			// Nothing of it replicated yet (an in-scope database with no
			// event since the tailer started): fine, unless asked for.
			if req {
				r.CaughtUp = false
			}
		default:
			r.CaughtUp = false
		}
	}
}
