package applier

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/schemas"
)

// control publishes an operator's request, as `hivedr replay` does.
func (f *kfix) control(c schemas.ApplierControl) {
	f.t.Helper()
	if err := kafka.EnsureApplierControlTopic(context.Background(), f.adm, f.topics, 1); err != nil {
		f.t.Fatal(err)
	}
	rec, err := kafka.ApplierControlRecord(f.topics, c)
	if err != nil {
		f.t.Fatal(err)
	}
	cl := f.client()
	if err := cl.ProduceSync(context.Background(), rec).FirstErr(); err != nil {
		f.t.Fatal(err)
	}
}

// waitControlReader waits until the applier reads the control topic (it
// reads from the end as of its start).
func waitControlReader(t *testing.T, r *running) {
	t.Helper()
	select {
	case <-r.a.controlReady:
	case <-time.After(10 * time.Second):
		t.Fatal("the applier did not start reading its control topic in 10s")
	}
}

// TestControlReplanTakesSkip: a worker halted on an event goes on once the
// skip is recorded on DR and a replan request reaches the running
// applier: no restart, the event skipped, the next applied.
func TestControlReplanTakesSkip(t *testing.T) {
	f := newKFix(t, "a")
	ta := srcTable("a", "t", nil, "x int")
	f.publishAll(4, at(
		createDB(1, "a"),
		createTable(2, ta),
		withErrors(alterTable(3, ta, withParam(ta, "k", "v3")), schemas.EventError{Kind: schemas.ErrUnknownEventType, Message: "what is this"}),
		alterTable(4, ta, withParam(ta, "k", "v4")),
	))
	r := f.start("g", t.TempDir(), nil)
	f.waitHalted(r, "a", ReasonUnknownEventType)
	waitControlReader(t, r)
	if err := RecordSkip(context.Background(), f.ms, "src", "op@host", Skip{DB: "a", EventID: 3}); err != nil {
		t.Fatal(err)
	}
	f.control(schemas.ApplierControl{Kind: schemas.ControlReplan, Database: "a", EventID: 3, By: "op@host"})
	f.waitMark("a", 4)
	params := f.ms.db("a").Parameters
	if note := params[drparam.SkippedPrefix+"3"]; !strings.Contains(note, "requested by op@host") || !strings.Contains(note, "skipped ALTER_TABLE event 3") {
		t.Errorf("%s3=%q does not say who skipped what", drparam.SkippedPrefix, note)
	}
	if h, ok := params[drparam.Halted]; ok {
		t.Errorf("%s=%q still set after the database went on", drparam.Halted, h)
	}
	if got := f.ms.table("a", "t").Parameters["k"]; got != "v4" {
		t.Errorf("a.t k=%q, want v4 (event 4 applied after the skipped 3)", got)
	}
}

// TestControlSeekRedrives: a seek request makes the running applier
// consume a topic again from an early offset: every event comes again
// (counted already_applied), the group's commit follows, and the DR state
// is what it was.
func TestControlSeekRedrives(t *testing.T) {
	f := newKFix(t, "a")
	ta := srcTable("a", "t", nil, "x int")
	recs := f.publish(createDB(1, "a"), createTable(2, ta), alterTable(3, ta, withParam(ta, "k", "v3")), alterTable(4, ta, withParam(ta, "k", "v4")))
	r := f.start("g", t.TempDir(), nil)
	f.waitMark("a", 4)
	before := f.ms.dump()
	waitControlReader(t, r)
	applied := func() float64 { return r.sum(t, "hivedr_applier_events_total", map[string]string{"db": "a"}) }
	n := applied()
	f.control(schemas.ApplierControl{Kind: schemas.ControlSeek, Database: "a", Offset: recs[1].Offset, EventID: 2})
	waitFor(t, "events 2 to 4 handled again", func() (bool, string) {
		return applied() >= n+3, fmt.Sprintf("%v handled, %v before the seek", applied(), n)
	})
	if got := r.sum(t, "hivedr_applier_events_total", map[string]string{"db": "a", "result": string(ReasonAlreadyApplied)}); got < 3 {
		t.Errorf("%v events already_applied after the seek, want 3", got)
	}
	if after := f.ms.dump(); after != before {
		t.Errorf("the re-drive changed the DR:\nbefore %s\nafter  %s", before, after)
	}
	waitFor(t, "the group's commit at the end again", func() (bool, string) {
		c, e := f.committed("g", "a")
		return c["a"] == e["a"], fmt.Sprintf("committed %v, end %v", c, e)
	})
}
