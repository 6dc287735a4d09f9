package failover

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/hivedr/hivedr/internal/drparam"
)

// JSON writes v as one indented JSON object: the -json form of the
// failover, failback and drill reports.
func JSON(w io.Writer, v any) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(v)
}

// WriteJSON writes the report as one JSON object.
func (r *Report) WriteJSON(w io.Writer) error { return JSON(w, r) }

// WriteText writes the report for a person: the cut, then per database
// what it reflects, the RPO and what a restarted ETL must redo.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	if r.DryRun {
		r.writeDryRun(&b)
		_, err := io.WriteString(w, b.String())
		return err
	}
	fmt.Fprintf(&b, "%s failover of %d database(s) at %s (waited %.1fs, took %.1fs)\n",
		r.Mode, len(r.Databases), r.At.Format(time.RFC3339), r.WaitSeconds, r.Seconds)
	r.writeSource(&b)
	fmt.Fprintf(&b, "consistent cut: event %d (every database below reflects the source at least up to it)\n", r.Cut)
	for _, d := range r.Databases {
		lost := "unknown (source unreadable; failback counts them)"
		if d.LostEvents >= 0 {
			lost = fmt.Sprint(d.LostEvents)
		}
		src := "-"
		if !d.ReachedTime.IsZero() {
			src = d.ReachedTime.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(&b, "\n  %s: writable on DR; reflects source event %d (%s); RPO %s events, %.1fs\n", d.Database, d.Reached, src, lost, d.RPOSeconds)
		if len(d.ReplTxns) > 0 {
			fmt.Fprintf(&b, "    aborted DR transactions %v: source transactions open at the cut, never committed on DR\n", d.ReplTxns)
		}
		if len(d.Redo) == 0 {
			fmt.Fprintf(&b, "    nothing past the cut: an ETL restarted from event %d redoes nothing here\n", r.Cut)
			continue
		}
		fmt.Fprintf(&b, "    past the cut (applied here, not everywhere): a restarted ETL must redo or skip\n")
		for _, t := range d.Redo {
			name := t.Table
			if name == "" {
				name = "(database)"
			}
			fmt.Fprintf(&b, "      %-30s %d event(s), %d..%d\n", name, t.Events, t.First, t.Last)
		}
	}
	r.writeSkipped(&b)
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "\nnote: %s\n", n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeDryRun writes a dry run's report: where each database stands and
// that nothing changed.
func (r *Report) writeDryRun(b *strings.Builder) {
	fmt.Fprintf(b, "dry run of a %s failover: %d database(s) can be failed over; nothing changed\n", r.Mode, len(r.Databases))
	r.writeSource(b)
	for _, d := range r.Databases {
		state := "its topic applied to the end"
		if !d.CaughtUp {
			state = "events still to apply (a failover waits for them)"
		}
		fmt.Fprintf(b, "  %s: this pipeline's replica at event %d, %s\n", d.Database, d.LastID, state)
		if len(d.ReplTxns) > 0 {
			fmt.Fprintf(b, "    DR transactions %v stand for source transactions not ended on DR yet: a failover now aborts those still open\n", d.ReplTxns)
		}
	}
	r.writeSkipped(b)
}

func (r *Report) writeSource(b *strings.Builder) {
	if r.SourceHead >= 0 {
		fmt.Fprintf(b, "source log head %d, tailer checkpoint %d\n", r.SourceHead, r.TailerEventID)
	} else {
		fmt.Fprintf(b, "source not read; tailer checkpoint %d\n", r.TailerEventID)
	}
}

func (r *Report) writeSkipped(b *strings.Builder) {
	for _, x := range r.Skipped {
		fmt.Fprintf(b, "  left out %s: %s\n", x.Database, x.Why)
	}
}

// WriteJSON writes the report as one JSON object.
func (r *BackReport) WriteJSON(w io.Writer) error { return JSON(w, r) }

// WriteText writes the report for a person: per database the tables
// moved (re-bootstrapped) and why, and what resumes incrementally.
func (r *BackReport) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "failback of %d database(s): %d table(s) move (re-bootstrapped on the reverse pipeline), the rest resume incrementally (%.1fs)\n",
		len(r.Databases), r.MovedTables, r.Seconds)
	for _, d := range r.Databases {
		fmt.Fprintf(&b, "\n  %s: the old primary is now the reverse pipeline's replica from DR log event %d\n", d.Database, d.DRLogHead)
		fmt.Fprintf(&b, "    old primary: %d event(s) after event %d, the one DR reflected: %d lost (written at or before the failover at %s), %d written after it\n",
			d.SourceEvents, d.EventID, d.LostEvents, d.FailedOverAt.UTC().Format(time.RFC3339), d.LateEvents)
		switch {
		case d.RPORecorded:
			fmt.Fprintf(&b, "    RPO in events: %d, counted now (the failover could not read the source); recorded on DR as %s\n", d.LostEvents, drparam.FailoverRPOEvents)
		case d.RecordedLost >= 0 && int64(d.LostEvents) != d.RecordedLost:
			fmt.Fprintf(&b, "    RPO in events: the failover recorded %d; the old primary's log has %d at or before its time\n", d.RecordedLost, d.LostEvents)
		}
		for _, t := range d.Moved {
			var why []string
			if n := d.SourceChanged[t]; n > 0 {
				why = append(why, fmt.Sprintf("%d on the old primary", n))
			}
			if n := d.DRChanged[t]; n > 0 {
				why = append(why, fmt.Sprintf("%d on DR", n))
			}
			fmt.Fprintf(&b, "    move %-30s changed: %s\n", t, strings.Join(why, ", "))
		}
		fmt.Fprintf(&b, "    %d table(s) unchanged: incremental\n", d.Unchanged)
		if d.RequestID != "" {
			fmt.Fprintf(&b, "    bootstrap request %s written\n", d.RequestID)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
