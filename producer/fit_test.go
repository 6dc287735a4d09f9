package producer

import (
	"context"
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
