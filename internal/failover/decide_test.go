package failover

import (
	"strings"
	"testing"
	"time"

	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/schemas"
)

func TestCheck(t *testing.T) {
	ours := map[string]string{drparam.Target: "hivedr:src", drparam.LastID: "10"}
	for _, c := range []struct {
		name   string
		params map[string]string
		want   string // "" accepted
	}{
		{"a replica of ours", ours, ""},
		{"not on DR", nil, "not on the DR metastore"},
		{"a user's database", map[string]string{"owner": "x"}, "not a replica of this pipeline"},
		{"another pipeline's replica", map[string]string{drparam.Target: "hivedr:other"}, "not a replica of this pipeline"},
		{"failed over already", map[string]string{drparam.FailedOverAt: "2026-12-03T13:00:00Z", drparam.FailoverEventID: "10"}, "failed over already"},
		{"failed over though still marked", map[string]string{drparam.Target: "hivedr:src", drparam.FailedOverAt: "2026-12-03T13:00:00Z"}, "failed over already"},
		{"failed over, cut short before its figures", map[string]string{drparam.FailedOverAt: "2026-12-03T13:00:00Z", drparam.FailoverMode: "planned"}, "cut short before its figures were recorded"},
		{"bootstrap in progress", map[string]string{drparam.Target: "hivedr:src", drparam.BootstrapID: "b1"}, "bootstrap"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := Check("sales", "src", c.params)
			if (err == nil) != (c.want == "") || (err != nil && !strings.Contains(err.Error(), c.want)) {
				t.Fatalf("Check: %v, want %q", err, c.want)
			}
		})
	}
}

func TestCutAndRedo(t *testing.T) {
	dbs := []Database{{Database: "a", Reached: 120}, {Database: "b", Reached: 100}, {Database: "c", Reached: 130}}
	if got := Cut(dbs); got != 100 {
		t.Fatalf("Cut %d, want 100", got)
	}
	if got := Cut(nil); got != 0 {
		t.Fatalf("Cut of nothing %d", got)
	}
	redo := Redo(100, []Applied{{99, "orders"}, {100, "orders"}, {104, "orders"}, {101, "orders"}, {110, "customers"}, {111, ""}})
	want := []TableRedo{{"", 1, 111, 111}, {"customers", 1, 110, 110}, {"orders", 2, 101, 104}}
	if len(redo) != len(want) {
		t.Fatalf("Redo %+v, want %+v", redo, want)
	}
	for i := range want {
		if redo[i] != want[i] {
			t.Errorf("Redo[%d] %+v, want %+v", i, redo[i], want[i])
		}
	}
	if r := Redo(130, []Applied{{120, "x"}}); len(r) != 0 {
		t.Errorf("nothing after the cut, got %+v", r)
	}
}

func TestRPO(t *testing.T) {
	at := time.Date(2026, 12, 3, 13, 0, 0, 0, time.UTC)
	d := Database{ReachedTime: at.Add(-90 * time.Second)}
	for _, c := range []struct {
		name string
		d    Database
		lost int64
		want float64
	}{
		{"nothing lost", d, 0, 0},
		{"events lost", d, 3, 90},
		{"unknown loss", d, -1, 90},
		{"no source time", Database{}, 2, -1},
		{"clock ahead", Database{ReachedTime: at.Add(time.Minute)}, 1, 0},
	} {
		if got := RPO(c.d, c.lost, at); got != c.want {
			t.Errorf("%s: RPO %v, want %v", c.name, got, c.want)
		}
	}
}

func TestMarkAndRecord(t *testing.T) {
	at := time.Date(2026, 12, 3, 13, 0, 0, 0, time.UTC)
	before := map[string]string{drparam.Target: "hivedr:src", drparam.LastID: "120", drparam.Halted: "x", "owner": "etl"}
	d := Database{Database: "a", Reached: 130, ReachedTime: at.Add(-time.Minute), LostEvents: -1, RPOSeconds: 60, DRLogHead: 777}
	p := Mark(before, d, Unplanned, 100, []string{"a", "b"}, at)
	if before[drparam.FailedOverAt] != "" || before[drparam.Target] == "" {
		t.Fatal("Mark changed its input")
	}
	if _, ok := p[drparam.Target]; ok {
		t.Error("the replica marker is still there: the database is not writable")
	}
	if _, ok := p[drparam.Halted]; ok {
		t.Error("the halt note survived the failover")
	}
	for k, v := range map[string]string{drparam.FailoverTarget: "hivedr:src", drparam.FailoverMode: "unplanned", drparam.FailoverEventID: "130",
		drparam.FailoverCut: "100", drparam.FailoverSet: "a,b", drparam.FailoverRPOEvents: "unknown", drparam.FailoverRPOSeconds: "60.0",
		drparam.FailoverDRLogHead: "777", drparam.FailedOverAt: "2026-12-03T13:00:00Z", "owner": "etl", drparam.LastID: "120"} {
		if p[k] != v {
			t.Errorf("%s=%q, want %q", k, p[k], v)
		}
	}
	if err := Check("a", "src", p); err == nil || !strings.Contains(err.Error(), "failed over already") {
		t.Errorf("a second failover is not refused: %v", err)
	}
	r, ok, err := ReadRecord(p)
	if err != nil || !ok {
		t.Fatalf("ReadRecord: %v %v", ok, err)
	}
	if r.EventID != 130 || r.Cut != 100 || r.DRLogHead != 777 || r.WasTargetFor != "hivedr:src" || r.LostEvents != -1 || !r.At.Equal(at) || r.Mode != Unplanned {
		t.Errorf("ReadRecord %+v", r)
	}
	if _, ok, _ := ReadRecord(before); ok {
		t.Error("a database not failed over reads as failed over")
	}
}

