package bootstrap

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Meter is one figure of the progress: done of total, with a rate and an
// estimate of the time left.
type Meter struct {
	Name  string
	Done  int64
	Total int64
	// Estimated: the total is not final (the tailer is still listing);
	// it is extrapolated from the tables published so far.
	Estimated bool
	// Rate is per second over the renderer's window; 0 when unknown.
	Rate float64
	// ETA is the time left at Rate; negative when unknown.
	ETA   time.Duration
	Bytes bool
}

// Meters are the four figures of a set of bootstraps (Totals): tables and
// partitions applied on DR, files and bytes copied by copyd, each of what
// the tailer published.
func Meters(s Database) []Meter {
	partTotal, partEst := s.PartitionsPublished, false
	filesTotal, bytesTotal := s.FilesPublished, s.BytesPublished
	if !s.FinalTotals() {
		partEst = true
		if s.TablesPublished > 0 && s.TablesTotal > s.TablesPublished {
			scale := func(n int64) int64 { return n * s.TablesTotal / s.TablesPublished }
			partTotal, filesTotal, bytesTotal = scale(partTotal), scale(filesTotal), scale(bytesTotal)
		}
	}
	return []Meter{
		{Name: "tables", Done: s.Applied.Tables, Total: s.TablesTotal, ETA: -1},
		{Name: "partitions", Done: s.Applied.Partitions, Total: partTotal, Estimated: partEst, ETA: -1},
		{Name: "files", Done: s.FilesCopied, Total: filesTotal, Estimated: partEst, ETA: -1},
		{Name: "bytes", Done: s.BytesCopied, Total: bytesTotal, Estimated: partEst, Bytes: true, ETA: -1},
	}
}

// rateWindow is how far back the renderer's rates look.
const rateWindow = 30 * time.Second

// Renderer draws the progress, as bars redrawn in place on a terminal or
// as one line of figures otherwise. Its clock is the caller's, so tests
// give it a fake one.
type Renderer struct {
	now     func() time.Time
	samples []sample
	lines   int // lines of the last frame drawn on the terminal
}

type sample struct {
	at   time.Time
	done []int64
}

// NewRenderer returns a renderer reading the time from now.
func NewRenderer(now func() time.Time) *Renderer { return &Renderer{now: now} }

// Measure returns the meters of s with their rates and ETAs, from the
// figures Measure was given over the last rateWindow.
func (r *Renderer) Measure(s Database) []Meter {
	ms := Meters(s)
	now := r.now()
	cur := sample{at: now, done: make([]int64, len(ms))}
	for i, m := range ms {
		cur.done[i] = m.Done
	}
	r.samples = append(r.samples, cur)
	for len(r.samples) > 2 && now.Sub(r.samples[1].at) >= rateWindow {
		r.samples = r.samples[1:]
	}
	first := r.samples[0]
	dt := now.Sub(first.at).Seconds()
	for i := range ms {
		m := &ms[i]
		if dt > 0 && len(first.done) == len(ms) {
			m.Rate = max(0, float64(m.Done-first.done[i])/dt)
		}
		m.estimate()
	}
	return ms
}

// estimate sets the meter's ETA from its rate: 0 when done, unknown
// (negative) without a rate.
func (m *Meter) estimate() {
	switch {
	case m.Total > 0 && m.Done >= m.Total && !m.Estimated:
		m.ETA = 0
	case m.Rate > 0 && m.Total > m.Done:
		m.ETA = time.Duration(float64(m.Total-m.Done) / m.Rate * float64(time.Second)).Round(time.Second)
	}
}

// Average returns the meters of s with their rates averaged since the
// bootstrap started and the ETAs at those rates: what one look at the
// pipeline can say (`hivedr status`), where the command's Renderer
// measures over its last 30 s. A start in the future or unknown (zero)
// gives no rate.
func Average(s Database, started, now time.Time) []Meter {
	ms := Meters(s)
	el := now.Sub(started).Seconds()
	for i := range ms {
		m := &ms[i]
		if !started.IsZero() && el > 0 {
			m.Rate = float64(m.Done) / el
		}
		m.estimate()
	}
	return ms
}

// MetersLine is meters as one line of figures: "tables=1/3 0.5/s eta 4s
// partitions=...".
func MetersLine(ms []Meter) string {
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = m.Name + "=" + figures(m)
	}
	return strings.Join(parts, " ")
}

// Rate is a meter as `hivedr status -json` gives it.
type Rate struct {
	Name      string  `json:"name"`
	Done      int64   `json:"done"`
	Total     int64   `json:"total"`
	Estimated bool    `json:"estimated,omitempty"`
	PerSecond float64 `json:"per_second"`
	// ETASeconds is the time left at PerSecond; absent when unknown.
	ETASeconds *float64 `json:"eta_seconds,omitempty"`
	// Bytes: the figures count bytes.
	Bytes bool `json:"bytes,omitempty"`
}

