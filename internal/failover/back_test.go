package failover

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/internal/hmslog"
)

func TestCheckReverse(t *testing.T) {
	fwd := &config.Config{Source: config.Source{Name: "prod", Kind: config.SourceThrift, Metastore: "src:9083"},
		Applier: config.Applier{Metastore: "dr:9083", Group: "fwd-applier"}, Kafka: config.Kafka{TopicPrefix: "hivedr"}}
	good := func() *config.Config {
		return &config.Config{Source: config.Source{Name: "prod-back", Kind: config.SourceThrift, Metastore: "dr:9083"},
			Applier: config.Applier{Metastore: "src:9083", Group: "rev-applier"}, Kafka: config.Kafka{TopicPrefix: "hivedr-back"},
			Tailer: config.Tailer{StartEventID: "500"}}
	}
	for _, c := range []struct {
		name string
		edit func(*config.Config)
		want string
	}{
		{"reversed", func(*config.Config) {}, ""},
		{"start before the head", func(c *config.Config) { c.Tailer.StartEventID = "400" }, ""},
		{"reads the old primary", func(c *config.Config) { c.Source.Metastore = "src:9083" }, "source.metastore"},
		{"writes into DR", func(c *config.Config) { c.Applier.Metastore = "dr:9083" }, "applier.metastore"},
		{"same name", func(c *config.Config) { c.Source.Name = "prod" }, "source.name"},
		{"same topics", func(c *config.Config) { c.Kafka.TopicPrefix = "hivedr" }, "topic_prefix"},
		{"same group", func(c *config.Config) { c.Applier.Group = "fwd-applier" }, "applier.group"},
		{"database out of scope", func(c *config.Config) {
			c.Replication.Databases = []config.DatabasePolicy{{Name: "other"}}
		}, "does not hold sales"},
		{"tailer starts at latest", func(c *config.Config) { c.Tailer.StartEventID = "latest" }, "start_event_id"},
		{"tailer starts after the head", func(c *config.Config) { c.Tailer.StartEventID = "501" }, "start_event_id"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rev := good()
			c.edit(rev)
			probs := CheckReverse(fwd, rev, []string{"sales"}, 500)
			got := strings.Join(probs, "; ")
			if (c.want == "") != (len(probs) == 0) || !strings.Contains(got, c.want) {
				t.Fatalf("CheckReverse: %q, want %q", got, c.want)
			}
		})
	}
}

func TestChangedAndMoved(t *testing.T) {
	evs := []hmslog.RawEvent{
		{EventID: 10, Database: "sales", Table: "orders"},
		{EventID: 11, Database: "SALES", Table: "Orders"},
		{EventID: 12, Database: "sales", Table: "accounts"},
		{EventID: 13, Database: "crm", Table: "leads"},
		{EventID: 14, Database: "sales"},
		{EventID: 15},
	}
	src := map[string]int{}
	changed(src, evs, newLogTables().touched(evs), "sales", 10)
	if src["orders"] != 1 || src["accounts"] != 1 || src[""] != 1 || len(src) != 3 {
		t.Fatalf("Changed after 10: %v", src)
	}
	dr := map[string]int{"accounts": 2, "written_on_dr": 1}
	if got := Moved(src, dr); !slices.Equal(got, []string{"accounts", "orders", "written_on_dr"}) {
		t.Fatalf("Moved %v", got)
	}
	if got := Moved(map[string]int{"": 3}, nil); len(got) != 0 {
		t.Fatalf("database-level events moved tables: %v", got)
	}
}

