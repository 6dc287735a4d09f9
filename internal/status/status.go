// Package status is `hivedr status`: it gathers, for each replicated
// database, the DR metastore's position (repl.last.id), halts and skipped
// events, what of the database's topic is applied, the replica's age
// against the database's RPO, and the tailer's checkpoint (its age, its
// state, its distance to the source log's head); it decides each
// database's state and whether replication is caught up, and writes the
// result as a table or as JSON.
//
// Gather does the I/O (Kafka, the schema registry, the source and the DR
// metastore), and reads only: it registers no schema and commits no
// offset. Deciding the states and the verdict is pure (summarize,
// tailerState, databaseState, tally), and so is the output (WriteText,
// WriteJSON).
package status

import (
	"time"

	"github.com/hivedr/hivedr/internal/bootstrap"
	"github.com/hivedr/hivedr/schemas"
)

// State is a database's or the tailer's state in a Report: one lower-case
// word or snake_case phrase, spelled the same in the table WriteText
// prints and in WriteJSON's "state".
type State string

// Database states, the values of Database.State, in the order they are
// decided (the first that applies wins; see databaseState).
const (
	// StateChainBroken: the tailer stopped on a gap in the source log
	// (its newest checkpoint says CHAIN_BROKEN); every database in scope
	// is affected and needs a new bootstrap. It is spelled as the
	// bootstrap reason and the applier's halt of the same cause.
	StateChainBroken State = schemas.ReasonChainBroken
	// StateUnknown: Kafka or the DR metastore could not be asked.
	StateUnknown State = "unknown"
	// StateHalted: the database's applier worker halted (hivedr.halted).
	StateHalted State = "halted"
	// StateBootstrapping: a bootstrap of the database is in progress (the
	// tailer's newest checkpoint holds its BootstrapState, or the DR
	// database's parameters show one being applied) and nothing stops
	// it; Database.Bootstrap has its figures.
	StateBootstrapping State = "bootstrapping"
	// StateRPOBreached: the replica is older than the database's RPO.
	StateRPOBreached State = "rpo_breached"
	// StateTailerDown: the tailer has written no checkpoint for longer
	// than Tailer.DownAfter: source changes are not being published.
	StateTailerDown State = "tailer_down"
	// StateTailerBehind: the tailer is running but has not published the
	// source log up to its head within the wait.
	StateTailerBehind State = "tailer_behind"
	// StateNoTopic: no <prefix>.events.<db> topic exists yet.
	StateNoTopic State = "no_topic"
	// StateLagging: events on the topic are not applied yet.
	StateLagging State = "lagging"
	// StateNotOnDR: the DR metastore has no such database.
	StateNotOnDR State = "not_on_dr"
	// StateNotTarget: the DR database has no repl.target.for.
	StateNotTarget State = "not_a_target"
	// StateOK: the database is on the DR, a replication target, every
	// event of its topic is applied, it is not halted, its replica is
	// within its RPO and the tailer is publishing.
	StateOK State = "ok"
)

// DatabaseStates are the database states in the order they are decided.
var DatabaseStates = []State{StateChainBroken, StateUnknown, StateHalted, StateBootstrapping, StateRPOBreached,
	StateTailerDown, StateTailerBehind, StateNoTopic, StateLagging, StateNotOnDR, StateNotTarget, StateOK}

// Tailer states, the values of Tailer.State (see tailerState).
const (
	// TailerRunning: a fresh checkpoint at (or past) the source head.
	TailerRunning State = "running"
	// TailerBehind: a fresh checkpoint, behind the source head after the
	// wait.
	TailerBehind State = "behind"
	// TailerDown: the newest checkpoint is older than Tailer.DownAfter.
	TailerDown State = "down"
	// TailerChainBroken: the newest checkpoint's state is CHAIN_BROKEN.
	TailerChainBroken = StateChainBroken
	// TailerNoCheckpoint: the tailer has never written a checkpoint.
	TailerNoCheckpoint State = "no_checkpoint"
	// TailerUnknown: the checkpoint could not be read.
	TailerUnknown = StateUnknown
)