func TestLeftOut(t *testing.T) {
	ours := map[string]string{drparam.Target: "hivedr:src"}
	for _, c := range []struct {
		name          string
		params        map[string]string
		caughtUp, all bool
		want          bool
	}{
		{"-all: dropped and applied", nil, true, true, true},
		{"-all: not on DR yet, events pending", nil, false, true, false},
		{"-all: on DR", ours, true, true, false},
		{"named: never left out", nil, true, false, false},
	} {
		if got := leaveOut(c.params, c.caughtUp, c.all); got != c.want {
			t.Errorf("%s: leaveOut %v, want %v", c.name, got, c.want)
		}
	}
	for db, want := range map[string]bool{"hivedr_drill_20261203t135107": true, "HIVEDR_DRILL_x": true, "hivedr_drills": false, "sales": false} {
		if IsDrill(db) != want {
			t.Errorf("IsDrill(%q) = %v", db, !want)
		}
	}
}

// TestFenceThenMark: the fence step's mark makes the database refused
// (FailedOverAt) and moves the replica marker; the figures written later
// (Mark) keep the marker where the fence put it and the fence's token.
func TestFenceThenMark(t *testing.T) {
	at := time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC)
	before := map[string]string{drparam.Target: "hivedr:src", drparam.LastID: "41", drparam.Halted: "event 9 X: y: z"}
	fenced := FenceMark(before, Unplanned, "tok", at)
	if before[drparam.FailedOverAt] != "" || before[drparam.Target] == "" {
		t.Fatalf("FenceMark changed its argument: %v", before)
	}
	for k, want := range map[string]string{drparam.FailedOverAt: "2026-12-06T01:00:00Z", drparam.FailoverMode: "unplanned",
		drparam.FailoverFence: "tok", drparam.FailoverTarget: "hivedr:src", drparam.LastID: "41"} {
		if fenced[k] != want {
			t.Errorf("after FenceMark %s=%q, want %q", k, fenced[k], want)
		}
	}
	for _, k := range []string{drparam.Target, drparam.Halted} {
		if _, ok := fenced[k]; ok {
			t.Errorf("after FenceMark %s is still there", k)
		}
	}
	if err := Check("sales", "src", fenced); err == nil || !strings.Contains(err.Error(), "failed over already") {
		t.Errorf("Check of a fenced database: %v, want failed over already", err)
	}
	fenced[drparam.FailoverFenced] = "tok"
	d := Database{Database: "sales", Reached: 41, LostEvents: 3, RPOSeconds: 12}
	marked := Mark(fenced, d, Unplanned, 40, []string{"sales"}, at)
	for k, want := range map[string]string{drparam.FailoverTarget: "hivedr:src", drparam.FailoverFence: "tok", drparam.FailoverFenced: "tok",
		drparam.FailoverEventID: "41", drparam.FailoverRPOEvents: "3", drparam.FailoverCut: "40"} {
		if marked[k] != want {
			t.Errorf("after Mark %s=%q, want %q", k, marked[k], want)
		}
	}
	r, ok, err := ReadRecord(marked)
	if err != nil || !ok || r.WasTargetFor != "hivedr:src" || r.EventID != 41 {
		t.Errorf("ReadRecord: %+v %v %v", r, ok, err)
	}
}

// TestHeldByBootstrap: a bootstrap the tailer's checkpoint has for a
// database, queued, publishing or catching up, holds its events back: a
// planned failover's wait is not over, behind names it, and an unplanned
// one does not take the checkpoint as what the database reached.
func TestHeldByBootstrap(t *testing.T) {
	cp := &schemas.TailerCheckpoint{LastEventID: 90, Bootstraps: []schemas.BootstrapState{
		{Database: "big", Phase: schemas.PhaseSnapshot, Seq: 12, CutEventID: 50},
		{Database: "C", Phase: schemas.PhaseSnapshot, CutEventID: 50},
		{Database: "d", Phase: schemas.PhaseCatchup, Seq: 40, CutEventID: 60},
	}}
	p := position{cp: cp, caught: map[string]bool{"big": true, "c": true, "d": true, "e": true}}
	for db, want := range map[string]string{"big": "publishing its snapshot", "c": "queued", "d": "catching up after its END", "e": ""} {
		b, ok := p.held(db)
		if got := ""; ok {
			got = phaseOf(b)
			if got != want {
				t.Errorf("%s: %s, want %s", db, got, want)
			}
		} else if want != "" {
			t.Errorf("%s: not held, want %s", db, want)
		}
	}
	if got := p.behind([]string{"c", "e"}, 90); len(got) != 1 || !strings.Contains(got[0], "database c (a bootstrap in the tailer, queued, cut at event 50") {
		t.Errorf("planned behind: %q", got)
	}
	if got := p.behind([]string{"c", "e"}, -1); len(got) != 0 {
		t.Errorf("unplanned behind: %q, want nothing (an unplanned failover counts the held events lost)", got)
	}
}
