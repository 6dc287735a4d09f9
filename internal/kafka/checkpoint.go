package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hivedr/hivedr/schemas"
)

// NewestCheckpoint returns source's newest committed checkpoint on topic
// (the tailer's checkpoints), or nil when there is none (or no such topic
// yet). opts are the options of the readers it makes (connect.Kafka's).
func NewestCheckpoint(ctx context.Context, cl *kgo.Client, opts []kgo.Opt, topic, source string, dec *schemas.Decoder) (*schemas.TailerCheckpoint, error) {
	var newest *schemas.TailerCheckpoint
	err := CheckpointsBackward(ctx, cl, opts, topic, source, dec, 0, func(cp *schemas.TailerCheckpoint) bool {
		newest = cp
		return false
	})
	return newest, err
}

// CheckpointsBackward passes source's committed checkpoints on topic to
// fn, newest first, until fn returns false, the topic's first offset, or
// (limit > 0) limit records read. It reads backwards from the end in
// growing windows, each record once. A topic that does not exist yet has
// no checkpoints. opts are the options of the readers it makes.
func CheckpointsBackward(ctx context.Context, cl *kgo.Client, opts []kgo.Opt, topic, source string, dec *schemas.Decoder, limit int64,
	fn func(*schemas.TailerCheckpoint) bool) error {
	adm := kadm.NewClient(cl)
	ends, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		return fmt.Errorf("list end offsets: %w", err)
	}
	end, ok := ends.Lookup(topic, 0)
	if !ok || errors.Is(end.Err, kerr.UnknownTopicOrPartition) {
		return nil
	}
	if end.Err != nil {
		return fmt.Errorf("end offset: %w", end.Err)
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return fmt.Errorf("list start offsets: %w", err)
	}
	start := int64(0)
	if s, ok := starts.Lookup(topic, 0); ok && s.Err == nil {
		start = s.Offset
	}
	if limit > 0 {
		start = max(start, end.Offset-limit)
	}
	// The window's end is a last stable offset or the start of the window
	// read before, below which every transaction is decided.
	for hi, window := end.Offset, int64(64); hi > start; hi, window = hi-window, window*4 {
		from := max(start, hi-window)
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		recs, err := ReadCommitted(rctx, opts, topic, 0, from, hi)
		cancel()
		if err != nil {
			return fmt.Errorf("read offsets %d to %d: %w", from, hi, err)
		}
		for i := len(recs) - 1; i >= 0; i-- {
			if string(recs[i].Key) != source {
				continue
			}
			v, err := dec.Decode(ctx, recs[i].Value)
			if err != nil {
				return fmt.Errorf("decode the checkpoint at offset %d: %w", recs[i].Offset, err)
			}
			cp, ok := v.(*schemas.TailerCheckpoint)
			if !ok {
				return fmt.Errorf("record at offset %d is a %T, not a TailerCheckpoint", recs[i].Offset, v)
			}
			if !fn(cp) {
				return nil
			}
		}
	}
	return nil
}
