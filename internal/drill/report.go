package drill

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/hivedr/hivedr/internal/failover"
)

// Step is one step of a drill: its name, how long it took, and how it
// ended ("ok", "failed: ...", "skipped: ...").
type Step struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
	Outcome string  `json:"outcome"`
	Detail  string  `json:"detail,omitempty"`
}

// Verdict is a drill's outcome.
type Verdict string

// The verdicts.
const (
	// Passed: every step ran and passed.
	Passed Verdict = "PASSED"
	// Incomplete: every step that ran passed, but some were not run on
	// purpose (failback, without a reverse pipeline): the rehearsal is not
	// the whole of it, and says so.
	Incomplete Verdict = "INCOMPLETE"
	// Failed: a step failed (the steps after it were not run, but the
	// clean-up).
	Failed Verdict = "FAILED"
)

// Report is what `hivedr drill` reports.
type Report struct {
	Database string `json:"database"`
	DryRun   bool   `json:"dry_run"`
	// RPOEvents and RPOSeconds are the failover's achieved RPO; RTO is
	// how long the failover took, from its start until the database was
	// writable on DR.
	RPOEvents  int64   `json:"rpo_events"`
	RPOSeconds float64 `json:"rpo_seconds"`
	RTOSeconds float64 `json:"rto_seconds"`
	// MovedTables counts the tables failback moved.
	MovedTables int `json:"failback_moved_tables"`
	// Checksummed counts the data files whose checksums verify compared,
	// over every verify of the drill.
	Checksummed int `json:"files_checksummed"`
	// Leftovers are the scratch databases of earlier, killed drills of
	// this pipeline that the drill dropped before it began.
	Leftovers []string `json:"leftovers_dropped,omitempty"`
	Steps     []Step   `json:"steps"`
	Seconds   float64  `json:"seconds"`
	Verdict   Verdict  `json:"verdict"`
	// OK is Verdict == Passed.
	OK bool `json:"ok"`
}

const (
	failedPrefix  = "failed"
	skippedEarly  = "skipped: an earlier step failed"
	skippedPrefix = "skipped: "
)

// failed reports whether a step has failed.
func (r *Report) failed() bool {
	for _, s := range r.Steps {
		if strings.HasPrefix(s.Outcome, failedPrefix) {
			return true
		}
	}
	return false
}

// Run times fn as the step called name and records it; it returns fn's
// error. A step after a failed one is not run (recorded as skipped).
func (r *Report) Run(name string, fn func() (detail string, err error)) error {
	if r.failed() {
		r.Steps = append(r.Steps, Step{Name: name, Outcome: skippedEarly})
		return fmt.Errorf("skipped")
	}
	return r.Always(name, fn)
}

// Always runs and records fn as the step called name even after a failed
// step (the clean-up).
func (r *Report) Always(name string, fn func() (detail string, err error)) error {
	start := time.Now()
	detail, err := fn()
	s := Step{Name: name, Seconds: time.Since(start).Seconds(), Outcome: "ok", Detail: detail}
	if err != nil {
		s.Outcome = failedPrefix + ": " + err.Error()
	}
	r.Steps = append(r.Steps, s)
	return err
}

// Skip records a step that is not run on purpose, and why: the drill is
// then Incomplete at best.
func (r *Report) Skip(name, why string) {
	r.Steps = append(r.Steps, Step{Name: name, Outcome: skippedPrefix + why})
}

// Finish sets the verdict and the total time since start.
func (r *Report) Finish(start time.Time) {
	r.Verdict = Passed
	for _, s := range r.Steps {
		switch {
		case strings.HasPrefix(s.Outcome, failedPrefix) || s.Outcome == skippedEarly:
			r.Verdict = Failed
		case strings.HasPrefix(s.Outcome, skippedPrefix) && r.Verdict == Passed:
			r.Verdict = Incomplete
		}
	}
	r.OK = r.Verdict == Passed
	r.Seconds = time.Since(start).Seconds()
}

// NotRun lists the steps skipped on purpose, with why.
func (r *Report) NotRun() []string {
	var out []string
	for _, s := range r.Steps {
		if strings.HasPrefix(s.Outcome, skippedPrefix) && s.Outcome != skippedEarly {
			out = append(out, s.Name+" ("+strings.TrimPrefix(s.Outcome, skippedPrefix)+")")
		}
	}
	return out
}

// WriteJSON writes the report as one JSON object.
func (r *Report) WriteJSON(w io.Writer) error { return failover.JSON(w, r) }

// WriteText writes the report for a person.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	kind := "drill"
	if r.DryRun {
		kind = "readiness check (dry run, nothing changed)"
	}
	verdict := string(r.Verdict)
	if r.Verdict == Incomplete {
		verdict += ": NOT a full rehearsal, not run: " + strings.Join(r.NotRun(), ", ")
	}
	fmt.Fprintf(&b, "hivedr %s of %s: %s in %.1fs\n", kind, r.Database, verdict, r.Seconds)
	for _, s := range r.Steps {
		fmt.Fprintf(&b, "  %-22s %7.1fs  %s", s.Name, s.Seconds, s.Outcome)
		if s.Detail != "" {
			fmt.Fprintf(&b, " (%s)", s.Detail)
		}
		b.WriteString("\n")
	}
	if !r.DryRun {
		lost := "unknown"
		if r.RPOEvents >= 0 {
			lost = fmt.Sprint(r.RPOEvents)
		}
		back := fmt.Sprintf("failback moved %d table(s)", r.MovedTables)
		if r.Verdict == Incomplete {
			back = "failback not run"
		}
		fmt.Fprintf(&b, "RPO %s events, %.1fs; RTO %.1fs; %s; %d file(s) checksummed\n", lost, r.RPOSeconds, r.RTOSeconds, back, r.Checksummed)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
