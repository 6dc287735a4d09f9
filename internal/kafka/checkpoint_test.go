package kafka

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hivedr/hivedr/schemas"
)

// oneSchemaRegistry is an in-memory schemas.Registry.
type oneSchemaRegistry struct {
	mu      sync.Mutex
	schemas []string
}

func (r *oneSchemaRegistry) Register(_ context.Context, _, schema string) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, s := range r.schemas {
		if s == schema {
			return i + 1, nil
		}
	}
	r.schemas = append(r.schemas, schema)
	return len(r.schemas), nil
}

func (r *oneSchemaRegistry) SchemaByID(_ context.Context, id int) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if id < 1 || id > len(r.schemas) {
		return "", fmt.Errorf("%w %d", schemas.ErrUnknownSchemaID, id)
	}
	return r.schemas[id-1], nil
}

// TestCheckpointsBackward: 300 checkpoints of two sources, some in an
// aborted transaction, read newest first across the growing windows, each
// once; a limit and fn's stop end the read.
func TestCheckpointsBackward(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const topic = "p.tailer.checkpoints"
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	seeds := []kgo.Opt{kgo.SeedBrokers(brokers...)}
	reg := &oneSchemaRegistry{}
	serde, err := schemas.NewSerde(ctx, reg)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.TransactionalID("cp-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	write := func(commit bool, ids ...int64) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			src := "primary"
			if id%3 == 0 {
				src = "other"
			}
			v, err := serde.Encode(&schemas.TailerCheckpoint{Source: src, LastEventID: id})
			if err != nil {
				t.Fatal(err)
			}
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(src), Value: v}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	for i := int64(1); i <= 300; i += 10 {
		ids := []int64{}
		for j := i; j < i+10; j++ {
			ids = append(ids, j)
		}
		write(true, ids...)
		if i == 151 {
			write(false, 1000, 1001, 1002) // aborted: never seen
		}
	}
	dec := schemas.NewDecoder(reg)
	var got []int64
	if err := CheckpointsBackward(ctx, cl, seeds, topic, "primary", dec, 0, func(cp *schemas.TailerCheckpoint) bool {
		got = append(got, cp.LastEventID)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	want := []int64{}
	for id := int64(300); id >= 1; id-- {
		if id%3 != 0 {
			want = append(want, id)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read %d checkpoints %v\nwant %d, newest first, each once", len(got), got, len(want))
	}
	newest, err := NewestCheckpoint(ctx, cl, seeds, topic, "primary", dec)
	if err != nil || newest == nil || newest.LastEventID != 299 {
		t.Fatalf("NewestCheckpoint = %+v, %v; want 299", newest, err)
	}
	got = nil
	if err := CheckpointsBackward(ctx, cl, seeds, topic, "primary", dec, 50, func(cp *schemas.TailerCheckpoint) bool {
		got = append(got, cp.LastEventID)
		return true
	}); err != nil || len(got) == 0 || len(got) > 50 || got[0] != 299 {
		t.Fatalf("with a limit of 50 records: %v, %v", got, err)
	}
	none, err := NewestCheckpoint(ctx, cl, seeds, "p.no.such.topic", "primary", dec)
	if err != nil || none != nil {
		t.Fatalf("a missing topic: %+v, %v; want none", none, err)
	}
}
