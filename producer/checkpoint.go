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
// single-partition checkpoints topic, reading backwards from its end in
// growing windows.
//
// It must run after the transactional producer has been initialised: that
// aborts any transaction a killed tailer left open, so no transaction is
// open below the last stable offset and kafka.ReadCommitted can tell when
// it has read everything.
func readCheckpoint(ctx context.Context, cl *kgo.Client, topic, source string, codec Codec, opts []kgo.Opt) (*schemas.TailerCheckpoint, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	end, err := kafka.CommittedEnd(ctx, cl, topic, 0)
	if err != nil {
		return nil, false, err
	}
	// Each window re-reads to the end: only end is known to be a point
	// ReadCommitted can stop at.
	for window := int64(64); end > 0; window *= 4 {
		from := max(0, end-window)
		recs, err := kafka.ReadCommitted(ctx, opts, topic, 0, from, end)
		if err != nil {
			return nil, false, err
		}
		for i := len(recs) - 1; i >= 0; i-- {
			r := recs[i]
			if string(r.Key) != source {
				continue
			}
			v, err := codec.Decode(ctx, r.Value)
			if err != nil {
				return nil, false, fmt.Errorf("decode checkpoint at %s/0@%d: %w", topic, r.Offset, err)
			}
			cp, ok := v.(*schemas.TailerCheckpoint)
			if !ok {
				return nil, false, fmt.Errorf("record at %s/0@%d is a %T, not a TailerCheckpoint", topic, r.Offset, v)
			}
			return cp, true, nil
		}
		if from == 0 {
			break
		}
	}
	return nil, false, nil
}
