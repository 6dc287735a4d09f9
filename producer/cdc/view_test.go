package cdc

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/schemas"
	"github.com/hivedr/hivedr/schemas/schematest"
)

// viewRig is a fake Kafka cluster with an event topic per database, the
// serde the tailer writes with and the view's codec.
type viewRig struct {
	t      *testing.T
	opts   []kgo.Opt
	topics kafka.Topics
	serde  *schemas.Serde
	codec  *Codec
	reg    *schematest.Registry
	prod   *kgo.Client
	nextID int64
}

func newViewRig(t *testing.T, dbs ...string) *viewRig {
	t.Helper()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	r := &viewRig{t: t, opts: []kgo.Opt{kgo.SeedBrokers(cluster.ListenAddrs()...)}, topics: kafka.Topics{Prefix: "p"},
		reg: &schematest.Registry{}, nextID: 100}
	if r.serde, err = schemas.NewSerde(context.Background(), r.reg); err != nil {
		t.Fatal(err)
	}
	if r.codec, err = NewCodec(r.reg); err != nil {
		t.Fatal(err)
	}
	if r.prod, err = kgo.NewClient(r.opts...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.prod.Close)
	for _, db := range dbs {
		if _, err := kadm.NewClient(r.prod).CreateTopic(context.Background(), 1, 1, nil, r.topics.Events(db)); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// publish writes events to db's topic as the tailer would, each with the
// next event ID.
func (r *viewRig) publish(db string, evs ...*schemas.Event) {
	r.t.Helper()
	for _, e := range evs {
		if e.EventID == 0 {
			e.EventID = r.nextID
			r.nextID++
		}
		e.EventTime, e.Source = time.Unix(e.EventID, 0), "src"
		v, err := r.serde.Encode(e)
		if err != nil {
			r.t.Fatal(err)
		}
		if err := r.prod.ProduceSync(context.Background(), &kgo.Record{Topic: r.topics.Events(db), Value: v}).FirstErr(); err != nil {
			r.t.Fatal(err)
		}
	}
}

func (r *viewRig) beat(db string) {
	r.t.Helper()
	v, err := r.serde.Encode(&schemas.Heartbeat{Database: db, ScannedEventID: r.nextID - 1, Source: "src", Sent: time.Now()})
	if err != nil {
		r.t.Fatal(err)
	}
	if err := r.prod.ProduceSync(context.Background(), &kgo.Record{Topic: r.topics.Events(db), Value: v}).FirstErr(); err != nil {
		r.t.Fatal(err)
	}
}

// run starts a view; stop ends it and returns Run's error.
func (r *viewRig) run() (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	v := New(Config{Topics: r.topics, Source: "src", Version: "test", KafkaOpts: r.opts, Events: r.serde, Codec: r.codec,
		ReplicationFactor: 1})
	done := make(chan error, 1)
	go func() { done <- v.Run(ctx) }()
	return func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			r.t.Fatal("the view did not stop within 30s of its context's end")
			return nil
		}
	}
}

