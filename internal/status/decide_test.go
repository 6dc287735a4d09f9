package status

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/schemas"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// before is the time s seconds before now.
func before(s float64) time.Time { return now.Add(-time.Duration(s * float64(time.Second))) }

// event is an event record at offset off; it was published a second after
// its source time.
func event(off, id int64, at time.Time) topicRecord {
	return topicRecord{offset: off, eventID: id, time: at, published: at.Add(time.Second)}
}

// heartbeat is a heartbeat record at offset off completing the replica up
// to at.
func heartbeat(off int64, at time.Time) topicRecord {
	return topicRecord{offset: off, heartbeat: true, time: at, published: at}
}

// facts is everything Gather reads for one database, as the decision sees
// it.
type facts struct {
	cp         *schemas.TailerCheckpoint // nil: none
	head       int64                     // source head; 0: unknown
	noTopic    bool
	committed  int64 // the applier group's offset; -1: none
	end        int64 // the topic's last stable offset
	recs       []topicRecord
	params     map[string]string // the DR database's; nil: not on the DR
	drUnknown  bool              // the DR metastore did not answer
	rpo        time.Duration     // 0: not in scope
	required   bool              // named with -db
	downAfterS float64           // 0: 15
}

// healthy is a replicated database with a running tailer: event 119
// applied at offset 10, a heartbeat at 12 (the tailer had read the log to
// its head 2 s ago), all committed.
func healthy() facts {
	return facts{
		cp:   &schemas.TailerCheckpoint{Source: "primary", LastEventID: 120, Written: before(2), State: schemas.StateRunning},
		head: 120, committed: 14, end: 14,
		recs:   []topicRecord{event(10, 119, before(40)), heartbeat(12, before(2))},
		params: map[string]string{"repl.target.for": "hivedr:primary", "repl.last.id": "119"},
		rpo:    5 * time.Minute,
	}
}

// decide runs what Gather does after reading: the tally of the topic, the
// DR parameters, the summary.
func decide(f facts) *Report {
	rep := &Report{Time: now, required: map[string]bool{}, Tailer: Tailer{Source: "primary", DownAfter: 15, SourceHeadEventID: f.head}}
	if f.downAfterS > 0 {
		rep.Tailer.DownAfter = f.downAfterS
	}
	if f.cp != nil {
		rep.Tailer.fromCheckpoint(f.cp)
	}
	d := Database{Database: "finance", Topic: "hivedr.events.finance", TopicExists: !f.noTopic, InScope: f.rpo > 0, RPO: f.rpo.Seconds(),
		Committed: f.committed, End: f.end, UncommittedRecords: max(0, f.end-max(0, f.committed))}
	d.known.kafka, d.known.dr = true, !f.drUnknown
	if f.params != nil {
		d.fromParameters(f.params)
	}
	tl := tally{committed: f.committed, lastID: d.LastEventID}
	for _, r := range f.recs {
		tl.add(r)
	}
	d.fromTally(tl, false)
	rep.Databases = []Database{d}
	if f.required {
		rep.required[d.Database] = true
	}
	rep.summarize()
	return rep
}

