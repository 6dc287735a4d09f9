package applier

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/internal/retry"
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
	// Kafka may be away for a while at start (a broker restart, a
	// partition without a leader yet): wait for it, bounded, instead of
	// stopping the applier.
	var end int64
	err = retry.Until(ctx, a.log, "applier control topic "+topic, retry.Policy{Fatal: kafka.IsAuthError}, func(ctx context.Context) error {
		if err := kafka.EnsureApplierControlTopic(ctx, adm, a.cfg.Topics, a.cfg.ReplicationFactor, a.cfg.PrecreatedTopics); err != nil {
			return err
		}
		var err error
		end, err = kafka.CommittedEnd(ctx, seed, topic, 0)
		return err
	})
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
func (a *Applier) runControls(ctx context.Context, cl *kgo.Client) {
	a.mu.Lock()
	reqs := a.controls
	a.controls = nil
	a.mu.Unlock()
	for _, c := range reqs {
		topic := a.cfg.Topics.Events(c.Database)
		a.mu.Lock()
		_, mine := a.owned[topic]
		a.mu.Unlock()
		if !mine {
			a.log.Info("a control request for a database this applier does not own: left to its owner", "kind", c.Kind, "db", c.Database)
			continue
		}
		var head int64
		var had bool
		if c.Kind == schemas.ControlFence {
			head, had = a.retireBetween(cl, topic)
		} else {
			head, had = a.retire(cl, topic)
		}
		switch c.Kind {
		case schemas.ControlSeek:
			cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{topic: {0: {Epoch: -1, Offset: c.Offset}}})
			a.log.Warn("seeking a database's topic as an operator asked", "db", c.Database, "offset", c.Offset,
				"event_id", c.EventID, "by", c.By, "had_worker", had)
		case schemas.ControlFence:
			// The worker is gone (retire waited for it): nothing it
			// started can land from here on, and the next worker reads
			// the DR database before it writes. Its queue is consumed
			// again from its head.
			if head >= 0 {
				cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{topic: {0: {Epoch: -1, Offset: head}}})
			}
			if err := a.confirmFence(ctx, c); err != nil {
				a.log.Error("could not confirm a failover's fence (the failover waits for it, and asks again)", "db", c.Database, "fence", c.Fence, "err", err)
			}
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
	if mine {
		addPartitions(a.owned, topics)
		return
	}
	for t := range topics {
		delete(a.owned, t)
	}
}

// retire stops the worker of topic, if any, and returns the offset of the
// head of its queue (-1 when its queue was empty) and whether it had one.
func (a *Applier) retire(cl *kgo.Client, topic string) (int64, bool) {
	return a.retireWith(cl, topic, func(w *worker) { w.stop(); <-w.done })
}

// fenceBound bounds how long a fence waits for a database's worker to
// end the step it is in before it stops it anyway.
const fenceBound = 2 * time.Minute

// retireBetween is retire for a fence: the worker ends between two steps
// (worker.stopBetween), so no call of the step in progress is cut off
// and left to land later.
func (a *Applier) retireBetween(cl *kgo.Client, topic string) (int64, bool) {
	return a.retireWith(cl, topic, func(w *worker) {
		if !w.stopBetween(fenceBound) {
			w.log.Warn("the worker did not end its step within the bound; stopped it", "bound", fenceBound)
		}
	})
}

func (a *Applier) retireWith(cl *kgo.Client, topic string, stop func(*worker)) (int64, bool) {
	a.mu.Lock()
	w := a.workers[topic]
	delete(a.workers, topic)
	a.mu.Unlock()
	if w == nil {
		return -1, false
	}
	stop(w)
	w.mu.Lock()
	head := int64(-1)
	if len(w.queue) > 0 {
		head = w.queue[0].rec.Offset
	}
	w.mu.Unlock()
	cl.ResumeFetchTopics(topic)
	return head, true
}

// confirmFence writes drparam.FailoverFenced = c.Fence on the DR database
// of a fence request, if the database carries the failover mark with that
// token (drparam.FailoverFence); otherwise it writes nothing (the mark
// was undone, or is another failover's: the failover sees no
// confirmation, marks again and asks again). It runs after the
// database's worker stopped, on a connection of its own.
func (a *Applier) confirmFence(ctx context.Context, c schemas.ApplierControl) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	ms, closeFn, err := a.cfg.Dial(ctx)
	if err != nil {
		return err
	}
	defer closeFn()
	db, err := ms.GetDatabase(ctx, c.Database)
	if err != nil {
		return fmt.Errorf("get DR database %s: %w", c.Database, err)
	}
	if c.Fence == "" || db.Parameters[drparam.FailedOverAt] == "" || db.Parameters[drparam.FailoverFence] != c.Fence {
		a.log.Warn("a failover's fence names a mark the DR database does not carry: not confirmed", "db", c.Database,
			"fence", c.Fence, "mark", db.Parameters[drparam.FailoverFence], "failed_over_at", db.Parameters[drparam.FailedOverAt])
		return nil
	}
	if db.Parameters[drparam.FailoverFenced] == c.Fence {
		return nil
	}
	db.Parameters[drparam.FailoverFenced] = c.Fence
	if err := ms.AlterDatabase(ctx, c.Database, db); err != nil {
		return fmt.Errorf("alter DR database %s: %w", c.Database, err)
	}
	a.log.Warn("database fenced for its failover: this applier writes nothing more into it", "db", c.Database, "fence", c.Fence,
		"failed_over_at", db.Parameters[drparam.FailedOverAt])
	return nil
}
