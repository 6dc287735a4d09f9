package status

import (
	"bytes"
	"encoding/json"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hivedr/hivedr/schemas"
)

func TestWriteText(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tailerOK := Tailer{Source: "primary", CheckpointEventID: 120, CheckpointWritten: now.Add(-2 * time.Second), CheckpointState: schemas.StateRunning,
		SourceHeadEventID: 120, DownAfter: 15}
	applier := Applier{Group: "hivedr-applier", Members: 1, Metastore: "127.0.0.1:29083"}
	// db is a database both systems answered for.
	db := func(name string, last, lag int64, f func(*Database)) Database {
		d := Database{Database: name, Topic: "hivedr.events." + name, TopicExists: true, InScope: true, RPO: 300, OnDR: true, ReplTarget: "hivedr:primary",
			LastEventID: last, Committed: 50 - 2*lag, End: 50, LagEvents: lag, UncommittedRecords: 2 * lag, Newest: now.Add(-3 * time.Second), NewestType: "heartbeat",
			Complete: now.Add(-4 * time.Second)}
		d.known.dr, d.known.kafka = true, true
		if f != nil {
			f(&d)
		}
		return d
	}
	unapplied := func(ago time.Duration) func(*Database) {
		return func(d *Database) { d.oldestUnapplied = now.Add(-ago) }
	}
	tests := []struct {
		name     string
		tailer   Tailer
		members  int // applier group members; 0 means 1
		dbs      []Database
		required []string
		errors   []string
		caughtUp bool
		want     []string // lines (or parts of lines) of the output, in order
		absent   []string
	}{
		{
			name: "caught up", tailer: tailerOK, caughtUp: true,
			dbs: []Database{db("finance", 118, 0, nil), db("sales", 97, 0, func(d *Database) { d.UncommittedRecords = 2 })},
			want: []string{
				"tailer (source primary): checkpoint event 120, written 2s ago; source head 120: caught up",
				"applier (group hivedr-applier): 1 member; DR metastore 127.0.0.1:29083",
				"DATABASE   REPL.LAST.ID   LAG   RECORDS   BEHIND   AGE   RPO   NEWEST RECORD        SKIPPED   STATE",
				"finance    118            0     0         -        4s    5m    3s ago (heartbeat)   -         ok",
				"sales      97             0     2         -        4s    5m    3s ago (heartbeat)   -         ok",
				"total: 2 databases, lag 0 events, 0 lagging, 0 halted, 0 over RPO, 0 skipped events: caught up",
			},
			absent: []string{"halted (", "errors:", "NOT"},
		},
		{
			name: "lagging", tailer: tailerOK,
			dbs: []Database{db("finance", 100, 7, unapplied(8400*time.Millisecond)), db("sales", 97, 0, nil)},
			want: []string{
				"finance    100            7     14        8s       4s    5m    3s ago (heartbeat)   -         lagging",
				"sales      97             0     0         -",
				"total: 2 databases, lag 7 events, 1 lagging, 0 halted, 0 over RPO, 0 skipped events: NOT caught up",
			},
		},
		{
			name: "a lower bound of the lag", tailer: tailerOK,
			dbs:  []Database{db("finance", 100, 200000, func(d *Database) { d.LagEventsPartial = true })},
			want: []string{"finance    100            >=200000   400000    ?        4s    5m", "lagging"},
		},
		{
			name: "halted and skipped", tailer: tailerOK,
			dbs: []Database{db("finance", 100, 3, func(d *Database) {
				d.Halted = "event 101 ADD_PARTITION: copy_failed: checksum mismatch"
				d.Skipped = []SkippedEvent{{33, "requested by ops@host at 2026-02-01T10:00:00Z"}, {40, "requested by ops@host"}}
			})},
			want: []string{
				"finance    100            3     6         ?        4s    5m    3s ago (heartbeat)   2         halted",
				"total: 1 databases, lag 3 events, 1 lagging, 1 halted, 0 over RPO, 2 skipped events: NOT caught up",
				"halted (see the applier's log",
				"  finance: event 101 ADD_PARTITION: copy_failed: checksum mismatch",
				"skipped events:",
				"  finance: event 33: requested by ops@host at 2026-02-01T10:00:00Z",
				"  finance: event 40: requested by ops@host",
			},
		},
		{
			name: "skipped events alone do not fail", tailer: tailerOK, caughtUp: true,
			dbs:  []Database{db("finance", 100, 0, func(d *Database) { d.Skipped = []SkippedEvent{{33, "by ops"}} })},
			want: []string{"1         ok", "0 halted, 0 over RPO, 1 skipped events: caught up", "  finance: event 33: by ops"},
		},
		{
			name: "over the RPO", tailer: tailerOK,
			dbs: []Database{db("finance", 100, 0, func(d *Database) { d.RPO, d.Complete = 30, now.Add(-75*time.Second) })},
			want: []string{"finance    100            0     0         -        1m15s   30s   3s ago (heartbeat)   -         rpo_breached",
				"1 over RPO", "NOT caught up"},
		},
		{
			name: "database only in the config, no topic, not on DR", tailer: tailerOK, caughtUp: true,
			dbs: []Database{db("finance", 118, 0, nil), db("risk", 0, 0, func(d *Database) {
				d.TopicExists, d.OnDR, d.InConfig, d.Newest, d.End, d.Committed, d.Complete = false, false, true, time.Time{}, 0, -1, time.Time{}
			})},
			want: []string{"risk       -              0     0         -        -     5m    -                    -         no_topic", ": caught up"},
		},
		{
			name: "a database named with -db must be replicated", tailer: tailerOK, required: []string{"risk"},
			dbs: []Database{db("risk", 0, 0, func(d *Database) {
				d.TopicExists, d.OnDR, d.Newest, d.End, d.Committed, d.Complete = false, false, time.Time{}, 0, -1, time.Time{}
			})},
			want: []string{"risk       -              0     0         -        -     5m    -               -         no_topic", ": NOT caught up"},
		},
		{
			name: "topic but no DR database yet", tailer: tailerOK, caughtUp: true,
			dbs:  []Database{db("scratch", 0, 0, func(d *Database) { d.OnDR, d.ReplTarget = false, "" })},
			want: []string{"scratch    -              0     0         -        4s    5m    3s ago (heartbeat)   -         not_on_dr"},
		},
		{
			name: "DR database that is not a replication target", tailer: tailerOK,
			dbs:  []Database{db("finance", 0, 0, func(d *Database) { d.ReplTarget = "" })},
			want: []string{"not_a_target", "NOT caught up"},
		},
		{
			name: "tailer behind",
			tailer: Tailer{Source: "primary", CheckpointEventID: 117, CheckpointWritten: now.Add(-time.Second), CheckpointState: schemas.StateRunning,
				SourceHeadEventID: 120, DownAfter: 15},
			dbs: []Database{db("finance", 117, 0, nil)},
			want: []string{
				"tailer (source primary): checkpoint event 117, written 1s ago; source head 120: BEHIND, 3 events not published yet",
				"finance    117            0", "tailer_behind", "NOT caught up",
			},
		},
		{
			name: "tailer down, group lag 0",
			tailer: Tailer{Source: "primary", CheckpointEventID: 117, CheckpointWritten: now.Add(-75 * time.Second), CheckpointState: schemas.StateRunning,
				SourceHeadEventID: 120, DownAfter: 15},
			dbs: []Database{db("finance", 117, 0, func(d *Database) { d.Complete = now.Add(-76 * time.Second) }),
				db("other", 5, 0, func(d *Database) { d.InScope, d.RPO = false, 0 })},
			want: []string{
				"tailer (source primary): DOWN: checkpoint event 117, written 1m15s ago (none for over 15s: is `hivedr tail` running?); source head 120: 3 events not published",
				"finance    117            0     0         -        1m16s   5m    3s ago (heartbeat)   -         tailer_down",
				"other      5              0     0         -        4s      -     3s ago (heartbeat)   -         ok",
				"NOT caught up",
			},
		},
		{
			name: "tailer down with nothing new at the source",
			tailer: Tailer{Source: "primary", CheckpointEventID: 120, CheckpointWritten: now.Add(-20 * time.Second), CheckpointState: schemas.StateRunning,
				SourceHeadEventID: 120, DownAfter: 15},
			dbs: []Database{db("finance", 117, 0, nil)},
			want: []string{
				"tailer (source primary): DOWN: checkpoint event 120, written 20s ago (none for over 15s: is `hivedr tail` running?); source head 120: caught up",
				"tailer_down", "NOT caught up",
			},
		},
		{
			name: "chain broken",
			tailer: Tailer{Source: "primary", CheckpointEventID: 117, CheckpointWritten: now.Add(-time.Hour), CheckpointState: schemas.StateChainBroken,
				SourceHeadEventID: 130, DownAfter: 15},
			dbs: []Database{db("finance", 117, 0, func(d *Database) { d.Halted = "event 118: chain_broken: the tailer stopped" })},
			want: []string{
				"tailer (source primary): CHAIN_BROKEN: stopped after event 117 (checkpoint written 1h ago) on a gap in the source log: " +
					"events after 117 were purged before they were published; repair with hivedr bootstrap -repair-chain, then restart hivedr tail; source head 130: 13 events not published",
				"chain_broken", "NOT caught up", "halted (", "finance: event 118: chain_broken",
			},
		},
		{
			name: "nothing yet", tailer: Tailer{Source: "primary", SourceHeadEventID: 5, DownAfter: 15},
			want: []string{
				"tailer (source primary): no checkpoint yet (has `hivedr tail` run?); source head 5",
				"no replicated databases",
				"total: 0 databases, lag 0 events, 0 lagging, 0 halted, 0 over RPO, 0 skipped events: NOT caught up",
			},
		},
		{
			name: "DR metastore unreachable", tailer: tailerOK,
			errors: []string{"DR metastore 127.0.0.1:29083: connect to hive metastore 127.0.0.1:29083: connection refused"},
			dbs:    []Database{db("finance", 0, 0, func(d *Database) { d.known.dr, d.LagEvents = false, -1 })},
			want: []string{
				"finance    ?              ?     0", "unknown", "NOT caught up",
				"errors:", "  DR metastore 127.0.0.1:29083: connect to hive metastore 127.0.0.1:29083: connection refused",
			},
		},
		{
			name: "Kafka unreachable", tailer: Tailer{Source: "primary", SourceHeadEventID: 120, Unknown: true}, members: -1,
			errors: []string{"kafka 127.0.0.1:19092: list topics: context deadline exceeded (is Kafka up?)"},
			dbs: []Database{db("finance", 118, 0, func(d *Database) {
				d.known.kafka, d.LagEvents, d.UncommittedRecords, d.TopicExists, d.Newest, d.Complete = false, -1, -1, false, time.Time{}, time.Time{}
			})},
			want: []string{
				"tailer (source primary): checkpoint unknown (see errors); source head 120",
				"applier (group hivedr-applier): members unknown;",
				"finance    118            ?     ?         -        -     5m    -               -         unknown", "kafka 127.0.0.1:19092: list topics",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := &Report{Time: now, Tailer: tt.tailer, Applier: applier, Databases: tt.dbs, Errors: tt.errors, required: map[string]bool{}}
			if tt.members != 0 {
				rep.Applier.Members = tt.members
			}
			for _, r := range tt.required {
				rep.required[r] = true
			}
			rep.summarize()
			if rep.CaughtUp != tt.caughtUp {
				t.Errorf("CaughtUp = %v, want %v", rep.CaughtUp, tt.caughtUp)
			}
			var b bytes.Buffer
			if err := rep.WriteText(&b); err != nil {
				t.Fatal(err)
			}
			out := b.String()
			rest := out
			for _, w := range tt.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("output lacks %q (in order):\n%s", w, out)
				}
				rest = rest[i+len(w):]
			}
			for _, a := range tt.absent {
				if strings.Contains(out, a) {
					t.Errorf("output has %q:\n%s", a, out)
				}
			}
			// The JSON form carries the same facts.
			j, err := json.Marshal(rep)
			if err != nil {
				t.Fatal(err)
			}
			var back Report
			if err := json.Unmarshal(j, &back); err != nil || back.CaughtUp != rep.CaughtUp || len(back.Databases) != len(rep.Databases) {
				t.Errorf("JSON round trip: %v; %s", err, j)
			}
		})
	}
}