// TestDecide: the tailer's and each database's state, the events lag and
// the replica's age, from what Gather reads.
func TestDecide(t *testing.T) {
	const none = -1.0 // no age
	tests := []struct {
		name     string
		f        func(*facts)
		tailer   State
		state    State
		lag      int64   // unapplied events
		age      float64 // seconds, or none
		caughtUp bool
	}{
		{name: "ok", tailer: TailerRunning, state: StateOK, age: 2, caughtUp: true},
		{
			// The heartbeat at 14 and its transaction marker are not
			// committed yet (the applier commits every second): not lag.
			name: "heartbeat-only lag is ok",
			f: func(f *facts) {
				f.end = 16
				f.recs = append(f.recs, heartbeat(14, before(0.4)))
			},
			tailer: TailerRunning, state: StateOK, age: 0.4, caughtUp: true,
		},
		{
			name: "applied but not committed yet is ok",
			f: func(f *facts) {
				f.head, f.cp.LastEventID, f.end, f.params["repl.last.id"] = 121, 121, 16, "121"
				f.recs = append(f.recs, event(14, 121, before(1)))
			},
			tailer: TailerRunning, state: StateOK, age: 1, caughtUp: true,
		},
		{
			name: "lagging",
			f: func(f *facts) {
				f.head, f.cp.LastEventID, f.end = 122, 122, 20
				f.recs = append(f.recs, event(14, 121, before(3)), event(16, 122, before(2)), heartbeat(18, before(1)))
			},
			tailer: TailerRunning, state: StateLagging, lag: 2, age: 2,
		},
		{
			name: "tailer down even though group lag is 0",
			f: func(f *facts) {
				f.head = 121 // a source change the dead tailer did not publish
				f.cp.Written = before(40)
				f.recs[1] = heartbeat(12, before(40))
			},
			tailer: TailerDown, state: StateTailerDown, age: 40,
		},
		{
			name:   "tailer down with nothing new at the source",
			f:      func(f *facts) { f.cp.Written, f.recs[1] = before(16), heartbeat(12, before(16)) },
			tailer: TailerDown, state: StateTailerDown, age: 16,
		},
		{
			name: "tailer down past the RPO",
			f: func(f *facts) {
				f.head, f.cp.Written, f.rpo = 121, before(40), 30*time.Second
				f.recs[1] = heartbeat(12, before(40))
			},
			tailer: TailerDown, state: StateRPOBreached, age: 40,
		},
		{
			name:   "a late checkpoint within the threshold is not down",
			f:      func(f *facts) { f.cp.Written = before(14) },
			tailer: TailerRunning, state: StateOK, age: 2, caughtUp: true,
		},
		{
			name:   "tailer behind",
			f:      func(f *facts) { f.head = 130 },
			tailer: TailerBehind, state: StateTailerBehind, age: 2,
		},
		{
			// Stuck on event 121 (published 400 s ago): heartbeats after
			// it do not count, the replica is as old as the one before.
			name: "rpo breached by a stuck applier",
			f: func(f *facts) {
				f.head, f.cp.LastEventID, f.end = 121, 121, 18
				f.recs = []topicRecord{event(10, 119, before(420)), heartbeat(12, before(410)), event(14, 121, before(401)), heartbeat(16, before(2))}
			},
			tailer: TailerRunning, state: StateRPOBreached, lag: 1, age: 410,
		},
		{
			// Nothing applied to go by: the unapplied event's age bounds
			// the replica's.
			name: "rpo breached with nothing applied ever",
			f: func(f *facts) {
				f.committed, f.end, f.params = -1, 2, nil
				f.recs = []topicRecord{event(0, 121, before(401))}
			},
			tailer: TailerRunning, state: StateRPOBreached, lag: 1, age: none,
		},
		{
			name: "chain broken",
			f: func(f *facts) {
				f.head, f.cp.State, f.cp.Written = 140, schemas.StateChainBroken, before(3600)
				f.recs = []topicRecord{event(10, 119, before(3700)), heartbeat(12, before(3600))}
			},
			tailer: TailerChainBroken, state: StateChainBroken, age: 3600,
		},
		{
			name: "chain broken wins over the applier's halt",
			f: func(f *facts) {
				f.cp.State = schemas.StateChainBroken
				f.params["hivedr.halted"] = "event 121: chain_broken"
			},
			tailer: TailerChainBroken, state: StateChainBroken, age: 2,
		},
		{
			name: "halted",
			f: func(f *facts) {
				f.head, f.cp.LastEventID, f.end = 121, 121, 16
				f.recs = append(f.recs, event(14, 121, before(1)))
				f.params["hivedr.halted"] = "event 121 ADD_PARTITION: copy_failed"
			},
			tailer: TailerRunning, state: StateHalted, lag: 1, age: 2,
		},
		{
			name:   "no topic",
			f:      func(f *facts) { f.noTopic, f.committed, f.end, f.recs, f.params = true, -1, 0, nil, nil },
			tailer: TailerRunning, state: StateNoTopic, age: none, caughtUp: true,
		},
		{
			name: "no topic, named with -db",
			f: func(f *facts) {
				f.noTopic, f.committed, f.end, f.recs, f.params, f.required = true, -1, 0, nil, nil, true
			},
			tailer: TailerRunning, state: StateNoTopic, age: none,
		},
		{
			name:   "not on DR",
			f:      func(f *facts) { f.params = nil },
			tailer: TailerRunning, state: StateNotOnDR, age: 2, caughtUp: true,
		},
		{
			// Dropped on the source, the drop applied: its last record is
			// old, but no replica is left to age past its RPO.
			name: "dropped, the drop applied",
			f: func(f *facts) {
				f.params, f.rpo, f.recs = nil, 30*time.Second, []topicRecord{event(10, 120, before(500)), heartbeat(12, before(400))}
			},
			tailer: TailerRunning, state: StateNotOnDR, age: 400, caughtUp: true,
		},
		{
			name:   "not a target",
			f:      func(f *facts) { delete(f.params, "repl.target.for") },
			tailer: TailerRunning, state: StateNotTarget, age: 2,
		},
		{
			name:   "DR metastore unknown",
			f:      func(f *facts) { f.drUnknown, f.params = true, nil },
			tailer: TailerRunning, state: StateUnknown, lag: -1, age: 2,
		},
		{
			// A database out of scope is not the tailer's: it is judged
			// by the applier alone (the verdict still fails on the tailer).
			name:   "out of scope, tailer down",
			f:      func(f *facts) { f.rpo, f.cp.Written = 0, before(40) },
			tailer: TailerDown, state: StateOK, age: 2,
		},
		{
			name:   "no checkpoint",
			f:      func(f *facts) { f.cp = nil },
			tailer: TailerNoCheckpoint, state: StateOK, age: 2,
		},
	}
	// Bootstraps: the tailer's side in the checkpoint, the applier's in
	// the DR parameters.
	boot := schemas.BootstrapState{Database: "finance", BootstrapID: "finance-119-1772366400000", RequestID: "r1",
		CutEventID: 119, Phase: schemas.PhaseSnapshot, TablesTotal: 4, TablesDone: 2, PartitionsDone: 30, Files: 40, Seq: 33}
	applying := func(f *facts) {
		f.params[drparam.BootstrapID] = boot.BootstrapID
		f.params[drparam.BootstrapApplied] = drparam.FormatProgress(drparam.Progress{Seq: 10, Tables: 1, Partitions: 8, Files: 9})
	}
	tests = append(tests, []struct {
		name     string
		f        func(*facts)
		tailer   State
		state    State
		lag      int64
		age      float64
		caughtUp bool
	}{
		{name: "bootstrapping: the tailer publishes it", f: func(f *facts) { f.cp.Bootstraps = []schemas.BootstrapState{boot} },
			tailer: TailerRunning, state: StateBootstrapping, age: 2, caughtUp: true},
		{name: "bootstrapping a database asked for is not caught up", f: func(f *facts) {
			f.cp.Bootstraps, f.required = []schemas.BootstrapState{boot}, true
		}, tailer: TailerRunning, state: StateBootstrapping, age: 2},
		{name: "bootstrapping: the applier applies it", f: applying,
			tailer: TailerRunning, state: StateBootstrapping, age: 2, caughtUp: true},
		{name: "bootstrapping over a halt it releases", f: func(f *facts) {
			f.cp.Bootstraps = []schemas.BootstrapState{boot}
			f.params[drparam.Halted] = drparam.FormatHalt(120, "ADD_PARTITION", "needs_bootstrap", "")
		}, tailer: TailerRunning, state: StateBootstrapping, age: 2, caughtUp: true},
		{name: "halted in its bootstrap", f: func(f *facts) {
			applying(f)
			f.params[drparam.Halted] = drparam.FormatHalt(119, "HIVEDR_SNAPSHOT_TABLE", "copy_failed", "f")
		}, tailer: TailerRunning, state: StateHalted, age: 2},
		{name: "a halt no bootstrap releases", f: func(f *facts) {
			f.cp.Bootstraps = []schemas.BootstrapState{boot}
			f.params[drparam.Halted] = drparam.FormatHalt(120, "ADD_PARTITION", "not_a_replica", "")
		}, tailer: TailerRunning, state: StateHalted, age: 2},
		{name: "bootstrap applied, the tailer catching up", f: func(f *facts) {
			b := boot
			b.Phase = schemas.PhaseCatchup
			f.cp.Bootstraps = []schemas.BootstrapState{b}
			f.params[drparam.BootstrapDone] = boot.BootstrapID
		}, tailer: TailerRunning, state: StateOK, age: 2, caughtUp: true},
	}...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := healthy()
			if tt.f != nil {
				tt.f(&f)
			}
			rep := decide(f)
			d := rep.Databases[0]
			if rep.Tailer.State != tt.tailer || d.State != tt.state {
				t.Errorf("tailer %s, database %s; want %s, %s", rep.Tailer.State, d.State, tt.tailer, tt.state)
			}
			if d.LagEvents != tt.lag {
				t.Errorf("lag %d events, want %d", d.LagEvents, tt.lag)
			}
			switch {
			case tt.age == none && d.Age != nil:
				t.Errorf("age %v, want none", *d.Age)
			case tt.age != none && d.Age == nil:
				t.Errorf("no age, want %v", tt.age)
			case tt.age != none && *d.Age != tt.age:
				t.Errorf("age %v, want %v", *d.Age, tt.age)
			}
			if rep.CaughtUp != tt.caughtUp {
				t.Errorf("caught up %v, want %v", rep.CaughtUp, tt.caughtUp)
			}
		})
	}
}

