package applier

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	hms "github.com/beltran/gohive/hive_metastore"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/schemas"
)

func prevID(ev *schemas.Event, prev int64) *schemas.Event {
	ev.PreviousEventID = &prev
	return ev
}

// TestPlanChain: an event whose topic lost the records before it (its
// previous_event_id is past the DR database's repl.last.id) halts the
// database, unless an operator skipped the last lost event.
func TestPlanChain(t *testing.T) {
	addP1 := func(id, prev int64) *schemas.Event {
		return prevID(addParts(id, srcOrders, []schemas.Partition{srcP1}, partFile(srcP1, "a")), prev)
	}
	withOrders := func(last int64) Replica { return drState(drDB("sales", last), drTable(srcOrders, 10)) }
	accepted := func(last int64, key string) Replica {
		r := withOrders(last)
		r.Databases["sales"].Parameters[key] = "requested by ops@host at 2026-12-03T10:00:00Z"
		return r
	}
	for _, c := range []struct {
		name      string
		ev        *schemas.Event
		state     Replica
		skip      bool
		acceptGap bool
		outcome   Outcome
		reason    Reason
		detail    []string // substrings of Detail
		note      string   // wanted in the watermark's drparam.SkipKey(prev) parameter
	}{
		{name: "previous event applied", ev: addP1(50, 40), state: withOrders(40), outcome: Apply},
		{name: "position moved past the previous event (cross-database handshake)", ev: addP1(50, 30), state: withOrders(49), outcome: Apply},
		{name: "first event of the topic", ev: addP1(50, 0), state: withOrders(40), outcome: Apply},
		{name: "record older than the chain", ev: addParts(50, srcOrders, []schemas.Partition{srcP1}, partFile(srcP1, "a")), state: withOrders(40), outcome: Apply},
		{name: "records lost before the event", ev: addP1(50, 45), state: withOrders(40), outcome: Halt, reason: ReasonChainBroken,
			detail: []string{"CHAIN_BROKEN", "event 50 (ADD_PARTITION)", "before it is 45", "at event 40", "events 41..45", "--skip-event sales:45", "hivedr bootstrap -db sales"}},
		{name: "a lost-records event already applied is a no-op on re-drive", ev: addP1(50, 45), state: withOrders(60),
			outcome: NoOp, reason: ReasonAlreadyApplied},
		{name: "the operator accepted the loss", ev: addP1(50, 45), state: accepted(40, drparam.SkipKey(45)), acceptGap: true, outcome: Apply,
			note: "accepted the loss of events 41..45 (CHAIN_BROKEN at event 50)"},
		{name: "the operator skipped the event itself", ev: addP1(50, 45), state: withOrders(40), skip: true,
			outcome: NoOp, reason: ReasonSkippedByOperator},
		{name: "no DR database: a create starts afresh", ev: prevID(createDB(60, "sales"), 55), state: drState(), outcome: Apply},
		{name: "no DR database: anything else halts as before", ev: addP1(60, 55), state: drState(), outcome: Halt, reason: ReasonDatabaseMissing},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := planChecked(t, Input{DB: "sales", Source: "src", Event: c.ev, Replica: c.state, Copies: copied(c.ev),
				Skip: c.skip, AcceptGap: c.acceptGap, Policy: testPolicy{}})
			if d.Outcome != c.outcome || (c.reason != "" && d.Reason != c.reason) {
				t.Fatalf("decision %s %s (%s), want %s %s", d.Outcome, d.Reason, d.Detail, c.outcome, c.reason)
			}
			for _, s := range c.detail {
				if !strings.Contains(d.Detail, s) {
					t.Errorf("detail %q does not say %q", d.Detail, s)
				}
			}
			if c.note == "" {
				return
			}
			w, ok := d.Actions[len(d.Actions)-1].(AlterDatabase)
			if !ok {
				t.Fatalf("last action %s, want the watermark", d.Actions[len(d.Actions)-1])
			}
			if got := w.DB.Parameters[drparam.SkipKey(*c.ev.PreviousEventID)]; !strings.Contains(got, c.note) || !strings.HasPrefix(got, "requested by") {
				t.Errorf("skip record %q, want the request followed by %q", got, c.note)
			}
		})
	}
}

