package cat

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hivedr/hivedr/schemas"
)

// fakeDecoder decodes the values the tests write: "task:<id>" is a copy
// task, "event:<id>" a table event; anything else does not decode.
type fakeDecoder struct{}

func (fakeDecoder) Decode(_ context.Context, b []byte) (any, error) {
	kind, id, _ := strings.Cut(string(b), ":")
	switch kind {
	case "task":
		return &schemas.CopyTask{TaskID: id}, nil
	case "event":
		return &schemas.Event{EventType: "CREATE_TABLE", Payload: &schemas.TableChange{}}, nil
	}
	return nil, errors.New("unknown schema ID")
}

// cluster is a fake Kafka with the topic t, holding the committed records
// values (one with a header), and one record of an aborted transaction.
func cluster(t *testing.T, values ...string) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.TransactionalID("cat-test"), kgo.DefaultProduceTopic("t"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produce := func(commit kgo.TransactionEndTry, recs ...*kgo.Record) {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, commit); err != nil {
			t.Fatal(err)
		}
	}
	var recs []*kgo.Record
	for i, v := range values {
		r := &kgo.Record{Key: []byte("k" + v), Value: []byte(v)}
		if i == 0 {
			r.Headers = []kgo.RecordHeader{{Key: "hivedr.type", Value: []byte("x")}}
		}
		recs = append(recs, r)
	}
	produce(kgo.TryCommit, recs[:1]...)
	produce(kgo.TryAbort, &kgo.Record{Value: []byte("task:aborted")})
	produce(kgo.TryCommit, recs[1:]...)
	return c.ListenAddrs()
}

func lines(t *testing.T, out string) []Record {
	t.Helper()
	var recs []Record
	for sc := bufio.NewScanner(strings.NewReader(out)); sc.Scan(); {
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		recs = append(recs, r)
	}
	return recs
}

// TestPrint: every committed record, none of an aborted transaction, in
// order, each with its key, headers, record name and, for an event, its
// payload's name; then Print stops at the end.
func TestPrint(t *testing.T) {
	brokers := cluster(t, "task:a", "event:7", "task:b")
	var out bytes.Buffer
	start := time.Now()
	if err := Print(context.Background(), Config{Brokers: brokers, Topics: []string{"t"}, Decoder: fakeDecoder{}, Quiet: 500 * time.Millisecond}, &out); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("Print took %s to find the end", d)
	}
	recs := lines(t, out.String())
	if len(recs) != 3 {
		t.Fatalf("printed %d records, want the 3 committed:\n%s", len(recs), out.String())
	}
	if r := recs[0]; r.Topic != "t" || r.Key != "ktask:a" || r.Headers["hivedr.type"] != "x" || r.Type != schemas.NameCopyTask || r.PayloadType != "" {
		t.Errorf("first record %+v", r)
	}
	if r := recs[1]; r.Type != schemas.NameMetastoreEvent || r.PayloadType != schemas.PayloadName(&schemas.TableChange{}) || r.Offset <= recs[0].Offset {
		t.Errorf("second record %+v", r)
	}
	// Values carry the schema's field names, unions unwrapped.
	if v := recs[1].Value; v["event_type"] != "CREATE_TABLE" || v["database"] != nil || v["payload"] == nil || v["EventType"] != nil {
		t.Errorf("second record's value %v", v)
	}
	if v := recs[2].Value; recs[2].Key != "ktask:b" || v["task_id"] != "b" || v["TaskID"] != nil {
		t.Errorf("third record %+v", recs[2])
	}
}

// TestPrintLimitAndErrors: -n stops after that many records; a value that
// does not decode is an error naming its position.
func TestPrintLimitAndErrors(t *testing.T) {
	brokers := cluster(t, "task:a", "task:b", "junk", "task:c")
	var out bytes.Buffer
	if err := Print(context.Background(), Config{Brokers: brokers, Topics: []string{"t"}, Limit: 2, Decoder: fakeDecoder{}}, &out); err != nil {
		t.Fatal(err)
	}
	if recs := lines(t, out.String()); len(recs) != 2 || recs[1].Key != "ktask:b" {
		t.Errorf("with Limit 2 printed %+v", recs)
	}
	out.Reset()
	err := Print(context.Background(), Config{Brokers: brokers, Topics: []string{"t"}, Decoder: fakeDecoder{}, Quiet: 500 * time.Millisecond}, &out)
	if err == nil || !strings.Contains(err.Error(), "t/0@") || !strings.Contains(err.Error(), "unknown schema ID") {
		t.Errorf("Print over an undecodable value: %v", err)
	}
	if recs := lines(t, out.String()); len(recs) != 2 {
		t.Errorf("printed %d records before the undecodable one, want 2", len(recs))
	}
}

// TestPrintFollow: with Follow, Print waits past the end until ctx ends,
// and returns nil.
func TestPrintFollow(t *testing.T) {
	brokers := cluster(t, "task:a")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := Print(ctx, Config{Brokers: brokers, Topics: []string{"t"}, Follow: true, Decoder: fakeDecoder{}, Quiet: 10 * time.Millisecond}, &out); err != nil {
		t.Fatal(err)
	}
	if ctx.Err() == nil || len(lines(t, out.String())) != 1 {
		t.Errorf("Follow returned before ctx ended (%v), with %q", ctx.Err(), out.String())
	}
}
