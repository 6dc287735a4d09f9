// Package cat is `hivedr cat`: it reads the committed records of hivedr
// topics from their beginning and prints each as one line of JSON, its
// value decoded with the writer's schema and printed with the schema's
// field names (schemas.Plain). It only reads: it joins no
// consumer group, commits nothing and registers no schema.
package cat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hivedr/hivedr/schemas"
)

// Decoder decodes a Kafka value with its writer's schema (schemas.Decoder).
type Decoder interface {
	Decode(ctx context.Context, b []byte) (any, error)
}

// Config says what Print reads.
type Config struct {
	// Brokers are the Kafka seed brokers.
	Brokers []string
	// Topics are read from their beginning, every partition.
	Topics []string
	// Limit stops after this many records; 0: no limit.
	Limit int
	// Follow keeps waiting for new records instead of stopping at the end.
	Follow bool
	// Quiet is how long a poll may find nothing before Print takes it that
	// it reached the end (without Follow). Default 3s.
	Quiet time.Duration
	// Decoder decodes the values.
	Decoder Decoder
	// KafkaOpts are added to the Kafka client (TLS, SASL, tests).
	KafkaOpts []kgo.Opt
}

// Record is one record as Print prints it: one JSON object per line.
type Record struct {
	Topic     string            `json:"topic"`
	Partition int32             `json:"partition"`
	Offset    int64             `json:"offset"`
	Timestamp time.Time         `json:"timestamp"`
	Key       string            `json:"key"`
	Headers   map[string]string `json:"headers,omitempty"`
	// Type is the value's record name, e.g. io.hivedr.MetastoreEvent.
	Type string `json:"type"`
	// PayloadType names the payload of a MetastoreEvent (e.g.
	// io.hivedr.TableChange), since Value's JSON does not.
	PayloadType string `json:"payload_type,omitempty"`
	// Value is the record as a generic Avro reader gives it
	// (schemas.Plain): the schema's field names, unions unwrapped,
	// timestamps in RFC 3339.
	Value map[string]any `json:"value"`
}

// Print writes the committed records (read_committed) of cfg.Topics to out
// as JSON lines, until the end of the topics (no record for cfg.Quiet),
// cfg.Limit records, or, with cfg.Follow, until ctx ends. A value that
// does not decode stops it with an error naming the record's position.
func Print(ctx context.Context, cfg Config, out io.Writer) error {
	if cfg.Decoder == nil {
		return errors.New("cat: Config needs a Decoder")
	}
	if cfg.Quiet <= 0 {
		cfg.Quiet = 3 * time.Second
	}
	opts := append([]kgo.Opt{kgo.SeedBrokers(cfg.Brokers...), kgo.ConsumeTopics(cfg.Topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted())}, cfg.KafkaOpts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	enc := json.NewEncoder(out)
	printed := 0
	for {
		pollCtx, cancel := ctx, context.CancelFunc(func() {})
		if !cfg.Follow {
			pollCtx, cancel = context.WithTimeout(ctx, cfg.Quiet)
		}
		fs := cl.PollFetches(pollCtx)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		for _, fe := range fs.Errors() {
			if errors.Is(fe.Err, context.DeadlineExceeded) {
				continue
			}
			if fe.Topic != "" {
				return fmt.Errorf("topic %s: %w", fe.Topic, fe.Err)
			}
			return fe.Err
		}
		if fs.NumRecords() == 0 && !cfg.Follow {
			return nil
		}
		for it := fs.RecordIter(); !it.Done(); {
			r := it.Next()
			rec, err := decode(ctx, cfg.Decoder, r)
			if err != nil {
				return err
			}
			if err := enc.Encode(rec); err != nil {
				return err
			}
			if printed++; cfg.Limit > 0 && printed >= cfg.Limit {
				return nil
			}
		}
	}
}

// decode is r as Print prints it.
func decode(ctx context.Context, dec Decoder, r *kgo.Record) (Record, error) {
	v, err := dec.Decode(ctx, r.Value)
	if err != nil {
		return Record{}, fmt.Errorf("%s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
	}
	plain, err := schemas.Plain(v)
	if err != nil {
		return Record{}, fmt.Errorf("%s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
	}
	rec := Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp,
		Key: string(r.Key), Type: schemas.RecordName(v), Value: plain}
	for _, h := range r.Headers {
		if rec.Headers == nil {
			rec.Headers = map[string]string{}
		}
		rec.Headers[h.Key] = string(h.Value)
	}
	if ev, ok := v.(*schemas.Event); ok {
		rec.PayloadType = schemas.PayloadName(ev.Payload)
	}
	return rec, nil
}
