package bootstrap

import (
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/schemas"
)

// Database is where one bootstrap of one database stands, as the three
// sides report it: the tailer publishing it (its BootstrapState), copyd
// copying its files (completions of its copy tasks), the applier applying
// it (the DR database's parameters).
type Database struct {
	Database    string `json:"database"`
	BootstrapID string `json:"bootstrap_id"`
	CutEventID  int64  `json:"cut_event_id"`
	// Phase is the tailer's phase (SNAPSHOT, CATCHUP) while the newest
	// checkpoint holds the bootstrap, then PhasePublished.
	Phase string `json:"phase"`
	// What the tailer published: tables of TablesTotal (listed at the
	// start of the snapshot), partitions, files (copy tasks) and their
	// bytes, records (seq). Totals once Phase is CATCHUP or published.
	TablesTotal         int64 `json:"tables_total"`
	TablesPublished     int64 `json:"tables_published"`
	PartitionsPublished int64 `json:"partitions_published"`
	FilesPublished      int64 `json:"files_published"`
	BytesPublished      int64 `json:"bytes_published"`
	RecordsPublished    int64 `json:"records_published"`
	// What copyd did: files copied (or found identical on DR) and their
	// bytes; files it could not copy (FAILED, SOURCE_GONE: the applier
	// decides whether that matters).
	FilesCopied int64 `json:"files_copied"`
	BytesCopied int64 `json:"bytes_copied"`
	FilesFailed int64 `json:"files_failed"`
	// Applied is what the applier recorded (hivedr.bootstrap.applied).
	Applied drparam.Progress `json:"applied"`
	// Done: the DR database names the bootstrap (or a later one of it) in
	// hivedr.bootstrap.done.
	Done bool `json:"done"`
	// SupersededBy names the later bootstrap the DR database has applied
	// instead.
	SupersededBy string `json:"superseded_by,omitempty"`
	// Halted is the DR database's hivedr.halted when it stops this
	// bootstrap: its BEGIN was applied, or the halt is not one a
	// bootstrap releases.
	Halted string `json:"halted,omitempty"`
	// Started is when the tailer started the bootstrap.
	Started time.Time `json:"started,omitzero"`
	// Adopted: the bootstrap is another request's, in progress when this
	// one was taken (Tracker.Adopt); copies before this request are not
	// counted until it is done.
	Adopted bool `json:"adopted,omitempty"`
	// Rates are the meters with their rates since Started and ETAs, as
	// `hivedr status` gives them (Average); empty elsewhere.
	Rates []Rate `json:"rates,omitempty"`

	// metricHalt is the reason of the applier's
	// hivedr_applier_halted{db} gauge when no bootstrap releases it.
	metricHalt string
}

// PhasePublished: the tailer has published the whole bootstrap and its
// catch-up (the database rejoined the others).
const PhasePublished = "PUBLISHED"

// FinalTotals reports whether the tailer's figures are the bootstrap's
// totals (its snapshot is all published).
func (d *Database) FinalTotals() bool {
	return d.Phase == schemas.PhaseCatchup || d.Phase == PhasePublished || d.Done
}

// AppliedPercent is the share of the published records applied on DR, in
// percent; 100 once done.
func (d *Database) AppliedPercent() float64 {
	switch {
	case d.Done:
		return 100
	case d.RecordsPublished <= 0:
		return 0
	}
	return min(100, 100*float64(d.Applied.Seq)/float64(d.RecordsPublished))
}

// Tracker folds what the command reads into where the request's
// bootstraps stand. It is pure: the caller feeds it checkpoints and
// completions in the order it reads them and the DR parameters whenever
// it reads them; it does no I/O and keeps no clock.
//
// The contract with the tailer it relies on: every bootstrap a request
// starts carries the request's ID in its BootstrapState, and the
// checkpoint that moves requests_offset past the request (the one that
// commits its taking) already lists them all; each stays in the
// checkpoints until its database rejoins. Copy tasks of a bootstrap have
// IDs <bootstrap_id>-s<seq>-<i>.
type Tracker struct {
	requestID     string
	requestOffset int64
	repair        bool

	taken      bool
	tailer     schemas.TailerState
	checkpoint time.Time // written, of the newest checkpoint seen

	dbs []*Database // in the order first seen
	// adopt says whether a database's bootstrap of another request is
	// followed (Adopt); adopted holds those followed.
	adopt   func(db string) bool
	adopted map[string]bool
	// copies counts, by bootstrap ID, the completions of its copy tasks:
	// counts, not a set of task IDs, so the command's memory does not grow
	// with the files it follows. copyd completes each task once (its
	// completion commits with its offset); a task completed again (copyd's
	// offsets moved back by an operator) counts again, and the figure is
	// capped at the files published once they are all published.
	copies map[string]*copied
}

