// Package failover makes DR databases the primary (`hivedr failover`) and
// plans the way back (`hivedr failback`). This file holds the pure
// decisions: which databases may be failed over, the consistent cut of a
// set of them, what a restarted ETL must redo past it, the achieved RPO,
// and the parameters a failover writes; run.go gathers the facts from
// Kafka and the metastores and carries the decisions out.
package failover

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hivedr/hivedr/internal/drparam"
)

// Mode is how the failover happens.
type Mode string

// The modes.
const (
	// Planned: the source is reachable. The failover waits until the
	// tailer published the source log's head and DR applied all of it.
	Planned Mode = "planned"
	// Unplanned: the source is gone. The failover applies what Kafka
	// already holds; what the tailer never published is lost (the RPO).
	Unplanned Mode = "unplanned"
)

// Database is what a failover learned of one DR database and decided for
// it.
type Database struct {
	Database string `json:"database"`
	// LastID is the DR database's repl.last.id before the failover.
	LastID int64 `json:"repl_last_id"`
	// Reached is the source event the database is complete up to: every
	// event of it up to Reached is applied (LastID, or further when the
	// tailer's checkpoint or a heartbeat showed nothing more came for it).
	Reached int64 `json:"reached_event_id"`
	// ReachedTime is the source time of Reached.
	ReachedTime time.Time `json:"reached_source_time"`
	// CaughtUp: the applier group had consumed the whole topic.
	CaughtUp bool `json:"caught_up"`
	// LostEvents are the source events of the database after Reached that
	// DR never got (-1: unknown, the source could not be read).
	LostEvents int64 `json:"rpo_events"`
	// RPOSeconds is how much source history is not on DR: 0 when nothing
	// is lost, else from ReachedTime to the failover.
	RPOSeconds float64 `json:"rpo_seconds"`
	// Redo are the tables that got events after the cut on this database
	// (applied on DR past the set's cut): what a restarted ETL that
	// resumes from the cut must redo, or check, here.
	Redo []TableRedo `json:"redo_after_cut"`
	// DRLogHead is the DR metastore's notification log head when the
	// failover was recorded.
	DRLogHead int64 `json:"dr_log_head"`
	// ReplTxns are the DR transactions the applier had opened for source
	// transactions of the database that never ended on DR (txns.go): the
	// failover aborted them; a dry run lists those it would abort.
	ReplTxns []int64 `json:"aborted_replicated_txns,omitempty"`
}

// TableRedo counts the events of one table after the cut.
type TableRedo struct {
	Table       string `json:"table"` // "" for database-level events
	Events      int    `json:"events"`
	First, Last int64  `json:"-"`
}

// Applied is one event a DR database applied, as read back from its
// topic: its ID, time and table.
type Applied struct {
	EventID int64
	Table   string
}

// ErrCutShort is Check's refusal of a database a failover marked and did
// not finish (it exited before recording its figures): Options.Resume
// takes it up.
var ErrCutShort = errors.New("cut short before its figures were recorded")

// Check refuses a database that cannot be failed over: not on DR, not
// this pipeline's replica, or failed over already (a failover runs
// once; failback undoes it). params nil means the database is not on DR.
func Check(db, source string, params map[string]string) error {
	switch {
	case params == nil:
		return fmt.Errorf("database %s: not on the DR metastore", db)
	case params[drparam.FailedOverAt] != "" && params[drparam.FailoverEventID] == "":
		return fmt.Errorf("database %s: failed over already at %s (%s), %w: it is writable on DR and its RPO is not recorded; "+
			"`hivedr failover -resume` finishes it (run it when no other failover of the database runs)", db, params[drparam.FailedOverAt], params[drparam.FailoverMode], ErrCutShort)
	case params[drparam.FailedOverAt] != "":
		return fmt.Errorf("database %s: failed over already at %s (%s, at event %s): a failover runs once",
			db, params[drparam.FailedOverAt], params[drparam.FailoverMode], params[drparam.FailoverEventID])
	case params[drparam.Target] != drparam.TargetMark(source):
		return fmt.Errorf("database %s: not a replica of this pipeline (%s=%q, want %q)",
			db, drparam.Target, params[drparam.Target], drparam.TargetMark(source))
	case params[drparam.BootstrapID] != "":
		return fmt.Errorf("database %s: a bootstrap (%s) is being applied to it: it is not consistent until its END", db, params[drparam.BootstrapID])
	}
	return nil
}

// Cut is the consistent cut of a set of databases: the newest event ID
// every one of them reached (0 for an empty set).
func Cut(dbs []Database) int64 {
	var cut int64
	for i, d := range dbs {
		if i == 0 || d.Reached < cut {
			cut = d.Reached
		}
	}
	return cut
}