// TestTally: what of a topic is applied, read from before the committed
// offset to the end.
func TestTally(t *testing.T) {
	tests := []struct {
		name              string
		committed, lastID int64
		recs              []topicRecord
		complete          time.Time
		events            int64
		oldest            time.Time
	}{
		{name: "nothing read", committed: 5, lastID: 9},
		{
			name: "all committed", committed: 6, lastID: 9,
			recs:     []topicRecord{event(0, 8, before(30)), event(2, 9, before(20)), heartbeat(4, before(10))},
			complete: before(10),
		},
		{
			// Records before the commit may come in any order (read back).
			name: "before the commit, out of order", committed: 6, lastID: 0,
			recs:     []topicRecord{heartbeat(4, before(10)), event(0, 8, before(30))},
			complete: before(10),
		},
		{
			name: "past the commit, applied by repl.last.id", committed: 2, lastID: 9,
			recs:     []topicRecord{event(0, 8, before(30)), event(2, 9, before(20)), heartbeat(4, before(10))},
			complete: before(10),
		},
		{
			name: "nothing after the first unapplied event is applied", committed: 2, lastID: 8,
			recs: []topicRecord{event(0, 8, before(30)), heartbeat(2, before(25)), event(4, 9, before(20)), heartbeat(6, before(15)),
				event(8, 10, before(10)), heartbeat(10, before(5))},
			complete: before(25), events: 2, oldest: before(19),
		},
		{
			name: "nothing committed", committed: -1, lastID: 0,
			recs:   []topicRecord{event(0, 1, before(30)), heartbeat(2, before(25))},
			events: 1, oldest: before(29),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := tally{committed: tt.committed, lastID: tt.lastID}
			for _, r := range tt.recs {
				tl.add(r)
			}
			if !tl.complete.Equal(tt.complete) || tl.events != tt.events || !tl.oldest.Equal(tt.oldest) {
				t.Errorf("complete %v, %d events, oldest %v; want %v, %d, %v", tl.complete, tl.events, tl.oldest, tt.complete, tt.events, tt.oldest)
			}
		})
	}
	tl := tally{committed: 4}
	tl.completes(before(3))
	tl.completes(before(7))
	if !tl.complete.Equal(before(3)) {
		t.Errorf("completes keeps the latest: %v", tl.complete)
	}
}