// copied counts completions: files copied (COPIED, SKIPPED_IDENTICAL)
// and their bytes, files that failed (FAILED, SOURCE_GONE).
type copied struct {
	files, bytes, failed int64
}

// NewTracker follows the bootstraps of the request with ID requestID,
// written at offset requestOffset of the control topic; with requestID ""
// it follows every bootstrap (what `hivedr status` shows).
func NewTracker(requestID string, requestOffset int64, repair bool) *Tracker {
	return &Tracker{requestID: requestID, requestOffset: requestOffset, repair: repair, copies: map[string]*copied{}, adopted: map[string]bool{}}
}

// Taken reports whether the tailer has taken the request up.
func (t *Tracker) Taken() bool { return t.taken }

// ObserveCheckpoint folds one tailer checkpoint, newer than those before.
func (t *Tracker) ObserveCheckpoint(cp *schemas.TailerCheckpoint) {
	t.tailer, t.checkpoint = cp.State, cp.Written
	taking := !t.taken && cp.RequestsOffset > t.requestOffset
	if taking {
		t.taken = true
	}
	present := map[*Database]bool{}
	for i := range cp.Bootstraps {
		b := &cp.Bootstraps[i]
		if t.requestID != "" && b.RequestID != t.requestID && !t.adopted[b.BootstrapID] {
			continue
		}
		t.fold(b, present)
	}
	if taking && t.adopt != nil {
		// The tailer started none for a database already being
		// bootstrapped: follow that bootstrap instead.
		for i := range cp.Bootstraps {
			b := &cp.Bootstraps[i]
			if b.RequestID == t.requestID || t.find(b.Database) != nil || !t.adopt(strings.ToLower(b.Database)) {
				continue
			}
			t.adopted[b.BootstrapID] = true
			t.fold(b, present)
		}
	}
	for _, d := range t.dbs {
		if !present[d] && d.BootstrapID != "" {
			d.Phase = PhasePublished
		}
	}
}

// Adopt makes the tracker follow, when the tailer takes the request,
// the bootstraps already in progress (of other requests) of the
// databases the request names (databases: names or globs; empty: every
// database): the tailer starts none for them, so a command run again
// follows the bootstrap its first run started.
func (t *Tracker) Adopt(databases []string) {
	t.adopt = func(db string) bool {
		if len(databases) == 0 {
			return true
		}
		for _, g := range databases {
			if ok, _ := path.Match(g, db); ok {
				return true
			}
		}
		return false
	}
}

// fold sets the figures of the database of b from it.
func (t *Tracker) fold(b *schemas.BootstrapState, present map[*Database]bool) {
	d := t.database(b.Database)
	if d.BootstrapID != b.BootstrapID {
		// A new bootstrap of the database for the same request (the
		// tailer restarted it): its figures start again.
		*d = Database{Database: d.Database, BootstrapID: b.BootstrapID}
	}
	d.Database, d.CutEventID, d.Phase, d.Started = strings.ToLower(b.Database), b.CutEventID, b.Phase, b.Started
	d.TablesTotal, d.TablesPublished, d.PartitionsPublished = b.TablesTotal, b.TablesDone, b.PartitionsDone
	d.FilesPublished, d.BytesPublished, d.RecordsPublished = b.Files, b.Bytes, b.Seq
	d.Adopted = b.RequestID != t.requestID && t.requestID != ""
	present[d] = true
}

func (t *Tracker) database(name string) *Database {
	name = strings.ToLower(name)
	for _, d := range t.dbs {
		if d.Database == name {
			return d
		}
	}
	d := &Database{Database: name}
	t.dbs = append(t.dbs, d)
	return d
}

// ObserveCompletion folds one copy completion (of any task: those of
// other bootstraps and of events are ignored when the figures are made).
func (t *Tracker) ObserveCompletion(c *schemas.CopyCompletion) {
	id, ok := TaskBootstrap(c.TaskID)
	if !ok {
		return
	}
	n := t.copies[id]
	if n == nil {
		n = &copied{}
		t.copies[id] = n
	}
	switch c.Status {
	case schemas.StatusCopied, schemas.StatusSkippedIdentical:
		n.files++
		n.bytes += c.Length
	case schemas.StatusFailed, schemas.StatusSourceGone:
		n.failed++
	}
}

