package producer

import (
	"context"
	"fmt"
	"maps"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/schemas"
)

// The per-topic chain (guarantee 2 seen from a consumer): every event and
// heartbeat record of <prefix>.events.<db> carries previous_event_id, the
// event published to that topic just before it. A consumer that has
// applied the topic up to event X and reads a record whose
// previous_event_id is greater than X has lost records in between: Kafka's
// retention deleted them while it was stopped, or the topic was deleted and
// recreated. The applier halts the database on that (CHAIN_BROKEN) instead
// of going on from the first surviving record.
//
// The tailer keeps, per database, the last event it published to the
// topic. That map is part of every checkpoint record, committed in the
// same transaction as the records it describes, so a restarted tailer
// continues each chain exactly where the committed records end. A database
// the checkpoint does not know (a tailer with no checkpoint, or one written
// before the field existed) is read from its topic's newest records once.

// chain is the last event published per database topic.
type chain map[string]int64

// link returns the previous event of db's topic, reading it from the topic
// when the chain does not know it yet.
func (t *Tailer) link(ctx context.Context, next chain, db string) (int64, error) {
	if prev, ok := next[db]; ok {
		return prev, nil
	}
	prev, err := t.lastOnTopic(ctx, t.topics.Events(db))
	if err != nil {
		return 0, fmt.Errorf("find the last event published to %s: %w", t.topics.Events(db), err)
	}
	next[db] = prev
	if prev > 0 {
		t.log.Info("continuing a topic's chain from its newest records", "db", db, "previous_event_id", prev)
	}
	return prev, nil
}

// lastOnTopic returns the last event published to an events topic: the
// event ID of its newest event record, or the previous_event_id of a newer
// heartbeat; 0 for a topic with neither.
func (t *Tailer) lastOnTopic(ctx context.Context, topic string) (int64, error) {
	var last int64
	err := scanBack(ctx, t.prod, t.consumeOpts(), topic, func(r *kgo.Record) (bool, error) {
		switch header(r, kafka.HeaderType) {
		case schemas.NameMetastoreEvent:
			id, err := strconv.ParseInt(header(r, kafka.HeaderEventID), 10, 64)
			if err != nil {
				return false, fmt.Errorf("%s@%d: event record without a valid %s header", topic, r.Offset, kafka.HeaderEventID)
			}
			last = id
			return true, nil
		case schemas.NameHeartbeat:
			v, err := t.cfg.Codec.Decode(ctx, r.Value)
			if err != nil {
				return false, fmt.Errorf("decode heartbeat at %s@%d: %w", topic, r.Offset, err)
			}
			if hb, ok := v.(*schemas.Heartbeat); ok && hb.PreviousEventID != nil {
				last = *hb.PreviousEventID
				return true, nil
			}
		}
		return false, nil // an older heartbeat: look further back
	})
	return last, err
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// clone returns a copy the next transaction can change; the tailer adopts
// it only once the transaction committed.
func (c chain) clone() chain {
	if c == nil {
		return chain{}
	}
	return maps.Clone(c)
}
