package producer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/hmslog"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/schemas"
	"github.com/hivedr/hivedr/schemas/schematest"
)

// memSource is a notification log in memory.
type memSource struct {
	mu  sync.Mutex
	evs []hmslog.RawEvent
}

func (s *memSource) add(db string, typ schemas.EventType) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := int64(len(s.evs) + 1)
	if len(s.evs) > 0 {
		id = s.evs[len(s.evs)-1].EventID + 1
	}
	s.evs = append(s.evs, hmslog.RawEvent{EventID: id, EventTime: 1_700_000_000 + id, EventType: typ, Catalog: "hive",
		Database: db, MessageFormat: "json-0.2", Message: `{"db":"` + db + `"}`})
}

func (s *memSource) purge(upTo int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.evs) > 0 && s.evs[0].EventID <= upTo {
		s.evs = s.evs[1:]
	}
}

func (s *memSource) Head(context.Context) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.evs) == 0 {
		return 0, nil
	}
	return s.evs[len(s.evs)-1].EventID, nil
}

func (s *memSource) Next(_ context.Context, after int64, max int) ([]hmslog.RawEvent, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []hmslog.RawEvent
	for _, e := range s.evs {
		if e.EventID > after && len(out) < max {
			out = append(out, e)
		}
	}
	return out, nil
}

func (s *memSource) Databases(context.Context) ([]string, error) { return []string{"sales", "hr"}, nil }
func (s *memSource) Close() error                                { return nil }

type fixture struct {
	cluster *kfake.Cluster
	conf    *config.Config
	src     *memSource
	serde   *schemas.Serde
	opts    []kgo.Opt
	txns    TxnWrites // nil: none
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	conf := config.Default()
	conf.Kafka.Brokers = cluster.ListenAddrs()
	conf.Kafka.ManifestPartitions = 2
	conf.Tailer.BatchSize = 7
	conf.Tailer.PollInterval = config.Duration{Duration: 10 * time.Millisecond}
	conf.Tailer.HeartbeatInterval = config.Duration{Duration: time.Hour}
	conf.Tailer.StartEventID = "earliest"
	conf.Replication.Databases = []config.DatabasePolicy{{Name: "sales"}}
	if err := conf.Validate(); err != nil {
		t.Fatal(err)
	}
	serde, err := schemas.NewSerde(context.Background(), &schematest.Registry{})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{cluster: cluster, conf: conf, src: &memSource{}, serde: serde}
}

// run runs a tailer until the checkpoint reaches upTo or it fails.
func (f *fixture) run(t *testing.T, upTo int64) error {
	t.Helper()
	return f.runTailer(t, f.tailer(t), upTo)
}