// TaskBootstrap returns the bootstrap ID a bootstrap copy task's ID
// (<bootstrap_id>-s<seq>-<i>) begins with; ok is false for another task.
func TaskBootstrap(taskID string) (string, bool) {
	i := strings.LastIndexByte(taskID, '-')
	if i < 0 || !digits(taskID[i+1:]) {
		return "", false
	}
	j := strings.LastIndexByte(taskID[:i], '-')
	if j <= 0 || len(taskID[j+1:i]) < 2 || taskID[j+1] != 's' || !digits(taskID[j+2:i]) {
		return "", false
	}
	return taskID[:j], true
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// BootstrapCut returns the cut event ID a bootstrap ID
// (<db>-<cut>-<unixms>) names; ok is false when it is not of that form.
func BootstrapCut(id string) (int64, bool) {
	cut, _, ok := parseBootstrapID(id)
	return cut, ok
}

// BootstrapStart returns when a bootstrap ID (<db>-<cut>-<unixms>) says
// the bootstrap started; ok is false when it is not of that form.
func BootstrapStart(id string) (time.Time, bool) {
	_, ms, ok := parseBootstrapID(id)
	return time.UnixMilli(ms), ok
}

// parseBootstrapID returns the cut and start time (Unix milliseconds) of
// a bootstrap ID.
func parseBootstrapID(id string) (cut, ms int64, ok bool) {
	i := strings.LastIndexByte(id, '-')
	if i < 0 {
		return 0, 0, false
	}
	j := strings.LastIndexByte(id[:i], '-')
	if j < 0 {
		return 0, 0, false
	}
	cut, err1 := strconv.ParseInt(id[j+1:i], 10, 64)
	ms, err2 := strconv.ParseInt(id[i+1:], 10, 64)
	return cut, ms, err1 == nil && err2 == nil
}

// later reports whether bootstrap a was started after bootstrap b of the
// same database: at a later cut, or at the same cut later.
func later(a, b string) bool {
	ca, ma, ok1 := parseBootstrapID(a)
	cb, mb, ok2 := parseBootstrapID(b)
	return ok1 && ok2 && (ca > cb || ca == cb && ma > mb)
}

// ObserveDR folds the DR database's parameters (nil: no such database on
// DR) for the tracked database db.
func (t *Tracker) ObserveDR(db string, params map[string]string) {
	d := t.find(db)
	if d == nil || d.BootstrapID == "" {
		return
	}
	t.observeDR(d, params)
}

// ObserveDRAny folds the DR database's parameters of a database no
// tailer checkpoint showed (status: a bootstrap whose tailer side is over
// or unknown): the bootstrap being applied is the one the DR names.
func (t *Tracker) ObserveDRAny(db string, params map[string]string) {
	d := t.find(db)
	if d == nil {
		id := params[drparam.BootstrapID]
		if id == "" {
			return
		}
		d = t.database(db)
		d.BootstrapID, d.Phase = id, PhasePublished
		d.CutEventID, _ = BootstrapCut(id)
	}
	t.observeDR(d, params)
}

func (t *Tracker) find(db string) *Database {
	db = strings.ToLower(db)
	for _, d := range t.dbs {
		if d.Database == db {
			return d
		}
	}
	return nil
}

func (t *Tracker) observeDR(d *Database, params map[string]string) {
	if params == nil {
		return // not on DR yet: its BEGIN creates it
	}
	id := d.BootstrapID
	if params[drparam.BootstrapID] == id {
		if p, err := drparam.ParseProgress(params[drparam.BootstrapApplied]); err == nil {
			d.Applied = p
		}
	}
	done := params[drparam.BootstrapDone]
	switch {
	case done == id:
		d.Done = true
	case done != "" && params[drparam.BootstrapID] != id:
		// A later bootstrap of the database was applied instead (the
		// tailer restarted this one, or another request came after).
		if later(done, id) {
			d.Done, d.SupersededBy = true, done
		}
	}
	d.Halted = ""
	if h := params[drparam.Halted]; h != "" && !d.Done {
		if params[drparam.BootstrapID] == id || !drparam.ReleasedByBootstrap(drparam.HaltReason(h)) {
			d.Halted = h
		}
	}
	if d.Done {
		d.Applied.Tables = max(d.Applied.Tables, d.TablesPublished)
		d.Applied.Partitions = max(d.Applied.Partitions, d.PartitionsPublished)
		d.Applied.Files = max(d.Applied.Files, d.FilesPublished)
		d.Applied.Seq = max(d.Applied.Seq, d.RecordsPublished)
	}
}

// ObserveHalts folds the applier's halted gauges
// (hivedr_applier_halted{db,reason}, by database), for the halts it does
// not record on the DR database (a DR database that is not this
// pipeline's replica, one it cannot write): a halt no bootstrap releases
// stops the database's bootstrap. A database missing from halted is not
// halted.
func (t *Tracker) ObserveHalts(halted map[string]string) {
	for _, d := range t.dbs {
		d.metricHalt = ""
		if r, ok := halted[d.Database]; ok && !d.Done && !drparam.ReleasedByBootstrap(r) {
			d.metricHalt = r
		}
	}
}

// Databases returns the request's bootstraps with their copy figures, by
// database name.
func (t *Tracker) Databases() []Database {
	out := make([]Database, 0, len(t.dbs))
	for _, d := range t.dbs {
		if d.BootstrapID == "" {
			continue
		}
		c := *d
		if c.Halted == "" && c.metricHalt != "" {
			c.Halted = "the applier's hivedr_applier_halted{reason=\"" + c.metricHalt + "\"} (its log says why)"
		}
		c.FilesCopied, c.BytesCopied, c.FilesFailed = 0, 0, 0
		if n := t.copies[d.BootstrapID]; n != nil {
			c.FilesCopied, c.BytesCopied, c.FilesFailed = n.files, n.bytes, n.failed
		}
		if c.FinalTotals() {
			c.FilesFailed = min(c.FilesFailed, c.FilesPublished)
			c.FilesCopied = min(c.FilesCopied, c.FilesPublished-c.FilesFailed)
		}
		if c.Done {
			// Every file the applier needed was there: those it did not
			// see copied were tolerated (their objects are gone).
			c.FilesCopied = max(c.FilesCopied, c.Applied.Files-c.FilesFailed)
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Database < out[j].Database })
	return out
}

// Totals sums the figures of the databases.
func Totals(dbs []Database) Database {
	var s Database
	s.Done, s.Phase = len(dbs) > 0, PhasePublished
	for _, d := range dbs {
		s.TablesTotal += d.TablesTotal
		s.TablesPublished += d.TablesPublished
		s.PartitionsPublished += d.PartitionsPublished
		s.FilesPublished += d.FilesPublished
		s.BytesPublished += d.BytesPublished
		s.RecordsPublished += d.RecordsPublished
		s.FilesCopied += d.FilesCopied
		s.BytesCopied += d.BytesCopied
		s.FilesFailed += d.FilesFailed
		s.Applied.Seq += d.Applied.Seq
		s.Applied.Tables += d.Applied.Tables
		s.Applied.Partitions += d.Applied.Partitions
		s.Applied.Files += d.Applied.Files
		s.Done = s.Done && d.Done
		if !d.FinalTotals() {
			s.Phase = schemas.PhaseSnapshot
		}
	}
	return s
}

// Outcome is the tracker's verdict.
type Outcome int

// The outcomes.
const (
	// Waiting: not taken yet, or bootstraps are still going.
	Waiting Outcome = iota
	// Done: every bootstrap of the request is applied on DR.
	Done
	// Failed: a database halted on DR, the tailer stopped on a broken
	// chain, or the request matched no database.
	Failed
)

// Verdict says whether the request is done, failed (and why, one line per
// cause) or still going.
func (t *Tracker) Verdict() (Outcome, []string) {
	var why []string
	dbs := t.Databases()
	for _, d := range dbs {
		if d.Halted != "" {
			why = append(why, fmt.Sprintf("database %s halted on DR during bootstrap %s: %s (fix the cause and restart hivedr apply, or bootstrap the database again)", d.Database, d.BootstrapID, d.Halted))
		}
	}
	if t.tailer == schemas.StateChainBroken && (t.taken || !t.repair) {
		why = append(why, "the tailer stopped on a broken chain (CHAIN_BROKEN): repair with "+RepairCommand+" and restart hivedr tail")
	}
	if t.taken && len(dbs) == 0 {
		why = append(why, "the tailer took the request and started no bootstrap: its databases match none on the source, are out of the replication scope, or are being bootstrapped already (the tailer's log says which)")
	}
	if len(why) > 0 {
		return Failed, why
	}
	if t.taken && Totals(dbs).Done {
		return Done, nil
	}
	return Waiting, nil
}

// Tailer returns the state and written time of the newest checkpoint seen.
func (t *Tracker) Tailer() (schemas.TailerState, time.Time) { return t.tailer, t.checkpoint }
