package status

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/schemas"
)

// memRegistry is an in-memory schema registry.
type memRegistry struct {
	mu   sync.Mutex
	byID []string
}

func (r *memRegistry) Register(_ context.Context, _, schema string) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, s := range r.byID {
		if s == schema {
			return i + 1, nil
		}
	}
	r.byID = append(r.byID, schema)
	return len(r.byID), nil
}

func (r *memRegistry) SchemaByID(_ context.Context, id int) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if id < 1 || id > len(r.byID) {
		return "", fmt.Errorf("%w %d", schemas.ErrUnknownSchemaID, id)
	}
	return r.byID[id-1], nil
}

// TestScanTopics reads a real (kfake) topic the way the tailer writes it:
// transactions of events and heartbeats, one aborted in the middle (so the
// offsets just before the commit hold no committed data and the scan reads
// further back), then an event past repl.last.id.
func TestScanTopics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "p.events.finance"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	reg := &memRegistry{}
	serde, err := schemas.NewSerde(ctx, reg)
	if err != nil {
		t.Fatal(err)
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.TransactionalID("tailer"), kgo.DefaultProduceTopic("p.events.finance"))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	t0 := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	ev := func(id int64, at time.Time) *kgo.Record {
		v, err := serde.Encode(&schemas.Event{EventID: id, EventTime: at, EventType: schemas.EventCreateTable, Database: "finance"})
		if err != nil {
			t.Fatal(err)
		}
		return &kgo.Record{Key: []byte(strconv.FormatInt(id, 10)), Value: v, Headers: []kgo.RecordHeader{
			{Key: kafka.HeaderType, Value: []byte(schemas.NameMetastoreEvent)}, {Key: kafka.HeaderEventID, Value: []byte(strconv.FormatInt(id, 10))}}}
	}
	hb := func(scanned, head int64, sent time.Time) *kgo.Record {
		v, err := serde.Encode(&schemas.Heartbeat{Database: "finance", ScannedEventID: scanned, ScannedEventTime: t0, SourceHeadEventID: head, Sent: sent})
		if err != nil {
			t.Fatal(err)
		}
		return &kgo.Record{Key: []byte("heartbeat"), Value: v, Headers: []kgo.RecordHeader{{Key: kafka.HeaderType, Value: []byte(schemas.NameHeartbeat)}}}
	}
	txn := func(commit bool, recs ...*kgo.Record) {
		t.Helper()
		if err := prod.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := prod.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	txn(true, ev(10, t0), hb(10, 10, t0.Add(5*time.Second))) // offsets 0, 1; marker 2
	var aborted []*kgo.Record
	for i := int64(0); i < 20; i++ {
		aborted = append(aborted, ev(11+i, t0.Add(6*time.Second)))
	}
	txn(false, aborted...)                                                      // 3-22; marker 23
	txn(true, ev(11, t0.Add(7*time.Second)), hb(11, 11, t0.Add(8*time.Second))) // 24, 25; marker 26

	adm := kadm.NewClient(prod)
	ends, err := adm.ListCommittedOffsets(ctx, "p.events.finance")
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup("p.events.finance", 0)
	if end.Offset != 27 {
		t.Fatalf("last stable offset %d, want 27", end.Offset)
	}
	dec := schemas.NewDecoder(reg)
	// The applier committed past the aborted transaction and applied event
	// 10: event 11 (offset 24) is not applied, so the heartbeat after it
	// does not count either.
	d := Database{Database: "finance", Topic: "p.events.finance", TopicExists: true, Committed: 24, End: 27, LastEventID: 10}
	d.known.kafka, d.known.dr = true, true
	dbs := []Database{d}
	start := time.Now()
	if errs := scanTopics(ctx, []kgo.Opt{kgo.SeedBrokers(brokers...)}, dec, dbs); len(errs) > 0 {
		t.Fatal(errs)
	}
	// Reading back ends inside the aborted transaction, whose records a
	// read_committed consumer never gets: the scan must see that it is
	// done rather than wait out its budget.
	if took := time.Since(start); took > scanBudget/2 {
		t.Errorf("scan took %s", took)
	}
	got := dbs[0]
	if !got.Complete.Equal(t0.Add(5*time.Second)) || got.LagEvents != 1 || got.LagEventsPartial || got.oldestUnapplied.IsZero() {
		t.Errorf("complete %v (want the first heartbeat's %v), %d events unapplied (want 1), partial %v, oldest %v",
			got.Complete, t0.Add(5*time.Second), got.LagEvents, got.LagEventsPartial, got.oldestUnapplied)
	}
	if got.NewestType != "heartbeat" || got.Newest.IsZero() {
		t.Errorf("newest record %v (%s), want the last heartbeat", got.Newest, got.NewestType)
	}

	// Once the DR has event 11 (not committed yet), the last heartbeat
	// completes the replica: it was sent at the source head.
	dbs = []Database{d}
	dbs[0].LastEventID = 11
	if errs := scanTopics(ctx, []kgo.Opt{kgo.SeedBrokers(brokers...)}, dec, dbs); len(errs) > 0 {
		t.Fatal(errs)
	}
	if got := dbs[0]; !got.Complete.Equal(t0.Add(8*time.Second)) || got.LagEvents != 0 || !got.oldestUnapplied.IsZero() {
		t.Errorf("event 11 applied: complete %v (want %v), %d events unapplied", got.Complete, t0.Add(8*time.Second), got.LagEvents)
	}

	// An unreadable registry: what needs decoding is named, not guessed.
	dbs = []Database{d}
	if errs := scanTopics(ctx, []kgo.Opt{kgo.SeedBrokers(brokers...)}, schemas.NewDecoder(&memRegistry{}), dbs); len(errs) == 0 || !dbs[0].Complete.IsZero() {
		t.Errorf("with no schemas: errors %q, complete %v", errs, dbs[0].Complete)
	}
}

// BenchmarkReadRanges reads the last 16 of 20 records of each of 2,000
// one-partition topics, as status does over 2,000 databases. (Pausing
// each finished topic once a record, not once a poll, took 5.7 s an op
// on the real broker: the client copies its set of paused topics on
// every pause.)
func BenchmarkReadRanges(b *testing.B) {
	const topics, records = 2000, 20
	ctx := context.Background()
	var names []string
	for i := range topics {
		names = append(names, fmt.Sprintf("p.events.db%04d", i))
	}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, names...))
	if err != nil {
		b.Fatal(err)
	}
	defer cluster.Close()
	opts := []kgo.Opt{kgo.SeedBrokers(cluster.ListenAddrs()...)}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		b.Fatal(err)
	}
	var recs []*kgo.Record
	for _, n := range names {
		for j := range records {
			recs = append(recs, &kgo.Record{Topic: n, Value: []byte(strconv.Itoa(j))})
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		b.Fatal(err)
	}
	cl.Close()
	ranges := map[string][2]int64{}
	for _, n := range names {
		ranges[n] = [2]int64{records - 16, records}
	}
	b.ResetTimer()
	for b.Loop() {
		seen := 0
		unfinished := readRanges(ctx, opts, ranges, func(*kgo.Record) bool { seen++; return true })
		if len(unfinished) > 0 || seen != topics*16 {
			b.Fatalf("read %d records, %d topics unfinished; want %d, none", seen, len(unfinished), topics*16)
		}
	}
}
