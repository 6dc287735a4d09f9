package bootstrap

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/schemas"
)

// memRegistry is an in-memory schemas.Registry.
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

// TestWriteAndFollow writes a request to a kfake cluster (creating the
// control topic), plays the tailer's and copyd's side on the checkpoints
// and completions topics, and the applier's on a fake DR, and follows
// the request to its end.
func TestWriteAndFollow(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topics := kafka.Topics{Prefix: "p"}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topics.Checkpoints()), kfake.SeedTopics(2, topics.Completions()))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	opts := []kgo.Opt{kgo.SeedBrokers(cluster.ListenAddrs()...)}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	reg := &memRegistry{}
	serde, err := schemas.NewSerde(ctx, reg)
	if err != nil {
		t.Fatal(err)
	}
	produce := func(topic string, key string, v any) {
		t.Helper()
		b, err := serde.Encode(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(key), Value: b}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// An old checkpoint and an old completion of another bootstrap of the
	// database: before the marks, never counted.
	produce(topics.Checkpoints(), "primary", cp(0, state(schemas.PhaseSnapshot, 1, 1, 1, 1, 1)))
	produce(topics.Completions(), bid+"-s1-0", completion(bid+"-s1-0", schemas.StatusCopied, 1000))

	k := config.Default().Kafka
	k.ReplicationFactor = 1
	r := Request(Options{Databases: []string{"finance"}}, "primary", "ops@h", time.Now())
	m, err := Write(ctx, cl, serde, topics, k, &r)
	if err != nil {
		t.Fatal(err)
	}
	td, err := kadm.NewClient(cl).ListTopics(ctx, topics.Control())
	if err != nil || len(td[topics.Control()].Partitions) != 1 {
		t.Fatalf("control topic %+v, %v; want one partition", td, err)
	}
	if m.Checkpoints != 1 || len(m.Completions) != 2 {
		t.Errorf("marks %+v, want the checkpoints' end 1 and two completions partitions", m)
	}
	recs, err := kafka.ReadCommitted(ctx, opts, topics.Control(), 0, 0, m.Request+1)
	if err != nil || len(recs) != 1 || string(recs[0].Key) != r.RequestID || recs[0].Headers[0].Value == nil {
		t.Fatalf("control records %v, %v", recs, err)
	}
	v, err := serde.Decode(ctx, recs[0].Value)
	if got, ok := v.(*schemas.BootstrapRequest); err != nil || !ok || got.RequestID != r.RequestID || got.Databases[0] != "finance" {
		t.Fatalf("decoded %+v, %v", v, err)
	}

	// The tailer takes it: bootstrap of finance for this request.
	b := state(schemas.PhaseCatchup, 3, 4, 2, 300, 8)
	b.RequestID = r.RequestID
	take := cp(m.Request+1, b)
	produce(topics.Checkpoints(), "primary", take)
	produce(topics.Checkpoints(), "other-source", cp(m.Request+1)) // another tailer's: ignored
	for i := range 2 {
		task := fmt.Sprintf("%s-s%d-0", bid, i+2)
		produce(topics.Completions(), task, completion(task, schemas.StatusCopied, 150))
	}
	produce(topics.Checkpoints(), "primary", cp(m.Request+1)) // rejoined

	// The applier: applying while copies come in, then done.
	var mu sync.Mutex
	reads := 0
	dr := func(_ context.Context, db string) (map[string]string, error) {
		mu.Lock()
		defer mu.Unlock()
		if db != "finance" {
			t.Errorf("DR read of %s", db)
		}
		reads++
		if reads < 3 {
			return applying(bid, drparam.Progress{Seq: 4, Tables: 2}), nil
		}
		return done(bid), nil
	}
	tr := NewTracker(r.RequestID, m.Request, false)
	var reports int
	f := &Follower{Opts: opts, Decoder: schemas.NewDecoder(reg), Topics: topics, Source: "primary", DR: dr,
		Interval: 100 * time.Millisecond, Report: func(*Tracker) { reports++ }}
	o, why, err := f.Run(ctx, tr, m)
	if err != nil || o != Done {
		t.Fatalf("Run = %v %q %v; want done", o, why, err)
	}
	ds := tr.Databases()
	if len(ds) != 1 || ds[0].FilesCopied != 2 || ds[0].BytesCopied != 300 || ds[0].Phase != PhasePublished || ds[0].Applied.Partitions != 4 {
		t.Errorf("figures %+v (the completion before the marks must not count)", ds)
	}
	if reports < 3 {
		t.Errorf("%d reports, want one per DR reading", reports)
	}

	// What status reads: the bootstrap tasks' completions since a time.
	var tasks []string
	complete, err := ReadCompletions(ctx, opts, schemas.NewDecoder(reg), topics.Completions(), time.Now().Add(-time.Hour),
		func(c *schemas.CopyCompletion) { tasks = append(tasks, c.TaskID) })
	if err != nil || !complete || len(tasks) != 3 {
		t.Errorf("ReadCompletions: %q, complete %v, %v; want the 3 bootstrap tasks' completions", tasks, complete, err)
	}
	tasks = nil
	complete, err = ReadCompletions(ctx, opts, schemas.NewDecoder(reg), topics.Completions(), time.Now().Add(time.Hour),
		func(c *schemas.CopyCompletion) { tasks = append(tasks, c.TaskID) })
	if err != nil || !complete || len(tasks) != 0 {
		t.Errorf("ReadCompletions from the future: %q, complete %v, %v; want none", tasks, complete, err)
	}
}