func TestPlanHeartbeat(t *testing.T) {
	hb := func(prev int64) *schemas.Heartbeat {
		return &schemas.Heartbeat{Database: "sales", ScannedEventID: 90, PreviousEventID: &prev}
	}
	userDB := &hms.Database{Name: "sales", Parameters: map[string]string{drparam.LastID: "1"}}
	accepted := drDB("sales", 40)
	accepted.Parameters[drparam.SkipKey(45)] = "requested by ops@host"
	accepted.Parameters[drparam.Halted] = "event 0 -: chain_broken: ..."
	for _, c := range []struct {
		name    string
		hb      *schemas.Heartbeat
		db      *hms.Database
		accept  bool
		outcome Outcome
		reason  Reason
	}{
		{name: "chain holds", hb: hb(40), db: drDB("sales", 40), outcome: NoOp},
		{name: "position past the previous event", hb: hb(30), db: drDB("sales", 40), outcome: NoOp},
		{name: "older heartbeat without the chain", hb: &schemas.Heartbeat{Database: "sales"}, db: drDB("sales", 40), outcome: NoOp},
		{name: "no DR database", hb: hb(45), db: nil, outcome: NoOp},
		{name: "not a replica: events decide", hb: hb(45), db: userDB, outcome: NoOp},
		{name: "records lost on a quiet topic", hb: hb(45), db: drDB("sales", 40), outcome: Halt, reason: ReasonChainBroken},
		{name: "the operator accepted the loss", hb: hb(45), db: accepted, accept: true, outcome: Apply, reason: ReasonGapAccepted},
	} {
		t.Run(c.name, func(t *testing.T) {
			var before string
			if c.db != nil {
				before = js(c.db)
			}
			d := PlanHeartbeat(HeartbeatInput{DB: "sales", Source: "src", Heartbeat: c.hb, Replica: c.db, AcceptGap: c.accept})
			if c.db != nil && js(c.db) != before {
				t.Error("PlanHeartbeat changed its input")
			}
			if d.Outcome != c.outcome || (c.reason != "" && d.Reason != c.reason) {
				t.Fatalf("decision %s %s (%s), want %s %s", d.Outcome, d.Reason, d.Detail, c.outcome, c.reason)
			}
			switch d.Outcome {
			case Halt:
				if !strings.Contains(d.Detail, "a heartbeat") || !strings.Contains(d.Detail, "--skip-event sales:45") {
					t.Errorf("detail %q", d.Detail)
				}
			case Apply:
				w, ok := d.Actions[0].(AlterDatabase)
				if len(d.Actions) != 1 || !ok || w.Name != "sales" {
					t.Fatalf("actions %v, want only the watermark", actionNames(d.Actions))
				}
				p := w.DB.Parameters
				if p[drparam.LastID] != "45" || p[drparam.Halted] != "" || !strings.Contains(p[drparam.SkipKey(45)], "accepted the loss of events 41..45") {
					t.Errorf("watermark parameters %v", p)
				}
			default:
				if len(d.Actions) > 0 {
					t.Errorf("a no-op runs %v", actionNames(d.Actions))
				}
			}
		})
	}
	if !slices.Contains([]Reason{ReasonHeartbeat}, PlanHeartbeat(HeartbeatInput{DB: "sales", Source: "src", Heartbeat: hb(1)}).Reason) {
		t.Error("a no-op heartbeat has no reason")
	}
}

// chained sets each event's previous_event_id to the event before it on
// its database's topic, as the tailer does.
func chained(evs []*schemas.Event) []*schemas.Event {
	last := map[string]int64{}
	for _, ev := range evs {
		prevID(ev, last[ev.Database])
		last[ev.Database] = ev.EventID
	}
	return evs
}

// deleteUpTo deletes the records of db's topic below offset, as Kafka's
// retention deletes old segments.
func (f *kfix) deleteUpTo(db string, offset int64) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: f.topics.Events(db), Partition: 0, At: offset})
	res, err := f.adm.DeleteRecords(ctx, os)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		f.t.Fatalf("delete records of %s below %d: %v", db, offset, err)
	}
}

