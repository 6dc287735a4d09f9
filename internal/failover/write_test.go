package failover

import (
	"strings"
	"testing"
)

func TestReportText(t *testing.T) {
	r := &Report{Mode: Unplanned, SourceHead: -1, TailerEventID: 130, Cut: 120, Databases: []Database{
		{Database: "a", Reached: 130, LostEvents: -1, RPOSeconds: 42, Redo: []TableRedo{{Table: "orders", Events: 2, First: 121, Last: 125}}},
		{Database: "b", Reached: 120, LostEvents: 0},
	}}
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"consistent cut: event 120", "source not read", "RPO unknown", "orders", "2 event(s), 121..125",
		"an ETL restarted from event 120 redoes nothing here"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
}

func TestDryRunText(t *testing.T) {
	r := &Report{Mode: Planned, DryRun: true, SourceHead: 140, TailerEventID: 138, Databases: []Database{
		{Database: "a", LastID: 130, CaughtUp: true}, {Database: "b", LastID: 120}},
		Skipped: []Skipped{{Database: "hivedr_drill_x", Why: WhyDrill}, {Database: "gone", Why: WhyDropped}}}
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"dry run of a planned failover: 2 database(s) can be failed over; nothing changed",
		"source log head 140, tailer checkpoint 138", "a: this pipeline's replica at event 130, its topic applied to the end",
		"b: this pipeline's replica at event 120, events still to apply", "left out hivedr_drill_x: a drill's scratch database",
		"left out gone: not on DR"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
}
