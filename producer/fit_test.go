package producer

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/hmslog"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/schemas"
)

// TestTailerRecordTooLarge: with topics that take 64 KiB, an event of
// sales whose record is larger is published without its payload and
// message, with RECORD_TOO_LARGE naming its event, type and size; the
// events after it, of sales and of hr, are published whole: nothing
// stalls. The topics are created with max.message.bytes.
func TestTailerRecordTooLarge(t *testing.T) {
	f := newFixture(t)
	f.conf.Kafka.MaxMessageBytes = 64 << 10
	f.conf.Replication.Databases = []config.DatabasePolicy{{Name: "sales"}, {Name: "hr"}}
	f.src.add("sales", schemas.EventCreateDatabase)
	f.src.add("hr", schemas.EventCreateDatabase)
	f.src.mu.Lock()
	f.src.evs = append(f.src.evs, hmslog.RawEvent{EventID: 3, EventTime: 1_700_000_003, EventType: schemas.EventAlterDatabase, Catalog: "hive",
		Database: "sales", MessageFormat: "json-0.2", Message: `{"db":"sales","blob":"` + strings.Repeat("x", 100<<10) + `"}`})
	f.src.mu.Unlock()
	f.src.add("sales", schemas.EventAlterDatabase)
	f.src.add("hr", schemas.EventAlterDatabase)
	if err := f.run(t, 5); err != nil {
		t.Fatal(err)
	}
	if got := f.eventIDs(t, "sales"); len(got) != 3 || got[0] != 1 || got[1] != 3 || got[2] != 4 {
		t.Errorf("sales topic has events %v, want [1 3 4]", got)
	}
	if got := f.eventIDs(t, "hr"); len(got) != 2 || got[0] != 2 || got[1] != 5 {
		t.Errorf("hr topic has events %v, want [2 5]", got)
	}
	ev := f.event(t, "sales", 3)
	if len(ev.Errors) == 0 || ev.Errors[0].Kind != schemas.ErrRecordTooLarge || ev.Message != "" {
		t.Fatalf("event 3: errors %v, message of %d bytes; want RECORD_TOO_LARGE first and no message", ev.Errors, len(ev.Message))
	}
	for _, want := range []string{"event 3 (ALTER_DATABASE)", "database sales", "over kafka.max_message_bytes 65536"} {
		if !strings.Contains(ev.Errors[0].Message, want) {
			t.Errorf("RECORD_TOO_LARGE message %q lacks %q", ev.Errors[0].Message, want)
		}
	}
	if ev := f.event(t, "sales", 4); len(ev.Errors) > 0 && ev.Errors[0].Kind == schemas.ErrRecordTooLarge || ev.Message == "" {
		t.Errorf("event 4 after the large one: errors %v, message %q; want it whole", ev.Errors, ev.Message)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(f.conf.Kafka.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	topics := kafka.Topics{Prefix: f.conf.Kafka.TopicPrefix}
	cfgs, err := kadm.NewClient(cl).DescribeTopicConfigs(context.Background(), topics.Events("sales"), topics.Manifests(), topics.Checkpoints())
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range cfgs {
		got := ""
		for _, c := range rc.Configs {
			if c.Key == "max.message.bytes" {
				got = c.MaybeValue()
			}
		}
		if rc.Err != nil || got != "65536" {
			t.Errorf("topic %s: max.message.bytes %q (%v), want 65536", rc.Name, got, rc.Err)
		}
	}
}

// TestRecordBytes: the size fit compares is never below what the record
// holds.
func TestRecordBytes(t *testing.T) {
	r := &kgo.Record{Key: []byte("12"), Value: make([]byte, 1000), Headers: []kgo.RecordHeader{{Key: "hivedr.type", Value: []byte("x")}}}
	if n := recordBytes(r); n < 1000+2+len("hivedr.type")+1+61 {
		t.Errorf("recordBytes = %d, below the record's own bytes and a batch header", n)
	}
}

// wideLister lists n files under directories ending in wide, one file
// under the others.
type wideLister struct {
	wide string
	n    int
}

func (l wideLister) Walk(_ context.Context, dir string, fn func(string, int64) error) error {
	if !strings.HasSuffix(dir, l.wide) {
		return fn(dir+"/000000_0", 10)
	}
	for i := range l.n {
		if err := fn(fmt.Sprintf("%s/part-%05d-0f8e3c2a-6d41-4b7e-9a55-2c1d0e9b7f13.c000", dir, i), 10); err != nil {
			return err
		}
	}
	return nil
}

// TestBootstrapRecordTooLarge: a bootstrap's PARTITION record of a
// partition of 3,000 files, over 64 KiB, is published without its files,
// RECORD_TOO_LARGE naming the bootstrap's record; the bootstrap publishes
// its other records whole and ends, and hr's events go on meanwhile.
func TestBootstrapRecordTooLarge(t *testing.T) {
	f := newBootFixture(t)
	f.conf.Kafka.MaxMessageBytes = 64 << 10
	f.conf.Replication.Databases = []config.DatabasePolicy{{Name: "sales"}, {Name: "hr"}}
	f.snaps.addTable(thriftTable("sales", "b", "ds"), 4)
	f.src.add("sales", schemas.EventCreateDatabase)
	tl, err := New(withConf(f.conf, Config{Source: f.src, Codec: f.serde, Snapshots: f.snaps, Lister: wideLister{wide: "/ds=002", n: 3000},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	if err != nil {
		t.Fatal(err)
	}
	if err := tl.start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := drive(t, tl, func() bool { return tl.checkpoint == 1 }); err != nil {
		t.Fatal(err)
	}
	f.request(t, schemas.BootstrapRequest{RequestID: "r1", Databases: []string{"sales"}})
	if err := drive(t, tl, func() bool { return len(tl.boots) == 1 }); err != nil {
		t.Fatal(err)
	}
	f.src.add("hr", schemas.EventCreateDatabase) // 2
	if err := drive(t, tl, func() bool { return len(tl.boots) == 0 && tl.checkpoint == 2 }); err != nil {
		t.Fatal(err)
	}
	recs := f.topic(t, "sales")
	if got, want := describe(recs), "1 B T:b P:b*4 E"; got != want {
		t.Fatalf("sales topic: %s, want %s", got, want)
	}
	for _, r := range recs {
		if r.ev.EventType != schemas.EventSnapshotPartition {
			continue
		}
		c, _ := r.ev.Payload.(*schemas.PartitionChange)
		tooLarge := len(r.ev.Errors) > 0 && r.ev.Errors[0].Kind == schemas.ErrRecordTooLarge
		switch wide := r.ev.Snapshot.Seq == 4; {
		case wide && (!tooLarge || c != nil || len(r.ev.Files) != 0):
			t.Errorf("record %d of the wide partition: errors %v, payload %v, %d files; want RECORD_TOO_LARGE alone", r.ev.Snapshot.Seq, r.ev.Errors, c, len(r.ev.Files))
		case wide && !strings.Contains(r.ev.Errors[0].Message, "HIVEDR_SNAPSHOT_PARTITION record 4 of bootstrap "+r.ev.Snapshot.BootstrapID):
			t.Errorf("RECORD_TOO_LARGE message %q does not name the record", r.ev.Errors[0].Message)
		case !wide && (tooLarge || c == nil || len(r.ev.Files) != 1):
			t.Errorf("record %d: errors %v, payload %v, %d files; want it whole", r.ev.Snapshot.Seq, r.ev.Errors, c, len(r.ev.Files))
		}
	}
	if got := describe(f.topic(t, "hr")); got != "2" {
		t.Errorf("hr topic: %s, want 2", got)
	}
}

// TestTailerTopicTakesLess: a topic created before, taking less than
// kafka.max_message_bytes, refuses a record under it; the error says
// what to raise rather than only what the broker answered.
func TestTailerTopicTakesLess(t *testing.T) {
	f := newFixture(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.conf.Kafka.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	topic := kafka.Topics{Prefix: f.conf.Kafka.TopicPrefix}.Events("sales")
	if _, err := kafka.Ensure(context.Background(), kadm.NewClient(cl), kafka.Spec{Name: topic, Partitions: 1, ReplicationFactor: 1, MaxMessageBytes: 70_000}); err != nil {
		t.Fatal(err)
	}
	f.src.mu.Lock()
	f.src.evs = append(f.src.evs, hmslog.RawEvent{EventID: 1, EventTime: 1_700_000_001, EventType: schemas.EventAlterDatabase, Catalog: "hive",
		Database: "sales", MessageFormat: "json-0.2", Message: `{"db":"sales","blob":"` + randomText(100<<10) + `"}`})
	f.src.mu.Unlock()
	tl := f.tailer(t)
	if err := tl.start(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, err = tl.step(context.Background())
	if err == nil || !strings.Contains(err.Error(), "MESSAGE_TOO_LARGE") || !strings.Contains(err.Error(), "raise its max.message.bytes") ||
		!strings.Contains(err.Error(), topic) {
		t.Fatalf("step = %v; want MESSAGE_TOO_LARGE naming %s and what to raise", err, topic)
	}
}

// randomText is n characters no compression shrinks much.
func randomText(n int) string {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + r.IntN(26))
	}
	return string(b)
}
