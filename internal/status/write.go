package status

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hivedr/hivedr/internal/bootstrap"
)

// WriteJSON writes the report as one indented JSON object, the output of
// `hivedr status -json`.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("write the status report as JSON: %w", err)
	}
	return nil
}

// WriteText writes the report as `hivedr status` prints it: the tailer
// and applier lines, a table of the databases, the totals with the
// verdict, then the halts, skipped events and errors. It returns the first
// error writing to w.
func (r *Report) WriteText(w io.Writer) error {
	sw := &stickyWriter{w: w}
	r.writeText(sw)
	if sw.err != nil {
		return fmt.Errorf("write the status table: %w", sw.err)
	}
	return nil
}

// stickyWriter remembers the first write error and writes nothing after
// it.
type stickyWriter struct {
	w   io.Writer
	err error
}

func (s *stickyWriter) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.w.Write(p)
	s.err = err
	return n, err
}

func (r *Report) writeText(w io.Writer) {
	if len(r.Sites) > 0 {
		r.writeSites(w)
	}
	fmt.Fprintf(w, "tailer (source %s): %s\n", r.Tailer.Source, r.tailerLine())
	if len(r.Sites) > 0 {
		fmt.Fprintf(w, "\n==== site %s\n", r.Site)
	}
	r.writeSite(w)
	for _, s := range r.Sites {
		fmt.Fprintf(w, "\n==== site %s\n", s.Site)
		s.writeSite(w)
	}
}

// writeSites writes the sites side by side: one line each, the verdict
// of every site's own report.
func (r *Report) writeSites(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "SITE	APPLIER GROUP	MEMBERS	DR METASTORE	DATABASES	LAG	LAGGING	HALTED	OVER RPO	OLDEST AGE	VERDICT")
	for _, s := range append([]*Report{r}, r.Sites...) {
		members := "?"
		if s.Applier.Members >= 0 {
			members = strconv.Itoa(s.Applier.Members)
		}
		oldest := "-"
		var worst float64 = -1
		for _, d := range s.Databases {
			if d.Age != nil && *d.Age > worst {
				worst = *d.Age
			}
		}
		if worst >= 0 {
			oldest = short(time.Duration(worst * float64(time.Second)))
		}
		verdict := "caught up"
		if !s.CaughtUp {
			verdict = "NOT caught up"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", s.Site, s.Applier.Group, members, s.Applier.Metastore,
			s.Total.Databases, s.Total.LagEvents, s.Total.Lagging, s.Total.Halted, s.Total.RPOBreached, oldest, verdict)
	}
	tw.Flush()
	fmt.Fprintln(w)
}