// Redo groups the events a database applied past cut by table, in
// table order.
func Redo(cut int64, applied []Applied) []TableRedo {
	by := map[string]*TableRedo{}
	for _, a := range applied {
		if a.EventID <= cut {
			continue
		}
		t := by[a.Table]
		if t == nil {
			t = &TableRedo{Table: a.Table, First: a.EventID}
			by[a.Table] = t
		}
		t.Events++
		t.First, t.Last = min(t.First, a.EventID), max(t.Last, a.EventID)
	}
	out := make([]TableRedo, 0, len(by))
	for _, t := range by {
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Table < out[j].Table })
	return out
}

// RPO is the achieved RPO of a database failed over at at, with lost
// source events after its Reached (-1: unknown): 0 seconds when nothing
// is lost, else the source time from which DR has nothing.
func RPO(d Database, lost int64, at time.Time) float64 {
	if lost == 0 {
		return 0
	}
	if d.ReachedTime.IsZero() {
		return -1
	}
	return max(0, at.Sub(d.ReachedTime).Seconds())
}

// Mark returns the parameters of a DR database after its failover: the
// fence's mark (FenceMark, its token kept) and the failover's figures.
// params is not changed.
func Mark(params map[string]string, d Database, mode Mode, cut int64, set []string, at time.Time) map[string]string {
	out := FenceMark(params, mode, params[drparam.FailoverFence], at)
	out[drparam.FailoverEventID] = strconv.FormatInt(d.Reached, 10)
	if !d.ReachedTime.IsZero() {
		out[drparam.FailoverSourceTime] = d.ReachedTime.UTC().Format(time.RFC3339)
	}
	out[drparam.FailoverCut] = strconv.FormatInt(cut, 10)
	out[drparam.FailoverSet] = strings.Join(set, ",")
	out[drparam.FailoverRPOEvents] = "unknown"
	if d.LostEvents >= 0 {
		out[drparam.FailoverRPOEvents] = strconv.FormatInt(d.LostEvents, 10)
	}
	out[drparam.FailoverRPOSeconds] = strconv.FormatFloat(d.RPOSeconds, 'f', 1, 64)
	out[drparam.FailoverDRLogHead] = strconv.FormatInt(d.DRLogHead, 10)
	return out
}

// FenceMark returns the parameters of a DR database marked failed over
// before its figures are known (Run's fence step): FailedOverAt, the
// mode and the fence token (unless "") set, the replica marker moved to
// FailoverTarget, a halt note removed. The applier refuses the database
// from then on; Mark adds the figures later. params is not changed.
func FenceMark(params map[string]string, mode Mode, token string, at time.Time) map[string]string {
	out := make(map[string]string, len(params)+4)
	for k, v := range params {
		out[k] = v
	}
	if t, ok := params[drparam.Target]; ok {
		out[drparam.FailoverTarget] = t
	}
	delete(out, drparam.Target)
	delete(out, drparam.Halted)
	out[drparam.FailedOverAt] = at.UTC().Format(time.RFC3339)
	out[drparam.FailoverMode] = string(mode)
	if token != "" {
		out[drparam.FailoverFence] = token
	}
	return out
}

// Record is a failover as a DR database's parameters record it.
type Record struct {
	At        time.Time
	Mode      Mode
	EventID   int64
	Cut       int64
	DRLogHead int64
	// WasTargetFor is the replica marker the database had.
	WasTargetFor string
	// LostEvents: -1 when the failover could not count them.
	LostEvents int64
}

// ReadRecord reads the failover a DR database's parameters record; ok is
// false when the database was not failed over.
func ReadRecord(params map[string]string) (r Record, ok bool, err error) {
	at := params[drparam.FailedOverAt]
	if at == "" {
		return Record{}, false, nil
	}
	if r.At, err = time.Parse(time.RFC3339, at); err != nil {
		return Record{}, true, fmt.Errorf("%s=%q: %w", drparam.FailedOverAt, at, err)
	}
	r.Mode, r.WasTargetFor = Mode(params[drparam.FailoverMode]), params[drparam.FailoverTarget]
	for _, f := range []struct {
		key string
		to  *int64
	}{{drparam.FailoverEventID, &r.EventID}, {drparam.FailoverCut, &r.Cut}, {drparam.FailoverDRLogHead, &r.DRLogHead}} {
		if *f.to, err = strconv.ParseInt(params[f.key], 10, 64); err != nil {
			return Record{}, true, fmt.Errorf("%s=%q: not an event ID", f.key, params[f.key])
		}
	}
	r.LostEvents = -1
	if n, err := strconv.ParseInt(params[drparam.FailoverRPOEvents], 10, 64); err == nil {
		r.LostEvents = n
	}
	return r, true, nil
}

// DrillPrefix begins the name of every scratch database `hivedr drill`
// creates (DrillPrefix + its start time). Such a database is never
// production: failover -all leaves it out, and a drill drops it (and the
// leftovers of a drill that was killed) when done.
const DrillPrefix = "hivedr_drill_"

// IsDrill reports whether db is a drill's scratch database.
func IsDrill(db string) bool { return strings.HasPrefix(strings.ToLower(db), DrillPrefix) }
