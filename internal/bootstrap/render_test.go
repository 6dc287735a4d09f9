package bootstrap

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/schemas"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func TestMeasureRatesAndETA(t *testing.T) {
	clk := &fakeClock{t: time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)}
	r := NewRenderer(clk.now)
	s := Database{Phase: schemas.PhaseCatchup, TablesTotal: 10, TablesPublished: 10, PartitionsPublished: 1000,
		FilesPublished: 2000, BytesPublished: 20 << 20}
	ms := r.Measure(s)
	for _, m := range ms {
		if m.Rate != 0 || m.ETA >= 0 || m.Estimated {
			t.Errorf("first sample: %+v, want no rate, no ETA, final totals", m)
		}
	}
	// 10 s later: 2 tables, 100 partitions, 400 files, 4 MiB.
	clk.t = clk.t.Add(10 * time.Second)
	s.Applied = drparam.Progress{Tables: 2, Partitions: 100}
	s.FilesCopied, s.BytesCopied = 400, 4<<20
	ms = r.Measure(s)
	want := []struct {
		rate float64
		eta  time.Duration
	}{{0.2, 40 * time.Second}, {10, 90 * time.Second}, {40, 40 * time.Second}, {float64(4<<20) / 10, 40 * time.Second}}
	for i, m := range ms {
		if m.Rate != want[i].rate || m.ETA != want[i].eta {
			t.Errorf("%s: rate %v eta %v, want %v %v", m.Name, m.Rate, m.ETA, want[i].rate, want[i].eta)
		}
	}
	// The window slides: a minute on, with nothing more done, the rate
	// is what the last 30 s saw.
	clk.t = clk.t.Add(40 * time.Second)
	r.Measure(s)
	clk.t = clk.t.Add(30 * time.Second)
	if ms = r.Measure(s); ms[1].Rate != 0 || ms[1].ETA >= 0 {
		t.Errorf("stalled: %+v, want no rate and no ETA", ms[1])
	}
	s.Applied, s.FilesCopied, s.BytesCopied, s.Done = drparam.Progress{Tables: 10, Partitions: 1000}, 2000, 20<<20, true
	for _, m := range r.Measure(s) {
		if m.ETA != 0 || !strings.Contains(figures(m), "done") {
			t.Errorf("finished: %+v %q", m, figures(m))
		}
	}
}

func TestMetersEstimateWhileListing(t *testing.T) {
	s := Database{Phase: schemas.PhaseSnapshot, TablesTotal: 50, TablesPublished: 10, PartitionsPublished: 200, FilesPublished: 400, BytesPublished: 4000}
	ms := Meters(s)
	if ms[0].Total != 50 || ms[0].Estimated || ms[1].Total != 1000 || !ms[1].Estimated || ms[2].Total != 2000 || ms[3].Total != 20000 {
		t.Errorf("meters %+v", ms)
	}
	if f := figures(ms[1]); f != "0/~1000" {
		t.Errorf("figures %q", f)
	}
}

func TestFrameRedraws(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1764765000, 0)}
	r := NewRenderer(clk.now)
	dbs := []Database{{Database: "finance", BootstrapID: bid, Phase: schemas.PhaseSnapshot, TablesTotal: 4, TablesPublished: 2,
		PartitionsPublished: 10, FilesPublished: 10, BytesPublished: 3 << 20, RecordsPublished: 13,
		Applied: drparam.Progress{Seq: 13, Tables: 1, Partitions: 5}, FilesCopied: 6, BytesCopied: 1 << 20}}
	var b bytes.Buffer
	if err := r.Frame(&b, "bootstrap r1", Totals(dbs), dbs); err != nil {
		t.Fatal(err)
	}
	first := b.String()
	for _, want := range []string{"bootstrap r1\n", "tables", "[#######", " 25%", "1/4", "partitions", "5/~20", "files", "6/~20",
		"1.0 MiB/~6.0 MiB", "finance " + bid + " SNAPSHOT: tables 1/4, partitions 5/10+, files copied 6/10+ (1.0 MiB of 3.0 MiB+), applied 100%"} {
		if !strings.Contains(first, want) {
			t.Errorf("frame lacks %q:\n%s", want, first)
		}
	}
	if strings.Contains(first, "\x1b[") && strings.Index(first, "\x1b[2K") != 0 {
		t.Errorf("first frame moves the cursor up: %q", first)
	}
	b.Reset()
	clk.t = clk.t.Add(time.Second)
	if err := r.Frame(&b, "bootstrap r1", Totals(dbs), dbs); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), "\x1b[6A") {
		t.Errorf("second frame does not go back 6 lines: %q", b.String()[:10])
	}
	if l := r.Line(Totals(dbs)); !strings.Contains(l, "tables=1/4") || !strings.Contains(l, "partitions=5/~20") || !strings.Contains(l, "bytes=1.0 MiB/~6.0 MiB") {
		t.Errorf("line %q", l)
	}
}

func TestBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 5 << 30: "5.0 GiB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}