func TestHeartbeatComplete(t *testing.T) {
	for _, tt := range []struct {
		name string
		hb   schemas.Heartbeat
		want time.Time
	}{
		// A quiet source: the tailer read the whole log when it sent the
		// heartbeat; the replica is not as old as the last event.
		{"at the head", schemas.Heartbeat{ScannedEventID: 120, ScannedEventTime: before(3600), SourceHeadEventID: 120, Sent: before(1)}, before(1)},
		{"behind the head", schemas.Heartbeat{ScannedEventID: 110, ScannedEventTime: before(60), SourceHeadEventID: 120, Sent: before(1)}, before(60)},
		// Written before source_head_event_id existed (default -1).
		{"head unknown", schemas.Heartbeat{ScannedEventID: 120, ScannedEventTime: before(60), SourceHeadEventID: -1, Sent: before(1)}, before(60)},
		{"empty log", schemas.Heartbeat{SourceHeadEventID: 0, Sent: before(1)}, before(1)},
	} {
		if got := tt.hb.CompleteAt(); !got.Equal(tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestDownAfter(t *testing.T) {
	d := func(s float64) config.Duration {
		return config.Duration{Duration: time.Duration(s * float64(time.Second))}
	}
	for _, tt := range []struct {
		heartbeat, poll float64
		want            time.Duration
	}{
		{5, 1, 18 * time.Second},   // the defaults
		{2, 0.2, 15 * time.Second}, // the e2e tests': the floor
		{30, 5, 105 * time.Second},
	} {
		if got := DownAfter(config.Tailer{HeartbeatInterval: d(tt.heartbeat), PollInterval: d(tt.poll)}); got != tt.want {
			t.Errorf("heartbeat %vs, poll %vs: %s, want %s", tt.heartbeat, tt.poll, got, tt.want)
		}
	}
}

// TestBootstrapFigures: a bootstrapping database carries the tailer's and
// the applier's figures, in the JSON and below the table.
func TestBootstrapFigures(t *testing.T) {
	f := healthy()
	f.cp.Bootstraps = []schemas.BootstrapState{{Database: "finance", BootstrapID: "finance-119-1772366400000", CutEventID: 119,
		Phase: schemas.PhaseSnapshot, TablesTotal: 4, TablesDone: 2, PartitionsDone: 30, Files: 40, Bytes: 4096, Seq: 33,
		Started: now.Add(-80 * time.Second)}}
	f.params[drparam.BootstrapID] = "finance-119-1772366400000"
	f.params[drparam.BootstrapApplied] = drparam.FormatProgress(drparam.Progress{Seq: 11, Tables: 1, Partitions: 8, Files: 9})
	rep := decide(f)
	b := rep.Databases[0].Bootstrap
	if b == nil || b.Phase != schemas.PhaseSnapshot || b.TablesTotal != 4 || b.Applied.Tables != 1 || b.PartitionsPublished != 30 ||
		b.Applied.Partitions != 8 || b.FilesCopied != 9 || b.FilesPublished != 40 || b.AppliedPercent() != 100.0/3 || rep.Total.Bootstrapping != 1 {
		t.Fatalf("bootstrap %+v, total %+v", b, rep.Total)
	}
	if r := b.Rates; len(r) != 4 || r[1].Name != "partitions" || r[1].PerSecond != 0.1 || r[1].ETASeconds == nil || *r[1].ETASeconds != 520 {
		t.Errorf("rates %+v, want partitions at 0.1/s, 520 s left", r)
	}
	var out strings.Builder
	if err := rep.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"bootstrapping\n", "1 bootstrapping: caught up",
		"finance finance-119-1772366400000 SNAPSHOT: tables 1/4, partitions 8/30+, files copied 9/40+ (0 B of 4.0 KiB+), applied 33%",
		// Averages over the 80 s since it started; the partitions' total
		// extrapolated from the tables published (30 x 4/2).
		"since it started: tables=1/4 0.0/s eta 4m0s partitions=8/~60 0.1/s eta 8m40s files=9/~80 0.1/s eta 10m31s"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestBootstrapFiguresPast: the tailer is done with a bootstrap the
// applier is still applying; its totals come from an older checkpoint.
func TestBootstrapFiguresPast(t *testing.T) {
	f := healthy()
	f.params[drparam.BootstrapID] = "finance-119-1772366400000"
	f.params[drparam.BootstrapApplied] = drparam.FormatProgress(drparam.Progress{Seq: 11, Tables: 1, Partitions: 8, Files: 9})
	rep := &Report{Time: now, required: map[string]bool{}, Tailer: Tailer{Source: "primary", DownAfter: 15, SourceHeadEventID: f.head}}
	rep.Tailer.fromCheckpoint(f.cp)
	rep.Tailer.past = []schemas.BootstrapState{{Database: "finance", BootstrapID: "finance-119-1772366400000", CutEventID: 119,
		Phase: schemas.PhaseCatchup, TablesTotal: 4, TablesDone: 4, PartitionsDone: 30, Files: 40, Seq: 36}}
	d := Database{Database: "finance", TopicExists: true, InScope: true, RPO: 300}
	d.known.kafka, d.known.dr = true, true
	d.fromParameters(f.params)
	rep.Databases = []Database{d}
	for i := range 12 {
		rep.copies = append(rep.copies, schemas.CopyCompletion{TaskID: fmt.Sprintf("finance-119-1772366400000-s%d-0", i+2), Status: schemas.StatusCopied, Length: 100})
	}
	rep.copies = append(rep.copies, schemas.CopyCompletion{TaskID: "sales-3-1772366400000-s2-0", Status: schemas.StatusCopied, Length: 100})
	rep.summarize()
	b := rep.Databases[0].Bootstrap
	if rep.Databases[0].State != StateBootstrapping || b == nil || b.Phase != "PUBLISHED" || b.TablesTotal != 4 || b.PartitionsPublished != 30 ||
		b.Applied.Partitions != 8 || b.FilesCopied != 12 || b.BytesCopied != 1200 {
		t.Fatalf("state %s, bootstrap %+v", rep.Databases[0].State, b)
	}
}