func TestCheckOldPrimary(t *testing.T) {
	const rev = "hivedr:prod-back"
	marked := map[string]string{drparam.Target: rev, drparam.FailbackAt: "2026-12-03T10:00:00Z", drparam.FailbackDRLogHead: "500"}
	const at = "2026-12-03T09:00:00Z"
	done := map[string]string{drparam.FailedOverAt: at, drparam.FailbackDone: at}
	cutShort := map[string]string{drparam.FailedOverAt: at}
	earlier := map[string]string{drparam.FailedOverAt: at, drparam.FailbackDone: "2026-11-01T09:00:00Z"}
	for _, c := range []struct {
		name   string
		params map[string]string
		dr     map[string]string // the new primary's database
		again  bool
		want   string
	}{
		{"a primary database", map[string]string{"owner": "etl"}, cutShort, false, ""},
		{"not on the old primary", nil, cutShort, false, "not on the old primary"},
		{"another pipeline's replica", map[string]string{drparam.Target: "hivedr:other"}, cutShort, false, `replica of "hivedr:other"`},
		{"failed back already", marked, done, false, "failed back at 2026-12-03T10:00:00Z, from DR log event 500): a failback runs once; add -again"},
		{"failed back already, again", marked, done, true, ""},
		{"failback cut short: resumed", marked, cutShort, false, ""},
		{"failed back after an earlier failover only: resumed", marked, earlier, false, ""},
		{"another pipeline's replica, again", map[string]string{drparam.Target: "hivedr:other"}, cutShort, true, `replica of "hivedr:other"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := CheckOldPrimary("sales", c.params, c.dr, rev, c.again)
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "sales") {
				t.Fatalf("CheckOldPrimary: %v, want %q", err, c.want)
			}
		})
	}
}

// TestSplitAtFailover: the old primary's events after the event DR
// reflected split at the failover's second: lost at or before it (its
// own second included), late after; other databases' events and those
// up to the event DR reflected count in neither.
func TestSplitAtFailover(t *testing.T) {
	at := time.Date(2026, 12, 3, 10, 0, 0, 700_000_000, time.UTC) // recorded as 10:00:00
	sec := at.Unix()
	evs := []hmslog.RawEvent{
		{EventID: 100, EventTime: sec - 60, Database: "sales", Table: "orders"}, // DR has it
		{EventID: 101, EventTime: sec - 5, Database: "sales", Table: "lost_0"},
		{EventID: 102, EventTime: sec - 5, Database: "crm", Table: "leads"}, // another database
		{EventID: 103, EventTime: sec - 1, Database: "SALES", Table: "Lost_1"},
		{EventID: 104, EventTime: sec, Database: "sales", Table: "lost_2"}, // the failover's own second
		{EventID: 105, EventTime: sec + 1, Database: "sales", Table: "late"},
		{EventID: 106, EventTime: sec + 30, Database: "sales"},
	}
	for _, c := range []struct {
		name       string
		after      int64
		lost, late map[string]int
	}{
		{"after the event DR reflected", 100, map[string]int{"lost_0": 1, "lost_1": 1, "lost_2": 1}, map[string]int{"late": 1, "": 1}},
		{"DR further on", 103, map[string]int{"lost_2": 1}, map[string]int{"late": 1, "": 1}},
		{"nothing after", 106, map[string]int{}, map[string]int{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			lost, late := map[string]int{}, map[string]int{}
			splitAtFailover(lost, late, evs, newLogTables().touched(evs), "sales", c.after, at)
			if !maps.Equal(lost, c.lost) || !maps.Equal(late, c.late) {
				t.Fatalf("lost %v late %v, want %v and %v", lost, late, c.lost, c.late)
			}
		})
	}
}

// TestRecordLost: failback's count replaces the failover's "unknown",
// with when it was counted; no loss makes the RPO 0 seconds too, and
// ReadRecord reads the count back.
func TestRecordLost(t *testing.T) {
	at := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	d := Database{Database: "a", Reached: 130, ReachedTime: at.Add(-time.Minute), LostEvents: -1, RPOSeconds: 60, DRLogHead: 777}
	marked := Mark(map[string]string{drparam.Target: "hivedr:src"}, d, Unplanned, 130, []string{"a"}, at)
	for _, c := range []struct {
		lost    int
		seconds string
	}{{3, "60.0"}, {0, "0.0"}} {
		p := RecordLost(marked, c.lost, at.Add(time.Hour))
		if p[drparam.FailoverRPOEvents] != fmt.Sprint(c.lost) || p[drparam.FailoverRPOSeconds] != c.seconds ||
			p[drparam.FailoverRPOCountedAt] != "2026-12-03T11:00:00Z" {
			t.Errorf("lost %d: %v", c.lost, p)
		}
		r, ok, err := ReadRecord(p)
		if err != nil || !ok || r.LostEvents != int64(c.lost) || r.EventID != 130 {
			t.Errorf("lost %d: read back %+v %v %v", c.lost, r, ok, err)
		}
	}
	if marked[drparam.FailoverRPOEvents] != "unknown" || marked[drparam.FailoverRPOCountedAt] != "" {
		t.Errorf("RecordLost changed its input: %v", marked)
	}
}

// fakeLog is a notification log in memory.
type fakeLog []hmslog.RawEvent

func (l fakeLog) Head(context.Context) (int64, error) { return l[len(l)-1].EventID, nil }
func (l fakeLog) Next(_ context.Context, after int64, max int) ([]hmslog.RawEvent, error) {
	var out []hmslog.RawEvent
	for _, e := range l {
		if e.EventID > after && len(out) < max {
			out = append(out, e)
		}
	}
	return out, nil
}
func (l fakeLog) Databases(context.Context) ([]string, error) { return nil, nil }
func (l fakeLog) Close() error                                { return nil }

// TestCountLost: at a failover whose source log is readable, every event
// of a database after what it reached is lost, read in pages across more
// than one.
func TestCountLost(t *testing.T) {
	var log fakeLog
	for i := int64(1); i <= 2500; i++ {
		db := []string{"a", "b", "c"}[i%3]
		log = append(log, hmslog.RawEvent{EventID: i, Database: db, Table: "t"})
	}
	got, err := countLost(context.Background(), log, []Database{{Database: "a", Reached: 2400}, {Database: "b", Reached: 2500}, {Database: "c", Reached: 10}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// a: 2401..2500 with i%3 == 0; c: 11..2500 with i%3 == 2.
	want := map[string]int64{"a": 33, "b": 0, "c": 830}
	if !maps.Equal(got, want) {
		t.Fatalf("countLost = %v, want %v", got, want)
	}
}

func TestBackReportText(t *testing.T) {
	at := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	r := &BackReport{Databases: []BackDatabase{
		{Database: "a", EventID: 130, FailedOverAt: at, SourceEvents: 4, LostEvents: 3, LateEvents: 1, RecordedLost: -1, RPORecorded: true,
			SourceChanged: map[string]int{"lost_0": 1}, Moved: []string{"lost_0"}},
		{Database: "b", EventID: 120, FailedOverAt: at, SourceEvents: 1, LostEvents: 1, RecordedLost: 0},
	}}
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"4 event(s) after event 130, the one DR reflected: 3 lost (written at or before the failover at 2026-12-03T10:00:00Z), 1 written after it",
		"RPO in events: 3, counted now (the failover could not read the source); recorded on DR as hivedr.failover.rpo_events",
		"RPO in events: the failover recorded 0; the old primary's log has 1 at or before its time",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
}

// TestMarkReplica: the old primary's database marked as the reverse
// pipeline's replica from the new primary's log head; resuming a failback
// cut short keeps the position the reverse applier reached and the first
// mark's time.
func TestMarkReplica(t *testing.T) {
	const rev = "hivedr:prod-back"
	now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	fresh := MarkReplica(map[string]string{"owner": "etl", drparam.Halted: "not_a_replica"}, rev, 500, false, now)
	want := map[string]string{"owner": "etl", drparam.Target: rev, drparam.LastID: "500", drparam.FailbackAt: "2026-12-06T09:00:00Z", drparam.FailbackDRLogHead: "500"}
	if !maps.Equal(fresh, want) {
		t.Errorf("first mark %v, want %v", fresh, want)
	}
	applied := maps.Clone(fresh)
	applied[drparam.LastID] = "530" // the reverse applier went on
	resumed := MarkReplica(applied, rev, 500, true, now.Add(time.Minute))
	if resumed[drparam.LastID] != "530" || resumed[drparam.FailbackAt] != "2026-12-06T09:00:00Z" {
		t.Errorf("resumed mark %v: want last id 530 and the first mark's time kept", resumed)
	}
	again := MarkReplica(applied, rev, 500, false, now.Add(time.Minute))
	if again[drparam.LastID] != "500" || again[drparam.FailbackAt] != "2026-12-06T09:01:00Z" {
		t.Errorf("mark again %v: want last id 500 and a new time", again)
	}
}