// Rates turns meters into Rates.
func Rates(ms []Meter) []Rate {
	out := make([]Rate, len(ms))
	for i, m := range ms {
		out[i] = Rate{Name: m.Name, Done: m.Done, Total: m.Total, Estimated: m.Estimated, PerSecond: m.Rate, Bytes: m.Bytes}
		if m.ETA >= 0 {
			s := m.ETA.Seconds()
			out[i].ETASeconds = &s
		}
	}
	return out
}

// RatesLine is Rates as one line of figures (MetersLine).
func RatesLine(rs []Rate) string {
	ms := make([]Meter, len(rs))
	for i, r := range rs {
		ms[i] = Meter{Name: r.Name, Done: r.Done, Total: r.Total, Estimated: r.Estimated, Rate: r.PerSecond, ETA: -1, Bytes: r.Bytes}
		if r.ETASeconds != nil {
			ms[i].ETA = time.Duration(*r.ETASeconds * float64(time.Second))
		}
	}
	return MetersLine(ms)
}

// barWidth is the width of a bar's inside.
const barWidth = 30

// Frame draws one terminal frame over the previous one: a header, a bar
// per meter and a line per database.
func (r *Renderer) Frame(w io.Writer, header string, s Database, dbs []Database) error {
	var b strings.Builder
	if r.lines > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", r.lines) // back to the first line drawn
	}
	lines := 0
	line := func(format string, args ...any) {
		b.WriteString("\x1b[2K")
		fmt.Fprintf(&b, format, args...)
		b.WriteByte('\n')
		lines++
	}
	line("%s", header)
	for _, m := range r.Measure(s) {
		line("%-10s %s %s", m.Name, bar(m), figures(m))
	}
	for _, d := range dbs {
		line("  %s", DatabaseLine(d))
	}
	b.WriteString("\x1b[J") // what a longer frame before left below
	r.lines = lines
	_, err := io.WriteString(w, b.String())
	return err
}

// Line is the progress as one line of figures, for a log.
func (r *Renderer) Line(s Database) string { return MetersLine(r.Measure(s)) }

// bar draws a meter's bar: [#####.....] with a percentage.
func bar(m Meter) string {
	frac := 0.0
	if m.Total > 0 {
		frac = min(1, float64(m.Done)/float64(m.Total))
	}
	n := int(frac * barWidth)
	return fmt.Sprintf("[%s%s] %3.0f%%", strings.Repeat("#", n), strings.Repeat(".", barWidth-n), 100*frac)
}

// figures is "done/total rate ETA" of a meter: "800/~5000 120/s eta 35s".
func figures(m Meter) string {
	num := func(n int64) string {
		if m.Bytes {
			return Bytes(n)
		}
		return fmt.Sprint(n)
	}
	total := num(m.Total)
	if m.Estimated {
		total = "~" + total
	}
	s := num(m.Done) + "/" + total
	if m.Rate > 0 {
		if m.Bytes {
			s += " " + Bytes(int64(m.Rate)) + "/s"
		} else {
			s += fmt.Sprintf(" %.1f/s", m.Rate)
		}
	}
	switch {
	case m.ETA == 0:
		s += " done"
	case m.ETA > 0:
		s += " eta " + m.ETA.String()
	}
	return s
}

// DatabaseLine is one database's bootstrap in a line: "finance
// finance-40-1764765000000 SNAPSHOT tables 3/50 partitions 800 files
// 700/5200 applied 15%".
func DatabaseLine(d Database) string {
	state := d.Phase
	switch {
	case d.Halted != "":
		state = "HALTED"
	case d.Done && d.SupersededBy != "":
		state = "done (superseded by " + d.SupersededBy + ")"
	case d.Done:
		state = "done"
	case d.Phase == PhasePublished:
		state = "APPLYING"
	}
	if d.Adopted {
		state += " (an earlier request's)"
	}
	plus := ""
	if !d.FinalTotals() {
		plus = "+"
	}
	return fmt.Sprintf("%s %s %s: tables %d/%d, partitions %d/%d%s, files copied %d/%d%s (%s of %s%s), applied %.0f%%",
		d.Database, d.BootstrapID, state, d.Applied.Tables, d.TablesTotal, d.Applied.Partitions, d.PartitionsPublished, plus,
		d.FilesCopied, d.FilesPublished, plus, Bytes(d.BytesCopied), Bytes(d.BytesPublished), plus, d.AppliedPercent())
}

// Bytes formats n bytes in binary units: "1.5 MiB".
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