func (f *fixture) tailer(t *testing.T) *Tailer {
	t.Helper()
	tl, err := New(withConf(f.conf, Config{Source: f.src, Codec: f.serde, Txns: f.txns, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

// runTailer runs tl until the checkpoint reaches upTo or it fails.
func (f *fixture) runTailer(t *testing.T, tl *Tailer, upTo int64) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- tl.Run(ctx) }()
	for {
		select {
		case err := <-done:
			return err
		case <-time.After(20 * time.Millisecond):
		}
		if got := readGauge(tl); got >= upTo {
			cancel()
			return <-done
		}
		if ctx.Err() != nil {
			t.Fatalf("tailer did not reach event %d (at %d)", upTo, readGauge(tl))
		}
	}
}

// readGauge is the race-free view of the tailer's checkpoint.
func readGauge(tl *Tailer) int64 { return int64(testutil.ToFloat64(tl.m.lastPublished)) }

func (f *fixture) eventIDs(t *testing.T, db string) []int64 {
	t.Helper()
	ctx := context.Background()
	topic := kafka.Topics{Prefix: f.conf.Kafka.TopicPrefix}.Events(db)
	recs := f.read(t, topic)
	var ids []int64
	for _, r := range recs {
		v, err := f.serde.Decode(ctx, r.Value)
		if err != nil {
			t.Fatal(err)
		}
		if ev, ok := v.(*schemas.Event); ok {
			if k, _ := strconv.ParseInt(string(r.Key), 10, 64); k != ev.EventID {
				t.Errorf("record key %q, event id %d", r.Key, ev.EventID)
			}
			ids = append(ids, ev.EventID)
		}
	}
	return ids
}

// event reads the event with this ID from a database's topic.
func (f *fixture) event(t *testing.T, db string, id int64) *schemas.Event {
	t.Helper()
	for _, r := range f.read(t, kafka.Topics{Prefix: f.conf.Kafka.TopicPrefix}.Events(db)) {
		v, err := f.serde.Decode(context.Background(), r.Value)
		if err != nil {
			t.Fatal(err)
		}
		if ev, ok := v.(*schemas.Event); ok && ev.EventID == id {
			return ev
		}
	}
	t.Fatalf("no event %d on the topic of %s", id, db)
	return nil
}

func TestTailerResumesFromCheckpointWithoutDuplicates(t *testing.T) {
	f := newFixture(t)
	for i := 0; i < 30; i++ {
		db := "sales"
		if i%3 == 0 {
			db = "hr" // out of scope: filtered, but still moves the checkpoint
		}
		f.src.add(db, schemas.EventCreateDatabase)
	}
	if err := f.run(t, 30); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 12; i++ {
		f.src.add("sales", schemas.EventCreateDatabase)
	}
	if err := f.run(t, 42); err != nil {
		t.Fatal(err)
	}
	ids := f.eventIDs(t, "sales")
	var want []int64
	for id := int64(1); id <= 42; id++ {
		if id > 30 || (id-1)%3 != 0 {
			want = append(want, id)
		}
	}
	if fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Fatalf("sales topic has events %v, want %v", ids, want)
	}
}

// TestTailerEndsATransactionKafkaLeftOpen: Kafka goes away while the
// tailer commits (EndTxn gets no answer, three times: the commit, the
// abort right after it, the abort at the next step). The client stays in
// that transaction until an abort confirms its end; the tailer aborts it
// at its next step and goes on, every event published once. Before, every
// step failed from then on ("already in a transaction").
func TestTailerEndsATransactionKafkaLeftOpen(t *testing.T) {
	f := newFixture(t)
	for range 10 {
		f.src.add("sales", schemas.EventCreateDatabase)
	}
	var mu sync.Mutex
	failed := 0
	f.cluster.ControlKey(int16(kmsg.EndTxn), func(kmsg.Request) (kmsg.Response, error, bool) {
		mu.Lock()
		defer mu.Unlock()
		if failed == 3 {
			return nil, nil, false
		}
		f.cluster.KeepControl()
		failed++
		return nil, errors.New("kafka went away"), true
	})
	if err := f.run(t, 10); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if failed != 3 {
		t.Errorf("%d EndTxn requests failed, want 3", failed)
	}
	mu.Unlock()
	if ids := f.eventIDs(t, "sales"); fmt.Sprint(ids) != fmt.Sprint([]int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}) {
		t.Fatalf("sales topic has events %v, want 1..10 once each", ids)
	}
}

// TestTailerFencedByCoordinator: the producer is fenced by a client that
// writes no checkpoint, as the transaction coordinator fences it when it
// ends a transaction the client lost track of across a broker restart
// (the soak found the tailer exiting on that). The tailer, having written
// the newest checkpoint itself, replaces its producer, resumes from the
// checkpoint Kafka holds and publishes every event once.
func TestTailerFencedByCoordinator(t *testing.T) {
	f := newFixture(t)
	for range 20 {
		f.src.add("sales", schemas.EventCreateDatabase)
	}
	tl := f.tailer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- tl.Run(ctx) }()
	poll := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			select {
			case err := <-done:
				t.Fatalf("the tailer stopped before %s: %v", what, err)
			case <-ctx.Done():
				t.Fatalf("timed out waiting for %s (checkpoint %d)", what, readGauge(tl))
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	poll("the first 20 events", func() bool { return readGauge(tl) >= 20 })
	// The fence: a client of the same transactional ID initialises its
	// producer ID (bumping the epoch) and writes nothing.
	fence, err := kgo.NewClient(kgo.SeedBrokers(f.conf.Kafka.Brokers...), kgo.TransactionalID(f.conf.Tailer.TransactionalID))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := fence.ProducerID(ctx); err != nil {
		t.Fatal(err)
	}
	fence.Close()
	for range 20 { // the next transaction meets the fence
		f.src.add("sales", schemas.EventCreateDatabase)
	}
	poll("all 40 events", func() bool { return readGauge(tl) >= 40 })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("tailer: %v", err)
	}
	if n := testutil.ToFloat64(tl.m.errors); n < 1 {
		t.Errorf("the tailer counted %v failed steps; the fence must have failed one", n)
	}
	want := make([]int64, 40)
	for i := range want {
		want[i] = int64(i + 1)
	}
	if ids := f.eventIDs(t, "sales"); fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Fatalf("sales topic has events %v, want 1..40 once each", ids)
	}
}

