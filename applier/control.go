package applier

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/schemas"
)

// readControl reads the control topic from its end as of now, queueing
// each request and waking the poll loop, which acts on it (runControls)
// between polls, where no rebalance can run.
func (a *Applier) readControl(ctx context.Context) error {
	topic := a.cfg.Topics.ApplierControl()
	seed, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(a.cfg.Brokers...)}, a.cfg.KafkaOpts...)...)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	adm := kadm.NewClient(seed)
	if err := kafka.EnsureApplierControlTopic(ctx, adm, a.cfg.Topics, a.cfg.ReplicationFactor); err != nil {
		seed.Close()
		return err
	}
	end, err := kafka.CommittedEnd(ctx, seed, topic, 0)
	seed.Close()
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(a.cfg.Brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(end)}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted())}, a.cfg.KafkaOpts...)...)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	a.log.Info("reading operators' requests", "topic", topic, "from_offset", end)
	close(a.controlReady)
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		fs.EachRecord(func(r *kgo.Record) {
			var c schemas.ApplierControl
			if err := json.Unmarshal(r.Value, &c); err != nil || c.Database == "" {
				a.log.Warn("ignoring a control record that is not a request", "topic", topic, "offset", r.Offset, "err", err)
				return
			}
			a.mu.Lock()
			a.controls = append(a.controls, c)
			wake := a.wakePoll
			a.mu.Unlock()
			if wake != nil {
				wake()
			}
		})
	}
}

// runControls acts on the queued requests. It runs in the poll loop,
// between a poll and AllowRebalance, so the topics it touches stay
// assigned and SetOffsets is safe (no revoke runs meanwhile).
//
// Guarantee kept: a database's records are applied in order from the
// position asked. The worker is stopped first (it leaves its queue as it
// was); the topic is then consumed again from the asked offset (seek) or
// from the worker's head (replan), so nothing queued is lost, and what
// was applied past that position is applied again as no-ops (objects
// carry repl.last.id).
func (a *Applier) runControls(cl *kgo.Client) {
	a.mu.Lock()
	reqs := a.controls
	a.controls = nil
	a.mu.Unlock()
	for _, c := range reqs {
		topic := a.cfg.Topics.Events(c.Database)
		a.mu.Lock()
		mine := a.owned[topic]
		a.mu.Unlock()
		if !mine {
			a.log.Info("a control request for a database this applier does not own: left to its owner", "kind", c.Kind, "db", c.Database)
			continue
		}
		head, had := a.retire(cl, topic)
		switch c.Kind {
		case schemas.ControlSeek:
			cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{topic: {0: {Epoch: -1, Offset: c.Offset}}})
			a.log.Warn("seeking a database's topic as an operator asked", "db", c.Database, "offset", c.Offset,
				"event_id", c.EventID, "by", c.By, "had_worker", had)
		case schemas.ControlReplan:
			if !had {
				a.log.Info("replan requested for a database without a worker here", "db", c.Database, "by", c.By)
				continue
			}
			if head >= 0 {
				cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{topic: {0: {Epoch: -1, Offset: head}}})
			}
			a.log.Warn("database worker restarted as an operator asked: its head is planned again", "db", c.Database,
				"offset", head, "event_id", c.EventID, "by", c.By)
		default:
			a.log.Warn("ignoring a control request of an unknown kind", "kind", c.Kind, "db", c.Database)
		}
	}
}

// own notes topics assigned to this member (or no longer).
func (a *Applier) own(topics map[string][]int32, mine bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for t := range topics {
		if mine {
			a.owned[t] = true
		} else {
			delete(a.owned, t)
		}
	}
}

// retire stops the worker of topic, if any, and returns the offset of the
// head of its queue (-1 when its queue was empty) and whether it had one.
func (a *Applier) retire(cl *kgo.Client, topic string) (int64, bool) {
	a.mu.Lock()
	w := a.workers[topic]
	delete(a.workers, topic)
	a.mu.Unlock()
	if w == nil {
		return -1, false
	}
	w.stop()
	<-w.done
	w.mu.Lock()
	head := int64(-1)
	if len(w.queue) > 0 {
		head = w.queue[0].rec.Offset
	}
	w.mu.Unlock()
	cl.ResumeFetchTopics(topic)
	return head, true
}