// read returns the committed records of topic as "op key" lines
// ("- key" for a tombstone), waiting until there are at least n.
func (r *viewRig) read(topic string, n int) []string {
	r.t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var out []string
		ends, err := kadm.NewClient(r.prod).ListEndOffsets(ctx, topic)
		if err != nil {
			r.t.Fatal(err)
		}
		var end int64
		if o, ok := ends.Lookup(topic, 0); ok && o.Err == nil {
			end, err = kafka.CommittedEnd(ctx, r.prod, topic, 0)
		}
		if err == nil && end > 0 {
			recs, err := kafka.ReadCommitted(ctx, r.opts, topic, 0, 0, end)
			if err != nil {
				r.t.Fatal(err)
			}
			for _, rec := range recs {
				d, err := r.codec.Decode(ctx, rec.Key, rec.Value)
				if err != nil {
					r.t.Fatalf("%s at %d: %v", topic, rec.Offset, err)
				}
				k := d.Key.Database + "." + d.Key.Table + "/" + d.Key.Partition
				if d.Tombstone {
					out = append(out, "- "+k)
				} else {
					out = append(out, string(d.Op)+" "+k)
				}
			}
		}
		if len(out) >= n {
			return out
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("%s holds %d records after 30s, want %d: %v", topic, len(out), n, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestViewExactlyOnceAcrossRestart(t *testing.T) {
	r := newViewRig(t, "s")
	a := tbl("s", "a", partKeys...)
	r.publish("s", createDB("s"), createTable(a), addParts(a, "1", "2"))
	stop := r.run()
	first := []string{"c s./", "c s.a/", "c s.a/d=1", "c s.a/d=2"}
	if got := r.read(r.topics.CDC("s"), len(first)); !slices.Equal(got, first) {
		t.Fatalf("before the restart: %v, want %v", got, first)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// The new view knows the partitions only from its topic: the drop
	// must delete them all the same.
	r.publish("s", dropTable(a))
	r.beat("s")
	stop = r.run()
	defer stop()
	want := append(first, "d s.a/d=1", "- s.a/d=1", "d s.a/d=2", "- s.a/d=2", "d s.a/", "- s.a/")
	if got := r.read(r.topics.CDC("s"), len(want)); !slices.Equal(got, want) {
		t.Fatalf("after the restart:\n got %v\nwant %v", got, want)
	}
	// Nothing more comes (each record once).
	time.Sleep(300 * time.Millisecond)
	if got := r.read(r.topics.CDC("s"), len(want)); len(got) != len(want) {
		t.Fatalf("%d records, want %d: %v", len(got), len(want), got)
	}
	beats, err := kafka.ReadCommitted(context.Background(), r.opts, r.topics.CDCHeartbeats(), 0, 0, 1)
	if err != nil || len(beats) != 1 || string(beats[0].Key) != "s" {
		t.Fatalf("heartbeats: %v, err %v", beats, err)
	}
	ids, compat := r.reg.Subjects()
	for _, s := range []string{"p.cdc.s-key", "p.cdc.s-value", "p.cdc-heartbeats-value"} {
		if len(ids[s]) != 1 || compat[s] != schemas.Compatibility {
			t.Errorf("subject %s: ids %v, compatibility %q", s, ids[s], compat[s])
		}
	}
}

func TestViewStopsAtARecordItCannotRead(t *testing.T) {
	r := newViewRig(t, "s")
	r.publish("s", createDB("s"))
	// A record whose schema ID the registry does not know.
	bad := []byte{0, 0, 0, 0x7f, 0x7f, 1, 2}
	if err := r.prod.ProduceSync(context.Background(), &kgo.Record{Topic: r.topics.Events("s"), Value: bad}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	v := New(Config{Topics: r.topics, Source: "src", KafkaOpts: r.opts, Events: r.serde, Codec: r.codec, ReplicationFactor: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := v.Run(ctx)
	var fe *FatalError
	if !errorsAs(err, &fe) || fe.Topic != r.topics.Events("s") || fe.Offset != 1 {
		t.Fatalf("Run = %v, want a FatalError at %s offset 1", err, r.topics.Events("s"))
	}
	if !strings.Contains(err.Error(), "offset 1") {
		t.Errorf("error %q does not name the offset", err)
	}
	// The group's offset stays at or before the bad record: the view
	// goes no further until it is read.
	adm := kadm.NewClient(r.prod)
	offs, err := adm.FetchOffsets(context.Background(), r.topics.CDCGroup())
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup(r.topics.Events("s"), 0); ok && o.At > 1 {
		t.Errorf("the view's group committed offset %d, past the bad record at 1", o.At)
	}
}

func errorsAs(err error, target **FatalError) bool { return errors.As(err, target) }

// TestViewRenameAcrossWaitsForBothCopies publishes a table's rename into
// another database on the new database's topic before the old database's
// topic has the events before it: the view must not write the new side
// until the old database's topic reaches the rename, or the renamed table
// would lack the partition added just before.
func TestViewRenameAcrossWaitsForBothCopies(t *testing.T) {
	r := newViewRig(t, "s", "o")
	a, moved := tbl("s", "a", partKeys...), tbl("o", "a", partKeys...)
	create, add, rename := createTable(a), addParts(a, "1"), alterTable(a, moved)
	create.EventID, add.EventID, rename.EventID = 100, 101, 102
	create.Databases, add.Databases, rename.Databases = []string{"s"}, []string{"s"}, []string{"s", "o"}
	r.publish("s", create)
	r.publish("o", rename)
	stop := r.run()
	defer stop()
	if got := r.read(r.topics.CDC("s"), 1); !slices.Equal(got, []string{"c s.a/"}) {
		t.Fatalf("s before the rest: %v", got)
	}
	time.Sleep(500 * time.Millisecond) // the rename's copy on o must wait meanwhile
	ends, err := kadm.NewClient(r.prod).ListEndOffsets(context.Background(), r.topics.CDC("o"))
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := ends.Lookup(r.topics.CDC("o"), 0); ok && o.Err == nil && o.Offset > 0 {
		t.Fatalf("the view wrote o's side of the rename before s's topic reached it (%d records)", o.Offset)
	}
	r.publish("s", add, rename)
	wantO := []string{"c o.a/", "c o.a/d=1"}
	if got := r.read(r.topics.CDC("o"), len(wantO)); !slices.Equal(got, wantO) {
		t.Fatalf("o: got %v, want %v", got, wantO)
	}
	wantS := []string{"c s.a/", "c s.a/d=1", "d s.a/d=1", "- s.a/d=1", "d s.a/", "- s.a/"}
	if got := r.read(r.topics.CDC("s"), len(wantS)); !slices.Equal(got, wantS) {
		t.Fatalf("s: got %v, want %v", got, wantS)
	}
}