// TestWriteJSONKeys pins the JSON field names of `hivedr status -json`:
// scripts and e2e tests read them.
func TestWriteJSONKeys(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	rep := &Report{
		Time: now,
		Tailer: Tailer{Source: "primary", CheckpointEventID: 1, CheckpointWritten: now, CheckpointState: schemas.StateRunning,
			SourceHeadEventID: 2, DownAfter: 15, Unknown: true},
		Applier: Applier{Group: "g", Members: 1, Metastore: "m"},
		Databases: []Database{{Database: "d", Topic: "t", ReplTarget: "x", Halted: "h", InScope: true, RPO: 300, LagEventsPartial: true,
			Skipped: []SkippedEvent{{EventID: 3, Note: "n"}}, Complete: now, oldestUnapplied: now, Newest: now, NewestType: "event"}},
		Errors:   []string{"e"},
		required: map[string]bool{},
		Site:     "dr",
		Sites:    []*Report{{Site: "west"}},
	}
	rep.summarize()
	var b bytes.Buffer
	if err := rep.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), "{\n  \"time\": ") {
		t.Errorf("not indented by two spaces:\n%s", b.String())
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b.Bytes(), &top); err != nil {
		t.Fatal(err)
	}
	var dbs []map[string]json.RawMessage
	var tailer, applier, total map[string]json.RawMessage
	for k, v := range map[string]any{"tailer": &tailer, "applier": &applier, "total": &total, "databases": &dbs} {
		if err := json.Unmarshal(top[k], v); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
	}
	var skipped []map[string]json.RawMessage
	if err := json.Unmarshal(dbs[0]["skipped"], &skipped); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		obj  map[string]json.RawMessage
		want string
	}{
		{"report", top, "applier caught_up databases errors site sites tailer time total"},
		{"tailer", tailer, "caught_up checkpoint_age_seconds checkpoint_event_id checkpoint_state checkpoint_written down_after_seconds " +
			"lag_events source source_head_event_id state unknown"},
		{"applier", applier, "dr_metastore group members"},
		{"database", dbs[0], "age_seconds behind_seconds committed_offset database end_offset halted in_config in_scope lag_events " +
			"lag_events_partial newest_record_time newest_record_type on_dr repl_last_id repl_target_for replica_complete_time " +
			"rpo_seconds skipped state topic topic_exists uncommitted_records"},
		{"skipped", skipped[0], "event_id note"},
		{"total", total, "bootstrapping databases halted lag_events lagging rpo_breached skipped"},
	} {
		var got []string
		for k := range c.obj {
			got = append(got, k)
		}
		slices.Sort(got)
		if g := strings.Join(got, " "); g != c.want {
			t.Errorf("%s keys:\n got %s\nwant %s", c.name, g, c.want)
		}
	}
}