// TestApplierChainBroken: records deleted from a topic while the applier
// was stopped (its committed offset is out of range, so it starts over at
// the first surviving record) halt the database with CHAIN_BROKEN, on an
// event and on a quiet topic's heartbeat; an operator's --skip-event of
// the last lost event accepts the loss and the database goes on.
func TestApplierChainBroken(t *testing.T) {
	f := newKFix(t, "a", "b")
	ta := srcTable("a", "t", nil, "x int")
	tb := srcTable("b", "u", nil, "y int")
	evs := chained(at(createDB(1, "a"), createDB(2, "b"), createTable(3, ta), createTable(4, tb),
		alterTable(5, ta, withParam(ta, "k", "v5")), alterTable(6, tb, withParam(tb, "k", "v6")),
		alterTable(7, ta, withParam(ta, "k", "v7"))))
	f.publishAll(2, evs[:4])
	r1 := f.start("g", t.TempDir(), nil)
	f.waitMark("a", 3)
	f.waitMark("b", 4)
	r1.stop(t)

	// While the applier is down: a gets events 5 and 7, b gets event 6
	// and then only a heartbeat; retention then deletes everything but
	// the newest record of each topic.
	f.publish(evs[4], evs[6])
	f.publish(evs[5])
	f.publish(&schemas.Heartbeat{Database: "b", ScannedEventID: 7, PreviousEventID: id(6)})
	_, end := f.committed("g", "a", "b")
	f.deleteUpTo("a", end["a"]-2) // keeps event 7 and its transaction marker
	f.deleteUpTo("b", end["b"]-2) // keeps the heartbeat and its marker

	r2 := f.start("g", t.TempDir(), nil)
	f.waitHalted(r2, "a", ReasonChainBroken)
	f.waitHalted(r2, "b", ReasonChainBroken)
	for db, want := range map[string]string{"a": "event 7 (ALTER_TABLE) says the event published to the topic before it is 5",
		"b": "a heartbeat says the event published to the topic before it is 6"} {
		note := f.ms.db(db).Parameters[drparam.Halted]
		if !strings.Contains(note, want) || !strings.Contains(note, "CHAIN_BROKEN") {
			t.Errorf("%s: %s=%q, want it to say %q", db, drparam.Halted, note, want)
		}
	}
	if f.ms.mark("a") != 3 || f.ms.mark("b") != 4 {
		t.Fatalf("DR moved past the gap: a at %d, b at %d", f.ms.mark("a"), f.ms.mark("b"))
	}
	r2.stop(t)

	r3 := f.start("g", t.TempDir(), func(c *Config) {
		c.Skips = []Skip{{DB: "a", EventID: 5}, {DB: "b", EventID: 6}}
		c.Operator = "op@host"
	})
	f.waitMark("a", 7) // event 7 applied over the accepted gap
	f.waitMark("b", 6) // the heartbeat moved b past its accepted gap
	for db, want := range map[string]string{"a": "accepted the loss of events 4..5", "b": "accepted the loss of events 5..6"} {
		key := drparam.SkipKey(map[string]int64{"a": 5, "b": 6}[db])
		if note := f.ms.db(db).Parameters[key]; !strings.Contains(note, "requested by op@host") || !strings.Contains(note, want) {
			t.Errorf("%s: %s=%q, want the request and %q", db, key, note, want)
		}
	}
	if _, ok := r3.metric(t, "hivedr_applier_halted", map[string]string{"db": "a", "reason": string(ReasonChainBroken)}); ok {
		t.Error("a still reported halted")
	}
}

func id(v int64) *int64 { return &v }

// TestApplierReportsReplicaAge: the replica's age is now minus the source
// time up to which it is complete, carried forward by heartbeats, beside
// the database's RPO, so an alert is one comparison.
func TestApplierReportsReplicaAge(t *testing.T) {
	f := newKFix(t, "a")
	evs := chained(at(createDB(1, "a"))) // an hour old
	f.publishAll(1, evs)
	r := f.start("g", t.TempDir(), func(c *Config) {
		c.RPO = func(db string) time.Duration { return map[string]time.Duration{"a": 90 * time.Second}[db] }
	})
	age := func() float64 {
		v, _ := r.metric(t, "hivedr_replica_age_seconds", map[string]string{"db": "a"})
		return v
	}
	waitFor(t, "an hour-old replica", func() (bool, string) { return age() > 3500, fmt.Sprintf("age %v", age()) })
	if v, ok := r.metric(t, "hivedr_rpo_seconds", map[string]string{"db": "a"}); !ok || v != 90 {
		t.Errorf("hivedr_rpo_seconds{db=a} = %v (present %v), want 90", v, ok)
	}
	// The source has been quiet since: a heartbeat that read the log to
	// its head a moment ago makes the replica current, though its newest
	// event is an hour old.
	f.publish(&schemas.Heartbeat{Database: "a", ScannedEventID: 1, ScannedEventTime: evs[0].EventTime,
		SourceHeadEventID: 1, Sent: time.Now(), PreviousEventID: id(1)})
	waitFor(t, "a fresh replica after the heartbeat", func() (bool, string) { return age() < 60, fmt.Sprintf("age %v", age()) })
}

