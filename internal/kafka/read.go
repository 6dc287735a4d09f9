package kafka

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// CommittedEnd returns the last stable offset of a partition: every record
// below it belongs to a decided transaction (or none). A partition just
// created may take a moment to be known to the broker's metadata; it is
// waited for up to ten seconds.
func CommittedEnd(ctx context.Context, cl *kgo.Client, topic string, partition int32) (int64, error) {
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(10 * time.Second)
	for {
		ends, err := adm.ListCommittedOffsets(ctx, topic)
		if err != nil {
			return 0, fmt.Errorf("list end offsets of %s: %w", topic, err)
		}
		end, ok := ends.Lookup(topic, partition)
		switch {
		case ok && end.Err == nil:
			return end.Offset, nil
		case time.Now().After(deadline):
			if !ok {
				return 0, fmt.Errorf("end offset of %s/%d: no such partition", topic, partition)
			}
			return 0, fmt.Errorf("end offset of %s/%d: %w", topic, partition, end.Err)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// ReadCommitted returns the committed data records of topic/partition in
// [from, end), in offset order (transaction markers and aborted records
// left out). end must be at most the partition's last stable offset.
func ReadCommitted(ctx context.Context, opts []kgo.Opt, topic string, partition int32, from, end int64) ([]*kgo.Record, error) {
	var out []*kgo.Record
	err := EachCommitted(ctx, opts, topic, partition, from, end, func(r *kgo.Record) error {
		out = append(out, r)
		return nil
	})
	return out, err
}

// EachCommitted calls fn with each committed data record of
// topic/partition in [from, end), in offset order, as the fetches bring
// them: it holds one fetch at a time, not the range. An error of fn stops
// the read and is returned. end must be at most the partition's last
// stable offset.
func EachCommitted(ctx context.Context, opts []kgo.Opt, topic string, partition int32, from, end int64, fn func(*kgo.Record) error) error {
	return eachCommitted(ctx, opts, map[tp]span{{topic, partition}: {from, end}}, fn)
}

// EachCommittedFirst is EachCommitted over partition 0 of several topics,
// each in [from[topic], end[topic]), in offset order per topic (the topics
// interleaved as the fetches bring them), with one client for all:
// reading thousands of one-partition topics a client each would take
// minutes.
func EachCommittedFirst(ctx context.Context, opts []kgo.Opt, from, end map[string]int64, fn func(*kgo.Record) error) error {
	spans := map[tp]span{}
	for topic, f := range from {
		spans[tp{topic, 0}] = span{f, end[topic]}
	}
	return eachCommitted(ctx, opts, spans, fn)
}

type tp struct {
	topic     string
	partition int32
}

type span struct{ from, end int64 }

// eachCommitted reads the committed data records of each partition in
// its span with one client.
func eachCommitted(ctx context.Context, opts []kgo.Opt, spans map[tp]span, fn func(*kgo.Record) error) error {
	parts := map[string]map[int32]kgo.Offset{}
	left := map[tp]int64{} // the last offset still to reach
	for p, sp := range spans {
		if sp.from >= sp.end {
			continue
		}
		if parts[p.topic] == nil {
			parts[p.topic] = map[int32]kgo.Offset{}
		}
		parts[p.topic][p.partition] = kgo.NewOffset().At(sp.from)
		left[p] = sp.end - 1
	}
	if len(left) == 0 {
		return nil
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.ConsumePartitions(parts),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
	}, opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("read %s: %d partitions not to their end: %w", describe(spans), len(left), err)
		}
		if err := fs.Err(); err != nil {
			return fmt.Errorf("read %s: %w", describe(spans), err)
		}
		var ferr error
		fs.EachRecord(func(r *kgo.Record) {
			p := tp{r.Topic, r.Partition}
			last, ok := left[p]
			if !ok {
				return
			}
			if ferr == nil && !r.Attrs.IsControl() && r.Offset <= last {
				ferr = fn(r)
			}
			if r.Offset >= last {
				delete(left, p)
			}
		})
		if ferr != nil {
			return ferr
		}
	}
	return nil
}

// describe names the partitions read: the one with its range, or how
// many.
func describe(spans map[tp]span) string {
	if len(spans) == 1 {
		for p, sp := range spans {
			return fmt.Sprintf("%s/%d [%d, %d)", p.topic, p.partition, sp.from, sp.end)
		}
	}
	return fmt.Sprintf("%d partitions", len(spans))
}