// failWriter fails every write.
type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteErrors(t *testing.T) {
	rep := &Report{Databases: []Database{{Database: "d"}}, Errors: []string{"e"}}
	if err := rep.WriteText(failWriter{}); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("WriteText: %v, want the writer's error", err)
	}
	if err := rep.WriteJSON(failWriter{}); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("WriteJSON: %v, want the writer's error", err)
	}
}

// With further sites, status prints the sites side by side, then each
// site's databases under its name.
func TestWriteTextSites(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	site := func(name, group string, lag int64, members int) *Report {
		r := &Report{Site: name, Time: now, Applier: Applier{Group: group, Members: members, Metastore: name + ":9083"},
			Tailer: Tailer{Source: "primary", CheckpointEventID: 9, CheckpointWritten: now, CheckpointState: schemas.StateRunning, SourceHeadEventID: 9, DownAfter: 15},
			Databases: []Database{{Database: "sales", TopicExists: true, OnDR: true, ReplTarget: "primary", InScope: true, RPO: 300,
				LastEventID: 9 - lag, LagEvents: lag, Committed: 1, Complete: now.Add(-3 * time.Second), known: struct{ dr, kafka bool }{kafka: true, dr: true}}},
			required: map[string]bool{}}
		r.summarize()
		return r
	}
	rep := site("dr", "hivedr-applier", 0, 1)
	rep.Sites = []*Report{site("west", "hivedr-applier-west", 4, 0)}
	var b bytes.Buffer
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^SITE +APPLIER GROUP +MEMBERS +DR METASTORE +DATABASES +LAG +LAGGING +HALTED +OVER RPO +OLDEST AGE +VERDICT$`),
		regexp.MustCompile(`(?m)^dr +hivedr-applier +1 +dr:9083 +1 +0 +0 +0 +0 +3s +caught up$`),
		regexp.MustCompile(`(?m)^west +hivedr-applier-west +0 +west:9083 +1 +4 +1 +0 +0 +3s +NOT caught up$`),
		regexp.MustCompile(`(?m)^==== site dr\napplier \(group hivedr-applier\)`),
		regexp.MustCompile(`(?m)^==== site west\napplier \(group hivedr-applier-west\): no members`),
	} {
		if !want.MatchString(out) {
			t.Errorf("no match for %s in:\n%s", want, out)
		}
	}
	if strings.Count(out, "tailer (source primary)") != 1 {
		t.Errorf("the tailer is every site's: one line, got\n%s", out)
	}
}