// Report is what `hivedr status` prints: the tailer's position, one row
// per replicated database, totals, and what could not be reached. Its JSON
// form is the output of `hivedr status -json`.
type Report struct {
	// Time is when gathering finished; every age is relative to it (so
	// ages are never understated by the time gathering took).
	Time time.Time `json:"time"`
	// Site is the DR site the report is of (config site: or sites[].name).
	Site string `json:"site"`
	// Sites are the further DR sites' reports (fan-out), when the
	// configuration has sites and status was not asked for one (-site);
	// CaughtUp is then every site's verdict. Their tailer is this one.
	Sites   []*Report `json:"sites,omitempty"`
	Tailer  Tailer    `json:"tailer"`
	Applier Applier   `json:"applier"`
	// Databases are sorted by name.
	Databases []Database `json:"databases"`
	Total     Total      `json:"total"`
	// CaughtUp is the verdict, and `hivedr status` exits 0 exactly when it
	// is true: no errors, the tailer is running and reached the source
	// head, and every database is ok (or, unless named with -db, has
	// nothing replicated yet: no topic or not on the DR).
	CaughtUp bool `json:"caught_up"`
	// Errors name what could not be reached or read.
	Errors []string `json:"errors,omitempty"`
	// Phases is how long each step of gathering took, in seconds, by
	// step: source_head, tailer (its checkpoint, waited for up to
	// -tailer-wait), topics, offsets (the applier group's), dr (the DR
	// databases' parameters), scan (the topics' unapplied records),
	// past_states, bootstrap_copies. Where a slow status spends its time.
	Phases   map[string]float64 `json:"phases_seconds,omitempty"`
	required map[string]bool    // databases named with -db
	// copies are the completions of bootstrap copy tasks since the
	// earliest bootstrap in progress started (bootstrapCopies).
	copies []schemas.CopyCompletion
}