// TestCompletionOffsets: every partition of the completions topic starts
// at an exact offset when its start could be listed, so no partition
// waits for the others' first long poll.
func TestCompletionOffsets(t *testing.T) {
	got := completionOffsets([]int32{0, 1, 2, 3}, map[int32]int64{0: 7, 1: 2},
		func(p int32) (int64, bool) { return map[int32]int64{2: 40}[p], p == 2 })
	want := map[int32]kgo.Offset{0: kgo.NewOffset().At(7), 1: kgo.NewOffset().At(2), 2: kgo.NewOffset().At(40), 3: kgo.NewOffset().AtStart()}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("start offsets %v, want %v", got, want)
	}
}

// TestPlanFilesUnderAnySpelling: a partition's files are found under its
// directory whatever the spelling of either (the metastore's, the tailer
// listing's canonical form): a file that can no longer be copied belongs
// to its partition, so a later drop of that partition lets the event
// leave it out, instead of the file being taken for the table's and the
// database waiting on it.
func TestPlanFilesUnderAnySpelling(t *testing.T) {
	file := strings.Replace(partFile(srcP1, "a"), "hdfs://src:8020/", "hdfs://SRC:8020/", 1)
	ev := addParts(50, srcOrders, []schemas.Partition{srcP1}, file)
	gone := map[string]Copy{"50-0": {Status: schemas.StatusSourceGone, Error: "overwritten"}}
	d := planChecked(t, Input{DB: "sales", Source: "src", Event: ev, Copies: gone,
		Replica: drState(drDB("sales", 40), drTable(srcOrders, 10)), Policy: testPolicy{},
		Later: []*schemas.Event{dropParts(51, srcOrders, srcP1)}})
	if d.Outcome != NoOp || d.Reason != ReasonSuperseded {
		t.Fatalf("decision %s %s (%s), want the partition left out (superseded)", d.Outcome, d.Reason, d.Detail)
	}
}

func TestPlanHeartbeatFailedOver(t *testing.T) {
	prev := int64(40)
	db := drDB("sales", 40)
	db.Parameters[drparam.FailedOverAt] = "2026-12-03T13:00:00Z"
	delete(db.Parameters, drparam.Target)
	d := PlanHeartbeat(HeartbeatInput{DB: "sales", Source: "src", Heartbeat: &schemas.Heartbeat{Database: "sales", PreviousEventID: &prev}, Replica: db})
	if d.Outcome != Halt || d.Reason != ReasonFailedOver || !strings.Contains(d.Detail, "failed over") {
		t.Errorf("decision %s %s (%s), want a halt failed_over", d.Outcome, d.Reason, d.Detail)
	}
}

// TestApplierForgetsDroppedDatabaseAge: once a database's DROP_DATABASE
// is done, its replica_age series goes (a dropped database has no replica
// to age, and an age growing forever would breach its RPO and alert);
// the RPO series stays.
func TestApplierForgetsDroppedDatabaseAge(t *testing.T) {
	f := newKFix(t, "a")
	evs := chained(at(createDB(1, "a"))) // an hour old
	f.publishAll(1, evs)
	r := f.start("g", t.TempDir(), func(c *Config) {
		c.RPO = func(db string) time.Duration { return 90 * time.Second }
	})
	waitFor(t, "the replica's age reported", func() (bool, string) {
		v, ok := r.metric(t, "hivedr_replica_age_seconds", map[string]string{"db": "a"})
		return ok && v > 3500, fmt.Sprintf("age %v (present %v)", v, ok)
	})
	drop := dropDB(2, "a")
	drop.EventTime = evs[0].EventTime.Add(time.Second)
	drop.PreviousEventID = id(1)
	// A table's drop logged after its database's (two sessions at once)
	// leaves it dropped.
	late := dropTable(3, srcTable("a", "t", nil, "x int"))
	late.EventTime, late.PreviousEventID = drop.EventTime, id(2)
	f.publish(drop, late)
	waitFor(t, "the database dropped on DR and no replica age for it", func() (bool, string) {
		v, ok := r.metric(t, "hivedr_replica_age_seconds", map[string]string{"db": "a"})
		return f.ms.db("a") == nil && !ok, fmt.Sprintf("DR database %v, age %v (present %v)", f.ms.db("a") != nil, v, ok)
	})
	if _, ok := r.metric(t, "hivedr_rpo_seconds", map[string]string{"db": "a"}); !ok {
		t.Error("hivedr_rpo_seconds{db=a} is gone too")
	}
}
