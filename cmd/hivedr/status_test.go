package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestWriteStatus(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tailerOK := tailerStatus{Source: "primary", CheckpointEventID: 120, CheckpointWritten: now.Add(-2 * time.Second), SourceHeadEventID: 120, CaughtUp: true}
	applier := applierStatus{Group: "hivedr-applier", Members: 1, Metastore: "127.0.0.1:29083"}
	// db is a database both systems answered for.
	db := func(name string, last, lag int64, f func(*dbStatus)) dbStatus {
		d := dbStatus{Database: name, Topic: "hivedr.events." + name, TopicExists: true, OnDR: true, ReplTarget: "hivedr:primary",
			LastEventID: last, Committed: 50 - lag, End: 50, Lag: lag, Newest: now.Add(-3 * time.Second), NewestType: "heartbeat"}
		d.known.dr, d.known.kafka = true, true
		if f != nil {
			f(&d)
		}
		return d
	}
	secs := func(s float64) *float64 { return &s }
	tests := []struct {
		name     string
		tailer   tailerStatus
		members  int // applier group members; 0 means 1
		dbs      []dbStatus
		required []string
		errors   []string
		caughtUp bool
		want     []string // lines (or parts of lines) of the output, in order
		absent   []string
	}{
		{
			name: "caught up", tailer: tailerOK, caughtUp: true,
			dbs: []dbStatus{db("finance", 118, 0, nil), db("sales", 97, 0, nil)},
			want: []string{
				"tailer (source primary): checkpoint event 120, written 2s ago; source head 120: caught up",
				"applier (group hivedr-applier): 1 member; DR metastore 127.0.0.1:29083",
				"DATABASE   REPL.LAST.ID   LAG   BEHIND   NEWEST RECORD        SKIPPED   STATE",
				"finance    118            0     -        3s ago (heartbeat)   -         ok",
				"sales      97             0     -        3s ago (heartbeat)   -         ok",
				"total: 2 databases, lag 0 records, 0 lagging, 0 halted, 0 skipped events: caught up",
			},
			absent: []string{"halted (", "errors:", "NOT"},
		},
		{
			name: "lagging", tailer: tailerOK,
			dbs: []dbStatus{db("finance", 100, 7, func(d *dbStatus) { d.Behind = secs(8.4) }), db("sales", 97, 0, nil)},
			want: []string{
				"finance    100            7     8s       3s ago (heartbeat)   -         lagging",
				"sales      97             0     -",
				"total: 2 databases, lag 7 records, 1 lagging, 0 halted, 0 skipped events: NOT caught up",
			},
		},
		{
			name: "halted and skipped", tailer: tailerOK,
			dbs: []dbStatus{db("finance", 100, 3, func(d *dbStatus) {
				d.Halted = "event 101 ADD_PARTITION: copy_failed: checksum mismatch"
				d.Skipped = []skippedEvent{{33, "requested by ops@host at 2026-02-01T10:00:00Z"}, {40, "requested by ops@host"}}
			})},
			want: []string{
				"finance    100            3     ?        3s ago (heartbeat)   2         HALTED",
				"total: 1 databases, lag 3 records, 1 lagging, 1 halted, 2 skipped events: NOT caught up",
				"halted (see the applier's log",
				"  finance: event 101 ADD_PARTITION: copy_failed: checksum mismatch",
				"skipped events:",
				"  finance: event 33: requested by ops@host at 2026-02-01T10:00:00Z",
				"  finance: event 40: requested by ops@host",
			},
		},
		{
			name: "skipped events alone do not fail", tailer: tailerOK, caughtUp: true,
			dbs:  []dbStatus{db("finance", 100, 0, func(d *dbStatus) { d.Skipped = []skippedEvent{{33, "by ops"}} })},
			want: []string{"1         ok", "0 halted, 1 skipped events: caught up", "  finance: event 33: by ops"},
		},
		{
			name: "database only in the config, no topic, not on DR", tailer: tailerOK, caughtUp: true,
			dbs: []dbStatus{db("finance", 118, 0, nil), db("risk", 0, 0, func(d *dbStatus) {
				d.TopicExists, d.OnDR, d.InConfig, d.Newest, d.End, d.Committed = false, false, true, time.Time{}, 0, -1
			})},
			want: []string{"risk       -              0     -        -                    -         no topic", ": caught up"},
		},
		{
			name: "a database named with -db must be replicated", tailer: tailerOK, required: []string{"risk"},
			dbs: []dbStatus{db("risk", 0, 0, func(d *dbStatus) {
				d.TopicExists, d.OnDR, d.Newest, d.End, d.Committed = false, false, time.Time{}, 0, -1
			})},
			want: []string{"risk       -              0     -        -               -         no topic", ": NOT caught up"},
		},
		{
			name: "topic but no DR database yet", tailer: tailerOK, caughtUp: true,
			dbs:  []dbStatus{db("scratch", 0, 0, func(d *dbStatus) { d.OnDR, d.ReplTarget = false, "" })},
			want: []string{"scratch    -              0     -        3s ago (heartbeat)   -         not on DR"},
		},
		{
			name: "DR database that is not a replication target", tailer: tailerOK,
			dbs:  []dbStatus{db("finance", 0, 0, func(d *dbStatus) { d.ReplTarget = "" })},
			want: []string{"not a target", "NOT caught up"},
		},
		{
			name: "tailer behind", caughtUp: false,
			tailer: tailerStatus{Source: "primary", CheckpointEventID: 117, CheckpointWritten: now.Add(-75 * time.Second), SourceHeadEventID: 120},
			dbs:    []dbStatus{db("finance", 117, 0, nil)},
			want: []string{
				"tailer (source primary): checkpoint event 117, written 1m15s ago; source head 120: 3 events not published yet (is `hivedr tail` running?)",
				"finance    117            0", "ok", "NOT caught up",
			},
		},
		{
			name: "nothing yet", tailer: tailerStatus{Source: "primary", SourceHeadEventID: 5},
			want: []string{
				"tailer (source primary): no checkpoint yet (has `hivedr tail` run?); source head 5",
				"no replicated databases",
				"total: 0 databases, lag 0 records, 0 lagging, 0 halted, 0 skipped events: NOT caught up",
			},
		},
		{
			name: "DR metastore unreachable", tailer: tailerOK,
			errors: []string{"DR metastore 127.0.0.1:29083: connect to hive metastore 127.0.0.1:29083: connection refused"},
			dbs:    []dbStatus{db("finance", 0, 0, func(d *dbStatus) { d.known.dr = false })},
			want: []string{
				"finance    ?              0", "unknown", "NOT caught up",
				"errors:", "  DR metastore 127.0.0.1:29083: connect to hive metastore 127.0.0.1:29083: connection refused",
			},
		},
		{
			name: "Kafka unreachable", tailer: tailerStatus{Source: "primary", SourceHeadEventID: 120, Unknown: true}, members: -1,
			errors: []string{"kafka 127.0.0.1:19092: list topics: context deadline exceeded (is Kafka up?)"},
			dbs:    []dbStatus{db("finance", 118, 0, func(d *dbStatus) { d.known.kafka, d.Lag, d.TopicExists, d.Newest = false, -1, false, time.Time{} })},
			want: []string{
				"tailer (source primary): checkpoint unknown (see errors); source head 120",
				"applier (group hivedr-applier): members unknown;",
				"finance    118            ?     -        -               -         unknown", "kafka 127.0.0.1:19092: list topics",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := &statusReport{Time: now, Tailer: tt.tailer, Applier: applier, Databases: tt.dbs, Errors: tt.errors, required: map[string]bool{}}
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
			writeStatus(&b, rep)
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
			var back statusReport
			if err := json.Unmarshal(j, &back); err != nil || back.CaughtUp != rep.CaughtUp || len(back.Databases) != len(rep.Databases) {
				t.Errorf("JSON round trip: %v; %s", err, j)
			}
		})
	}
}

func TestStatusFlags(t *testing.T) {
	for _, args := range [][]string{{"-frobnicate"}, {"-config", "/nonexistent/hivedr.yaml"}, {"extra"}, {"-timeout", "0s"}} {
		var out, errb bytes.Buffer
		if code := run(append([]string{"status"}, args...), &out, &errb); code != exitUsage {
			t.Errorf("status %q = %d, want %d (stderr %q)", args, code, exitUsage, errb.String())
		}
	}
	var out, errb bytes.Buffer
	run([]string{"status", "-h"}, &out, &errb)
	for _, f := range []string{"-config", "-json", "-db", "-tailer-wait", "-timeout", "-log-level", "Exit status"} {
		if !strings.Contains(errb.String(), f) {
			t.Errorf("usage lacks %s:\n%s", f, errb.String())
		}
	}
}
