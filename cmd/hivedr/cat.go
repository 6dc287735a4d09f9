package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/schemas"
)

// catRecord is one record as `hivedr cat` prints it: one JSON object per line.
type catRecord struct {
	Topic     string            `json:"topic"`
	Partition int32             `json:"partition"`
	Offset    int64             `json:"offset"`
	Timestamp time.Time         `json:"timestamp"`
	Key       string            `json:"key"`
	Headers   map[string]string `json:"headers,omitempty"`
	Type      string            `json:"type"`
	// PayloadType names the payload of a MetastoreEvent (e.g.
	// io.hivedr.TableChange), since Value's JSON does not.
	PayloadType string `json:"payload_type,omitempty"`
	Value       any    `json:"value"`
}

func runCat(args []string, stdout, stderr io.Writer) int {
	fl, cf := newFlagSet("cat", "Usage: hivedr cat [flags] TOPIC...\n\nPrint the committed records of hivedr topics as JSON lines, decoded with the\n"+
		"writer's schema from the schema registry (read only: cat registers nothing). Reads\n"+
		"from the beginning; stops at the end of the topics unless -f.", stderr)
	n := fl.Int("n", 0, "stop after this many records (0: no limit)")
	follow := fl.Bool("f", false, "keep waiting for new records instead of stopping at the end")
	conf, _, ok := setup(fl, cf, args, stderr)
	if !ok {
		return exitUsage
	}
	if fl.NArg() == 0 {
		fl.Usage()
		return exitUsage
	}
	ctx, stop := signalContext()
	defer stop()
	if err := cat(ctx, conf, fl.Args(), *n, *follow, stdout); err != nil {
		fmt.Fprintln(stderr, "hivedr cat:", err)
		return exitError
	}
	return exitOK
}

func cat(ctx context.Context, conf *config.Config, topics []string, limit int, follow bool, out io.Writer) error {
	// Read-only: cat fetches writer schemas by ID and registers nothing.
	dec, err := schemas.DialDecoder(conf.SchemaRegistry)
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(conf.Kafka.Brokers...), kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return err
	}
	defer cl.Close()
	enc := json.NewEncoder(out)
	printed := 0
	for {
		pollCtx := ctx
		var cancel context.CancelFunc = func() {}
		if !follow {
			// Without -f, a quiet second means we are at the end.
			pollCtx, cancel = context.WithTimeout(ctx, 3*time.Second)
		}
		fs := cl.PollFetches(pollCtx)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		if err := fs.Err0(); err != nil && err != context.DeadlineExceeded {
			return err
		}
		if fs.NumRecords() == 0 && !follow {
			return nil
		}
		for it := fs.RecordIter(); !it.Done(); {
			r := it.Next()
			v, err := dec.Decode(ctx, r.Value)
			if err != nil {
				return fmt.Errorf("%s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
			}
			cr := catRecord{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp,
				Key: string(r.Key), Type: schemas.RecordName(v), Value: v}
			for _, h := range r.Headers {
				if cr.Headers == nil {
					cr.Headers = map[string]string{}
				}
				cr.Headers[h.Key] = string(h.Value)
			}
			if ev, ok := v.(*schemas.Event); ok {
				cr.PayloadType = schemas.PayloadName(ev.Payload)
			}
			if err := enc.Encode(cr); err != nil {
				return err
			}
			if printed++; limit > 0 && printed >= limit {
				return nil
			}
		}
	}
}
