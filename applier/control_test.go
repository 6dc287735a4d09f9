package applier

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	hms "github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/schemas"
)

// control publishes an operator's request, as `hivedr replay` does.
func (f *kfix) control(c schemas.ApplierControl) {
	f.t.Helper()
	if err := kafka.EnsureApplierControlTopic(context.Background(), f.adm, f.topics, 1, false); err != nil {
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

// markFailedOver marks DR database db failed over with the fence token,
// as `hivedr failover` does (one whole-object write).
func (f *kfix) markFailedOver(db, token string) {
	f.t.Helper()
	d := f.ms.db(db)
	d.Parameters[drparam.FailedOverAt] = "2026-12-06T01:00:00Z"
	d.Parameters[drparam.FailoverMode] = "unplanned"
	d.Parameters[drparam.FailoverFence] = token
	delete(d.Parameters, drparam.Target)
	if err := f.ms.AlterDatabase(context.Background(), db, d); err != nil {
		f.t.Fatal(err)
	}
}

// TestControlFenceConfirms: a fence request for a failed-over database is
// confirmed on it (its token in hivedr.failover.fenced) by the applier
// that owns its topic, a fence naming another token is not, and after
// the fence the applier writes nothing more into the database: the next
// event halts failed_over, unapplied, and the mark stays.
func TestControlFenceConfirms(t *testing.T) {
	f := newKFix(t, "a")
	ta := srcTable("a", "t", nil, "x int")
	f.publish(createDB(1, "a"), createTable(2, ta), alterTable(3, ta, withParam(ta, "k", "v3")))
	r := f.start("g", t.TempDir(), nil)
	f.waitMark("a", 3)
	waitControlReader(t, r)
	f.markFailedOver("a", "tok-1")

	f.control(schemas.ApplierControl{Kind: schemas.ControlFence, Database: "a", Fence: "tok-other"})
	f.control(schemas.ApplierControl{Kind: schemas.ControlFence, Database: "a", Fence: "tok-1"})
	waitFor(t, "the fence confirmed", func() (bool, string) {
		got := f.ms.db("a").Parameters[drparam.FailoverFenced]
		return got == "tok-1", fmt.Sprintf("%s=%q", drparam.FailoverFenced, got)
	})

	f.publish(alterTable(4, ta, withParam(ta, "k", "v4")))
	// (The halt is not recorded on the database: it is no longer this
	// pipeline's replica, and nothing of the applier's is written there.)
	waitFor(t, "a halted failed_over", func() (bool, string) {
		v, _ := r.metric(t, "hivedr_applier_halted", map[string]string{"db": "a", "reason": string(ReasonFailedOver)})
		return v == 1, fmt.Sprintf("metric %v", v)
	})
	d := f.ms.db("a")
	if d.Parameters[drparam.FailedOverAt] == "" || d.Parameters[drparam.FailoverFence] != "tok-1" {
		t.Errorf("the failover mark is gone after the fence: %v", d.Parameters)
	}
	if got := f.ms.table("a", "t").Parameters["k"]; got != "v3" {
		t.Errorf("a.t k=%q after the fence, want v3 (event 4 must not be applied into a failed-over database)", got)
	}
	if got := stamp(d.Parameters); got != 3 {
		t.Errorf("repl.last.id %d after the fence, want 3", got)
	}
}

// TestExecutorRefusesStaleDatabaseWrite: a plan whose copy of its
// database predates a failover mark cannot write that copy back: the
// database is read again in the same step and the write refused
// (FencedError), so the mark stays.
func TestExecutorRefusesStaleDatabaseWrite(t *testing.T) {
	ms := newFakeHMS()
	ctx := context.Background()
	if err := ms.CreateDatabase(ctx, &hms.Database{Name: "a", Parameters: map[string]string{drparam.Target: drparam.TargetMark("src")}}); err != nil {
		t.Fatal(err)
	}
	stale := ms.db("a")
	marked := ms.db("a")
	marked.Parameters[drparam.FailedOverAt] = "2026-12-06T01:00:00Z"
	delete(marked.Parameters, drparam.Target)
	if err := ms.AlterDatabase(ctx, "a", marked); err != nil {
		t.Fatal(err)
	}
	x := &executor{ms: ms}
	stale.Parameters[drparam.LastID] = "9"
	for _, a := range []Action{AlterDatabase{Name: "a", DB: stale}, DropDatabase{Name: "a"}} {
		err := x.run(ctx, a)
		var fenced *FencedError
		if !errors.As(err, &fenced) {
			t.Errorf("%s over a failed-over database: err %v, want a FencedError", a, err)
		}
	}
	if got := ms.db("a"); got == nil || got.Parameters[drparam.FailedOverAt] == "" {
		t.Errorf("the failover mark was undone: %v", got)
	}
}