// Tailer is the tailer's position against the source log.
type Tailer struct {
	// Source is the configured source name (source.name).
	Source string `json:"source"`
	// State is one of the Tailer states.
	State State `json:"state"`
	// CheckpointEventID is the newest event the tailer published (or
	// filtered), from <prefix>.tailer.checkpoints; 0 with no checkpoint.
	CheckpointEventID int64 `json:"checkpoint_event_id"`
	// CheckpointWritten is when that checkpoint was written; zero with none.
	CheckpointWritten time.Time `json:"checkpoint_written,omitzero"`
	// CheckpointState is the checkpoint's state as the tailer wrote it:
	// RUNNING, or CHAIN_BROKEN when it stopped on a gap; empty with none.
	CheckpointState schemas.TailerState `json:"checkpoint_state,omitempty"`
	// CheckpointAge is how many seconds before the report's time the
	// checkpoint was written; nil with none.
	CheckpointAge *float64 `json:"checkpoint_age_seconds,omitempty"`
	// DownAfter is the checkpoint age beyond which the tailer is down, in
	// seconds (DownAfter).
	DownAfter float64 `json:"down_after_seconds"`
	// SourceHeadEventID is the source log's newest event when status
	// started; 0 when the source could not be read.
	SourceHeadEventID int64 `json:"source_head_event_id"`
	// LagEvents is how many source events (of any database) the tailer
	// has not published or filtered yet: the source head minus the
	// checkpoint, 0 when either is unknown.
	LagEvents int64 `json:"lag_events"`
	// CaughtUp: the checkpoint reached the source head (within the wait
	// Gather gives the tailer).
	CaughtUp bool `json:"caught_up"`
	// Unknown: the checkpoint could not be read (see the report's errors).
	Unknown bool `json:"unknown,omitempty"`
	// boots are the bootstraps in progress the checkpoint holds; past
	// the last states of bootstraps older checkpoints held (the tailer is
	// done with them, the applier is not: pastStates).
	boots, past []schemas.BootstrapState
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

// Database is one replicated database: its topic, its DR database, what
// of the topic is applied and how old the replica is.
type Database struct {
	// Database is the lower-case database name.
	Database string `json:"database"`
	// Topic is the database's <prefix>.events.<db> topic; TopicExists
	// whether Kafka has it.
	Topic       string `json:"topic"`
	TopicExists bool   `json:"topic_exists"`
	// InConfig: replication.databases names the database (not a pattern).
	InConfig bool `json:"in_config"`
	// InScope: the replication policy replicates the database (the tailer
	// publishes it), so the tailer's state is the database's too.
	InScope bool `json:"in_scope"`
	// RPO is the database's recovery point objective in seconds
	// (replication.databases[].rpo); 0 when it is not in scope.
	RPO float64 `json:"rpo_seconds"`
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
	// LagEvents is the number of events on the topic (up to End) not
	// applied to the DR database: after the committed offset and past
	// repl.last.id. Heartbeats and transaction markers are not
	// replication lag and are not counted. -1 when unknown.
	LagEvents int64 `json:"lag_events"`
	// LagEventsPartial: the topic was not read to End in time, so
	// LagEvents is a lower bound.
	LagEventsPartial bool `json:"lag_events_partial,omitempty"`
	// UncommittedRecords is the number of records (events, heartbeats,
	// transaction markers) from the committed offset to End; the applier
	// commits every second, so a few are normal. -1 when unknown.
	UncommittedRecords int64 `json:"uncommitted_records"`
	// Behind is how many seconds ago the oldest unapplied event was
	// published; nil when none is unapplied or it could not be read.
	Behind *float64 `json:"behind_seconds,omitempty"`
	// Complete is the source time up to which the DR replica is complete:
	// the newest applied event's time, or the newest heartbeat after which
	// nothing is unapplied (see tally). Zero when unknown.
	Complete time.Time `json:"replica_complete_time,omitzero"`
	// Age is the replica's age in seconds, the report's time minus
	// Complete: how much source time a disaster now would lose. nil when
	// unknown.
	Age *float64 `json:"age_seconds,omitempty"`
	// Newest and NewestType are the time and type (event, heartbeat) of
	// the topic's newest data record; zero when unread.
	Newest     time.Time `json:"newest_record_time,omitzero"`
	NewestType string    `json:"newest_record_type,omitempty"`
	// Bootstrap is where the database's bootstrap in progress stands
	// (phase, tables, partitions, files, applied); nil when none is.
	Bootstrap *bootstrap.Database `json:"bootstrap,omitempty"`
	// State is one of the Database states.
	State State `json:"state"`
	// params are the DR database's parameters; nil when not read or not
	// on DR.
	params map[string]string
	// known records which systems answered for the database; a database
	// one of them did not answer for is StateUnknown.
	known struct{ dr, kafka bool }
	// oldestUnapplied is the Kafka time of the oldest unapplied event.
	oldestUnapplied time.Time
	// start is the topic's first offset.
	start int64
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
	// LagEvents is the sum of the databases' known LagEvents.
	LagEvents int64 `json:"lag_events"`
	// Lagging, Halted, RPOBreached: how many databases have unapplied
	// events, halted, are older than their RPO.
	Lagging     int `json:"lagging"`
	Halted      int `json:"halted"`
	RPOBreached int `json:"rpo_breached"`
	// Skipped is the number of skipped events of all databases.
	Skipped int `json:"skipped"`
	// Bootstrapping is how many databases are being bootstrapped.
	Bootstrapping int `json:"bootstrapping"`
}

// bootstraps sets each database's Bootstrap: the bootstraps in progress
// of the tailer's newest checkpoint and of the DR parameters, folded as
// `hivedr bootstrap` folds them, with the completions bootstrapCopies
// read. Pure.
func (r *Report) bootstraps() {
	tr := bootstrap.NewTracker("", -1, false)
	if len(r.Tailer.past) > 0 {
		tr.ObserveCheckpoint(&schemas.TailerCheckpoint{Bootstraps: r.Tailer.past, RequestsOffset: -1})
	}
	// Those the newest checkpoint no longer holds are published.
	tr.ObserveCheckpoint(&schemas.TailerCheckpoint{State: r.Tailer.CheckpointState, Bootstraps: r.Tailer.boots, RequestsOffset: -1})
	for i := range r.copies {
		tr.ObserveCompletion(&r.copies[i])
	}
	for _, d := range r.Databases {
		if d.params != nil {
			tr.ObserveDRAny(d.Database, d.params)
		}
	}
	figures := map[string]bootstrap.Database{}
	for _, b := range tr.Databases() {
		figures[b.Database] = b
	}
	for i := range r.Databases {
		d := &r.Databases[i]
		d.Bootstrap = nil
		if b, ok := figures[d.Database]; ok && !b.Done {
			// A file applied was copied (the completions may be read in
			// part, or be older than the window read).
			b.FilesCopied = max(b.FilesCopied, b.Applied.Files)
			// One look: the rates are averages since the bootstrap
			// started, the ETAs at those rates.
			started := b.Started
			if started.IsZero() {
				started, _ = bootstrap.BootstrapStart(b.BootstrapID)
			}
			b.Rates = bootstrap.Rates(bootstrap.Average(b, started, r.Time))
			d.Bootstrap = &b
		}
	}
}

// summarize sets the tailer's state, each database's age, Behind and
// state, the totals and CaughtUp. It is pure: it reads only the report.
func (r *Report) summarize() {
	t := &r.Tailer
	t.LagEvents = 0
	if t.SourceHeadEventID > 0 && t.CheckpointEventID > 0 {
		t.LagEvents = max(0, t.SourceHeadEventID-t.CheckpointEventID)
	}
	t.CaughtUp = t.SourceHeadEventID > 0 && t.CheckpointEventID >= t.SourceHeadEventID
	t.CheckpointAge = nil
	if !t.CheckpointWritten.IsZero() {
		t.CheckpointAge = seconds(r.Time.Sub(t.CheckpointWritten))
	}
	t.State = tailerState(*t)

	r.bootstraps()
	r.Total = Total{Databases: len(r.Databases)}
	r.CaughtUp = len(r.Errors) == 0 && t.State == TailerRunning && t.CaughtUp
	for i := range r.Databases {
		d := &r.Databases[i]
		d.Age, d.Behind = nil, nil
		if !d.Complete.IsZero() {
			d.Age = seconds(r.Time.Sub(d.Complete))
		}
		if !d.oldestUnapplied.IsZero() {
			d.Behind = seconds(r.Time.Sub(d.oldestUnapplied))
		}
		d.State = databaseState(t.State, *d)
		if d.LagEvents > 0 {
			r.Total.LagEvents += d.LagEvents
			r.Total.Lagging++
		}
		if d.Halted != "" {
			r.Total.Halted++
		}
		if d.State == StateRPOBreached {
			r.Total.RPOBreached++
		}
		if d.State == StateBootstrapping {
			r.Total.Bootstrapping++
		}
		r.Total.Skipped += len(d.Skipped)
		switch d.State {
		case StateOK:
		case StateNoTopic, StateNotOnDR, StateBootstrapping:
			// Nothing of it replicated yet (an in-scope database with no
			// event since the tailer started), or on its way (a bootstrap
			// going on): fine, unless asked for.
			if r.required[d.Database] {
				r.CaughtUp = false
			}
		default:
			r.CaughtUp = false
		}
	}
}

// seconds is d in seconds, never negative (the facts are read at
// slightly different moments).
func seconds(d time.Duration) *float64 {
	s := max(0, d).Seconds()
	return &s
}
