package producer

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/schemas"
)

// readCheckpoint returns the newest committed checkpoint of source from the
// single-partition checkpoints topic, and the process that wrote it
// (kafka.HeaderWriter; "" when it does not say).
//
// To resume from it, it must run after the transactional producer has
// been initialised: that aborts any transaction a killed tailer left
// open, so no transaction is open below the last stable offset and
// kafka.ReadCommitted can tell when it has read everything.
func readCheckpoint(ctx context.Context, cl *kgo.Client, topic, source string, codec Codec, opts []kgo.Opt) (*schemas.TailerCheckpoint, string, bool, error) {
	var (
		cp     *schemas.TailerCheckpoint
		writer string
	)
	err := scanBack(ctx, cl, opts, topic, func(r *kgo.Record) (bool, error) {
		if string(r.Key) != source {
			return false, nil
		}
		writer = header(r, kafka.HeaderWriter)
		v, err := codec.Decode(ctx, r.Value)
		if err != nil {
			return false, fmt.Errorf("decode checkpoint at %s/0@%d: %w", topic, r.Offset, err)
		}
		var ok bool
		if cp, ok = v.(*schemas.TailerCheckpoint); !ok {
			return false, fmt.Errorf("record at %s/0@%d is a %T, not a TailerCheckpoint", topic, r.Offset, v)
		}
		return true, nil
	})
	return cp, writer, cp != nil, err
}

// scanBack calls fn on the committed records of partition 0 of topic from
// the newest backwards, reading in growing windows from the end, until fn
// reports it found what it looks for or the partition's start is reached.
// Like readCheckpoint it needs no transaction open below the last stable
// offset: only the tailer writes these topics, and it has been fenced.
func scanBack(ctx context.Context, cl *kgo.Client, opts []kgo.Opt, topic string, fn func(*kgo.Record) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	end, err := kafka.CommittedEnd(ctx, cl, topic, 0)
	if err != nil {
		return err
	}
	// Each window re-reads to the end: only end is known to be a point
	// ReadCommitted can stop at (an offset below it may belong to an
	// aborted batch, which a read_committed fetch never returns). A
	// record already passed is offered to fn again; fn must not mind.
	for window := int64(64); end > 0; window *= 4 {
		from := max(0, end-window)
		recs, err := kafka.ReadCommitted(ctx, opts, topic, 0, from, end)
		if err != nil {
			return err
		}
		for i := len(recs) - 1; i >= 0; i-- {
			found, err := fn(recs[i])
			if err != nil || found {
				return err
			}
		}
		if from == 0 {
			break
		}
	}
	return nil
}
