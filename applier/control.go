package applier

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hivedr/hivedr/internal/kafka"
)

// ControlKind says what a Control asks of a running applier.
type ControlKind string

// The kinds of Control.
const (
	// ControlSeek: consume the database's topic from Control.Offset (the
	// group's committed offset moves there too). `hivedr replay
	// -coordinate` sends it.
	ControlSeek ControlKind = "seek"
	// ControlReplan: stop the database's worker and start it again at the
	// head of its queue, reading the DR state afresh, so a skip recorded
	// on the DR database (hivedr.skipped.<id>) since takes effect, on a
	// halted worker too. `hivedr replay -skip-event` sends it.
	ControlReplan ControlKind = "replan"
)

// ControlType is the hivedr.type header of a Control record.
const ControlType = "io.hivedr.ApplierControl"

// Control is an operator's request to the running appliers, a JSON value
// on kafka.Topics.ApplierControl keyed by database. Every applier reads
// the topic from its end as of its start (a request made while none runs
// has nothing to act on: the tool acts on the group itself then), and
// acts on the databases whose topics it owns.
type Control struct {
	Kind     ControlKind `json:"kind"`
	Database string      `json:"database"`
	// Offset of the database's topic to consume from (seek).
	Offset int64 `json:"offset,omitempty"`
	// EventID is the event the request is about (the first at Offset
	// for a seek, the skipped one for a replan), for the log.
	EventID int64     `json:"event_id,omitempty"`
	By      string    `json:"by,omitempty"`
	At      time.Time `json:"at"`
}

// ControlRecord makes the record that carries c.
func ControlRecord(topics kafka.Topics, c Control) (*kgo.Record, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	return &kgo.Record{Topic: topics.ApplierControl(), Key: []byte(c.Database), Value: b,
		Headers: []kgo.RecordHeader{{Key: kafka.HeaderType, Value: []byte(ControlType)}}}, nil
}

// EnsureControlTopic creates the applier control topic if it is missing.
func EnsureControlTopic(ctx context.Context, adm *kadm.Client, topics kafka.Topics, rf int16) error {
	_, err := kafka.Ensure(ctx, adm, kafka.Spec{Name: topics.ApplierControl(), Partitions: 1, ReplicationFactor: rf, Retention: 7 * 24 * time.Hour})
	return err
}

// SendControl publishes c on the applier control topic of topics
// (creating the topic with replication factor rf if it is missing), for
// the running applier that owns c's database. An applier that is not
// running never sees it: it reads the topic from its end as of its start.
func SendControl(ctx context.Context, cl *kgo.Client, topics kafka.Topics, rf int16, c Control) error {
	if err := EnsureControlTopic(ctx, kadm.NewClient(cl), topics, rf); err != nil {
		return err
	}
	rec, err := ControlRecord(topics, c)
	if err != nil {
		return err
	}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return fmt.Errorf("publish the request on %s: %w", rec.Topic, err)
	}
	return nil
}

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
	if err := EnsureControlTopic(ctx, adm, a.cfg.Topics, a.cfg.ReplicationFactor); err != nil {
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
			var c Control
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
		case ControlSeek:
			cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{topic: {0: {Epoch: -1, Offset: c.Offset}}})
			a.log.Warn("seeking a database's topic as an operator asked", "db", c.Database, "offset", c.Offset,
				"event_id", c.EventID, "by", c.By, "had_worker", had)
		case ControlReplan:
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