// TestTailerStopsForAnotherTailer: a second tailer with the same
// transactional ID starts beside the first. Exactly one of them goes on:
// the one fenced after the other committed finds the newest checkpoint
// written by the other and stops with AnotherTailerError instead of
// fencing it back (which of the two depends on who commits first). Every
// event is published once.
func TestTailerStopsForAnotherTailer(t *testing.T) {
	f := newFixture(t)
	for range 10 {
		f.src.add("sales", schemas.EventCreateDatabase)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tls := []*Tailer{f.tailer(t), f.tailer(t)}
	done := []chan error{make(chan error, 1), make(chan error, 1)}
	go func() { done[0] <- tls[0].Run(ctx) }()
	for readGauge(tls[0]) < 10 && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	go func() { done[1] <- tls[1].Run(ctx) }()
	// Events keep coming until one tailer stops: a tailer learns of a
	// fence only at its next transaction, and one that read the newest
	// checkpoint while the other was committing takes over once (its
	// initialisation waits for that commit, and it resumes after it);
	// whichever is fenced after the other's next commit stops.
	var (
		stopped  = -1
		stopErr  error
		survivor *Tailer
		added    = int64(10)
	)
	for stopped < 0 || readGauge(survivor) < added {
		select {
		case err := <-done[0]:
			stopped, stopErr, survivor = 0, err, tls[1]
		case err := <-done[1]:
			stopped, stopErr, survivor = 1, err, tls[0]
		case <-ctx.Done():
			t.Fatalf("no tailer stopped with the other at event %d (tailers at %d and %d)", added, readGauge(tls[0]), readGauge(tls[1]))
		case <-time.After(20 * time.Millisecond):
			if stopped < 0 {
				f.src.add("sales", schemas.EventCreateDatabase)
				added++
			}
		}
	}
	t.Logf("tailer %d stopped after %d events", stopped, added)
	var other *AnotherTailerError
	if !errors.As(stopErr, &other) || other.Writer != survivor.writer || other.Self != tls[stopped].writer {
		t.Fatalf("tailer %d stopped with %v; want AnotherTailerError naming the other (%s)", stopped, stopErr, survivor.writer)
	}
	if !strings.Contains(stopErr.Error(), "another tailer with transactional ID") {
		t.Errorf("error %q does not say another tailer took over", stopErr)
	}
	cancel()
	if err := <-done[1-stopped]; err != nil {
		t.Fatalf("the tailer that went on: %v", err)
	}
	want := make([]int64, added)
	for i := range want {
		want[i] = int64(i + 1)
	}
	if ids := f.eventIDs(t, "sales"); fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Fatalf("sales topic has events %v, want 1..%d once each", ids, added)
	}
}

func TestTailerStopsOnPurgedLog(t *testing.T) {
	f := newFixture(t)
	for i := 0; i < 10; i++ {
		f.src.add("sales", schemas.EventCreateDatabase)
	}
	if err := f.run(t, 10); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		f.src.add("sales", schemas.EventCreateDatabase)
	}
	f.src.purge(14) // events 11..14 are gone while the tailer is stopped
	err := f.run(t, 20)
	var gap *GapError
	if !errors.Is(err, ErrChainBroken) || !errors.As(err, &gap) || gap.Checkpoint != 10 || gap.Found != 15 {
		t.Fatalf("err = %v; want a CHAIN_BROKEN gap after checkpoint 10 finding 15", err)
	}
	if ids := f.eventIDs(t, "sales"); len(ids) != 10 {
		t.Fatalf("events after the gap were published: %v", ids)
	}
}

// chainOf reads a database topic and returns, for every event and
// heartbeat record in offset order, its event ID (0 for a heartbeat) and
// its previous_event_id (-1 when absent).
func (f *fixture) chainOf(t *testing.T, db string) (ids, prevs []int64) {
	t.Helper()
	ctx := context.Background()
	topic := kafka.Topics{Prefix: f.conf.Kafka.TopicPrefix}.Events(db)
	recs := f.read(t, topic)
	for _, r := range recs {
		v, err := f.serde.Decode(ctx, r.Value)
		if err != nil {
			t.Fatal(err)
		}
		var id int64
		var prev *int64
		switch x := v.(type) {
		case *schemas.Event:
			id, prev = x.EventID, x.PreviousEventID
		case *schemas.Heartbeat:
			prev = x.PreviousEventID
		default:
			t.Fatalf("%s@%d: unexpected %T", topic, r.Offset, v)
		}
		p := int64(-1)
		if prev != nil {
			p = *prev
		}
		ids, prevs = append(ids, id), append(prevs, p)
	}
	return ids, prevs
}

// checkChain fails unless every record names the event before it on the
// topic (first 0), heartbeats included.
func checkChain(t *testing.T, db string, ids, prevs []int64) {
	t.Helper()
	var last int64
	events := 0
	for i := range ids {
		if prevs[i] != last {
			t.Fatalf("%s record %d (event %d): previous_event_id %d, want %d\nids   %v\nprevs %v", db, i, ids[i], prevs[i], last, ids, prevs)
		}
		if ids[i] != 0 {
			last = ids[i]
			events++
		}
	}
	if events == 0 {
		t.Fatalf("%s: no events on the topic", db)
	}
}