// writeSite writes one site's part of the report: its applier, its
// databases' table, totals and sections.
func (r *Report) writeSite(w io.Writer) {
	members := fmt.Sprintf("%d members", r.Applier.Members)
	switch r.Applier.Members {
	case -1:
		members = "members unknown"
	case 0:
		members = "no members (is `hivedr apply` running?)"
	case 1:
		members = "1 member"
	}
	fmt.Fprintf(w, "applier (group %s): %s; DR metastore %s\n\n", r.Applier.Group, members, r.Applier.Metastore)

	if len(r.Databases) == 0 {
		fmt.Fprintln(w, "no replicated databases: no event topics in Kafka and none named in replication.databases")
	} else {
		tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
		fmt.Fprintln(tw, "DATABASE\tREPL.LAST.ID\tLAG\tRECORDS\tBEHIND\tAGE\tRPO\tNEWEST RECORD\tSKIPPED\tSTATE")
		for _, d := range r.Databases {
			last := "-"
			switch {
			case !d.known.dr:
				last = "?"
			case d.LastEventID > 0:
				last = strconv.FormatInt(d.LastEventID, 10)
			}
			lag, records := "?", "?"
			if d.known.kafka && d.LagEvents >= 0 {
				lag = strconv.FormatInt(d.LagEvents, 10)
				if d.LagEventsPartial {
					lag = ">=" + lag
				}
			}
			if d.known.kafka && d.UncommittedRecords >= 0 {
				records = strconv.FormatInt(d.UncommittedRecords, 10)
			}
			behind := "-"
			if d.Behind != nil {
				behind = short(time.Duration(*d.Behind * float64(time.Second)))
			} else if d.LagEvents > 0 {
				behind = "?"
			}
			age := "-"
			if d.Age != nil {
				age = short(time.Duration(*d.Age * float64(time.Second)))
			} else if d.TopicExists {
				age = "?"
			}
			rpo := "-"
			if d.RPO > 0 {
				rpo = short(time.Duration(d.RPO * float64(time.Second)))
			}
			newest := "-"
			if !d.Newest.IsZero() {
				newest = ago(r.Time, d.Newest)
				if d.NewestType != "" {
					newest += " (" + d.NewestType + ")"
				}
			}
			skipped := "-"
			if len(d.Skipped) > 0 {
				skipped = strconv.Itoa(len(d.Skipped))
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.Database, last, lag, records, behind, age, rpo, newest, skipped, d.State)
		}
		tw.Flush()
	}
	verdict := "caught up"
	if !r.CaughtUp {
		verdict = "NOT caught up"
	}
	boot := ""
	if r.Total.Bootstrapping > 0 {
		boot = fmt.Sprintf(", %d bootstrapping", r.Total.Bootstrapping)
	}
	fmt.Fprintf(w, "\ntotal: %d databases, lag %d events, %d lagging, %d halted, %d over RPO, %d skipped events%s: %s\n",
		r.Total.Databases, r.Total.LagEvents, r.Total.Lagging, r.Total.Halted, r.Total.RPOBreached, r.Total.Skipped, boot, verdict)
	section := func(title string, lines []string) {
		if len(lines) == 0 {
			return
		}
		fmt.Fprintf(w, "\n%s:\n", title)
		for _, l := range lines {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
	var halted, skipped, boots []string
	for _, d := range r.Databases {
		if d.Bootstrap != nil {
			boots = append(boots, bootstrap.DatabaseLine(*d.Bootstrap), "  since it started: "+bootstrap.RatesLine(d.Bootstrap.Rates))
		}
		if d.Halted != "" {
			halted = append(halted, d.Database+": "+d.Halted)
		}
		for _, s := range d.Skipped {
			skipped = append(skipped, fmt.Sprintf("%s: event %d: %s", d.Database, s.EventID, s.Note))
		}
	}
	section("bootstrapping", boots)
	section("halted (see the applier's log; `hivedr apply -skip-event db:id` skips an event)", halted)
	section("skipped events", skipped)
	section("errors", r.Errors)
}

// tailerLine is the text after "tailer (source X): ".
func (r *Report) tailerLine() string {
	t := r.Tailer
	var line string
	written := ago(r.Time, t.CheckpointWritten)
	switch t.State {
	case TailerUnknown:
		line = "checkpoint unknown (see errors)"
	case TailerNoCheckpoint:
		line = "no checkpoint yet (has `hivedr tail` run?)"
	case TailerChainBroken:
		line = fmt.Sprintf("CHAIN_BROKEN: stopped after event %d (checkpoint written %s) on a gap in the source log: "+
			"events after %d were purged before they were published; repair with %s, then restart hivedr tail",
			t.CheckpointEventID, written, t.CheckpointEventID, bootstrap.RepairCommand)
	case TailerDown:
		line = fmt.Sprintf("DOWN: checkpoint event %d, written %s (none for over %s: is `hivedr tail` running?)",
			t.CheckpointEventID, written, short(time.Duration(t.DownAfter*float64(time.Second))))
	default:
		line = fmt.Sprintf("checkpoint event %d, written %s", t.CheckpointEventID, written)
	}
	if t.SourceHeadEventID > 0 {
		line += fmt.Sprintf("; source head %d", t.SourceHeadEventID)
		switch {
		case t.CaughtUp:
			line += ": caught up"
		case t.State == TailerBehind:
			line += fmt.Sprintf(": BEHIND, %d events not published yet", t.LagEvents)
		case t.LagEvents > 0:
			line += fmt.Sprintf(": %d events not published", t.LagEvents)
		}
	}
	return line
}

// ago is how long before now t was, in whole seconds.
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return short(now.Sub(t)) + " ago"
}

// short writes a duration in whole seconds without zero units: 5m, 1h30m,
// 1m15s, 0s.
func short(d time.Duration) string {
	s := max(0, d).Round(time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
