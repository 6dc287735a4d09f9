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
	if from >= end {
		return nil
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().At(from)}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
	}, opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	for reached := from - 1; reached < end-1; {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("read %s/%d [%d, %d): reached only %d: %w", topic, partition, from, end, reached, err)
		}
		if err := fs.Err(); err != nil {
			return fmt.Errorf("read %s/%d: %w", topic, partition, err)
		}
		var ferr error
		fs.EachRecord(func(r *kgo.Record) {
			reached = max(reached, r.Offset)
			if ferr == nil && !r.Attrs.IsControl() && r.Offset < end {
				ferr = fn(r)
			}
		})
		if ferr != nil {
			return ferr
		}
	}
	return nil
}

// EachCommittedFirst calls fn with each committed data record of
// partition 0 of several topics, each in [from[topic], end[topic]), in
// offset order per topic (the topics interleaved as the fetches bring
// them), with one client for all: reading thousands of one-partition
// topics one client each would take minutes.
func EachCommittedFirst(ctx context.Context, opts []kgo.Opt, from, end map[string]int64, fn func(*kgo.Record) error) error {
	parts := map[string]map[int32]kgo.Offset{}
	left := map[string]int64{} // the last offset still to reach, by topic
	for topic, f := range from {
		if e := end[topic]; f < e {
			parts[topic] = map[int32]kgo.Offset{0: kgo.NewOffset().At(f)}
			left[topic] = e - 1
		}
	}
	if len(parts) == 0 {
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
			return fmt.Errorf("read %d topics: %d not to their end: %w", len(parts), len(left), err)
		}
		if err := fs.Err(); err != nil {
			return fmt.Errorf("read %d topics: %w", len(parts), err)
		}
		var ferr error
		fs.EachRecord(func(r *kgo.Record) {
			last, ok := left[r.Topic]
			if !ok || r.Partition != 0 {
				return
			}
			if ferr == nil && !r.Attrs.IsControl() && r.Offset <= last {
				ferr = fn(r)
			}
			if r.Offset >= last {
				delete(left, r.Topic)
			}
		})
		if ferr != nil {
			return ferr
		}
	}
	return nil
}
