package producer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"

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

// prepareTopics makes sure the topics of dbs exist and that next knows
// each one's last event: topics are created in one request the first time
// they are needed (one partition each, for total order), a topic just
// created starts its chain at 0 unless the chain already knows it (a
// topic deleted and created again continues its chain, so its consumers
// see the loss), and existing topics the chain does not know are read,
// several at once.
func (t *Tailer) prepareTopics(ctx context.Context, next chain, dbs []string) error {
	k := t.conf.Kafka
	var specs []kafka.Spec
	for _, db := range dbs {
		if topic := t.topics.Events(db); !t.created[topic] {
			specs = append(specs, kafka.Spec{Name: topic, Partitions: 1, ReplicationFactor: k.ReplicationFactor, Retention: k.Retention.Duration,
				MaxMessageBytes: t.maxBytes, Precreated: k.PrecreatedTopics})
			t.created[topic] = true // (the map is cleared when a step fails)
		}
	}
	created, err := kafka.Ensure(ctx, t.adm, specs...)
	if err != nil {
		clear(t.created)
		return err
	}
	if len(created) > 0 {
		// The producer learns a new topic's leader from metadata, which
		// it otherwise refreshes at most every 5 s (franz-go's
		// MetadataMinAge): a new database's first events would wait that
		// long. Ask now; the produce waits only for this refresh.
		t.prod.ForceMetadataRefresh()
	}
	var scan []string
	for _, db := range dbs {
		if _, ok := next[db]; ok {
			continue
		}
		if created[t.topics.Events(db)] {
			next[db] = 0
			continue
		}
		next[db] = 0 // claimed, so a database named twice is read once
		scan = append(scan, db)
	}
	prevs := make([]int64, len(scan))
	errs := make([]error, len(scan))
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i, db := range scan {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			topic := t.topics.Events(db)
			if prevs[i], errs[i] = t.lastOnTopic(ctx, topic); errs[i] != nil {
				errs[i] = fmt.Errorf("find the last event published to %s: %w", topic, errs[i])
			}
		}()
	}
	wg.Wait()
	for i, db := range scan {
		next[db] = prevs[i]
	}
	if len(scan) > 0 {
		t.log.Info("continued topics' chains from their newest records", "topics", len(scan))
	}
	return errors.Join(errs...)
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