func TestTailerChainsEachTopic(t *testing.T) {
	f := newFixture(t)
	f.conf.Replication.Databases = []config.DatabasePolicy{{Name: "sales"}, {Name: "hr"}}
	f.conf.Tailer.HeartbeatInterval = config.Duration{Duration: time.Millisecond}
	f.conf.Tailer.HeartbeatRate = 0 // to every database every round
	if err := f.conf.Validate(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		db := "sales"
		if i%3 == 0 {
			db = "hr"
		}
		f.src.add(db, schemas.EventCreateDatabase)
	}
	if err := f.run(t, 20); err != nil {
		t.Fatal(err)
	}
	// A restart resumes each chain from the checkpoint.
	for i := 0; i < 9; i++ {
		f.src.add([]string{"sales", "hr", "sales"}[i%3], schemas.EventCreateDatabase)
	}
	if err := f.run(t, 29); err != nil {
		t.Fatal(err)
	}
	// A tailer with no checkpoint (another source name, so another
	// checkpoint key; the same transactional ID, so it fences the last run
	// and aborts what it left open) over the same topics continues each
	// chain from the topic's newest records.
	f.conf.Source.Name = "fresh"
	f.conf.Tailer.StartEventID = "29"
	if err := f.conf.Validate(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 6; i++ {
		f.src.add([]string{"hr", "sales"}[i%2], schemas.EventCreateDatabase)
	}
	if err := f.run(t, 35); err != nil {
		t.Fatal(err)
	}
	for _, db := range []string{"sales", "hr"} {
		ids, prevs := f.chainOf(t, db)
		checkChain(t, db, ids, prevs)
		if last := ids[len(ids)-1]; last == 0 && prevs[len(prevs)-1] < 30 || last != 0 && last < 30 {
			t.Errorf("%s: the fresh tailer's events are missing: %v", db, ids)
		}
	}
}

func TestTailerRecordsChainBrokenInCheckpoint(t *testing.T) {
	f := newFixture(t)
	for i := 0; i < 5; i++ {
		f.src.add("sales", schemas.EventCreateDatabase)
	}
	if err := f.run(t, 5); err != nil {
		t.Fatal(err)
	}
	f.src.add("sales", schemas.EventCreateDatabase)
	f.src.add("sales", schemas.EventCreateDatabase)
	f.src.purge(6)
	if err := f.run(t, 7); !errors.Is(err, ErrChainBroken) {
		t.Fatalf("err = %v, want CHAIN_BROKEN", err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.conf.Kafka.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	cp, _, ok, err := readCheckpoint(context.Background(), cl, kafka.Topics{Prefix: f.conf.Kafka.TopicPrefix}.Checkpoints(),
		f.conf.Source.Name, f.serde, []kgo.Opt{kgo.SeedBrokers(f.conf.Kafka.Brokers...)})
	if err != nil || !ok {
		t.Fatalf("read checkpoint: %v, found %v", err, ok)
	}
	if cp.State != schemas.StateChainBroken || cp.LastEventID != 5 || cp.TopicLastEventIDs["sales"] != 5 {
		t.Fatalf("last checkpoint %+v, want state %s at event 5 with the sales chain at 5", cp, schemas.StateChainBroken)
	}
}

// withConf is cfg with c's sections.
func withConf(c *config.Config, cfg Config) Config {
	cfg.Origin, cfg.Kafka, cfg.Tailer, cfg.Replication = c.Source, c.Kafka, c.Tailer, c.Replication
	return cfg
}

// TestTailerLoopGauge: the main loop marks
// hivedr_tailer_loop_timestamp_seconds on every round, idle ones too (the
// log has nothing new), so /healthz sees it alive.
func TestTailerLoopGauge(t *testing.T) {
	f := newFixture(t)
	tl := f.tailer(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tl.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	loop := tl.m.loop.Collector()
	waitGauge(t, "a first round", func(v float64) bool { return v > 0 }, loop)
	first := testutil.ToFloat64(loop)
	if now := float64(time.Now().UnixNano()) / 1e9; now-first > 60 || first > now {
		t.Errorf("loop gauge %f, want about now (%f)", first, now)
	}
	waitGauge(t, "the idle loop to go round again", func(v float64) bool { return v > first }, loop)
}

// waitGauge polls the single-gauge collector g until cond holds, for up
// to 10s.
func waitGauge(t *testing.T, what string, cond func(float64) bool, g prometheus.Collector) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond(testutil.ToFloat64(g)) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s (gauge %f)", what, testutil.ToFloat64(g))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
