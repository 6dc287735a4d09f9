package cdc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/schemas"
)

// EventDecoder decodes the event topics' records (schemas.Serde and
// schemas.Decoder do).
type EventDecoder interface {
	Decode(ctx context.Context, b []byte) (any, error)
}

// Config configures a View.
type Config struct {
	Topics kafka.Topics
	// Source and Version go into every record's source block.
	Source, Version string
	// KafkaOpts reach the cluster (seed brokers, TLS, SASL).
	KafkaOpts []kgo.Opt
	Events    EventDecoder
	Codec     *Codec
	// ReplicationFactor, Precreated and TopicConfigs make the view's
	// topics (compacted, one partition each).
	ReplicationFactor int16
	Precreated        bool
	TopicConfigs      map[string]string
	// MaxRecords bounds the event records one transaction derives from
	// (default 2,000).
	MaxRecords int
	Logger     *slog.Logger
	Metrics    *Metrics
}

// View writes the change view: it reads every database's event topic
// (read_committed) and writes each database's objects' changes to
// <prefix>.cdc.<db> in Debezium's shape, with the offsets it read in the
// same Kafka transaction, so every record is written exactly once and
// each object's records in the order of its events. A view stopped or
// killed starts again where its last transaction ended.
type View struct {
	cfg Config
	log *slog.Logger
	m   *Metrics

	ensured map[string]bool // view topics known to exist
}

// New returns a View.
func New(cfg Config) *View {
	if cfg.MaxRecords <= 0 {
		cfg.MaxRecords = 2000
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics()
	}
	return &View{cfg: cfg, log: cfg.Logger.With("part", "cdc"), m: cfg.Metrics, ensured: map[string]bool{}}
}

// FatalError is an event record the view cannot read (its schema unknown
// to the registry, or not an event at all): the view stops there, so as
// not to go past a change it did not write. Its offsets stay where its
// last transaction left them.
type FatalError struct {
	Topic  string
	Offset int64
	Err    error
}

func (e *FatalError) Error() string {
	return fmt.Sprintf("change view: cannot read %s at offset %d: %v (the view stops there; DR replication goes on)",
		e.Topic, e.Offset, e.Err)
}

func (e *FatalError) Unwrap() error { return e.Err }

// Run writes the view until ctx ends (nil) or a record it cannot read
// (*FatalError). Other failures (Kafka, the registry) restart its
// session after a pause, which reads the view's index again.
func (v *View) Run(ctx context.Context) error {
	const first = time.Second
	pause := first
	for {
		began := time.Now()
		err := v.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var fe *FatalError
		if errors.As(err, &fe) {
			v.m.halted.Set(1)
			return err
		}
		v.m.restarts.Inc()
		if time.Since(began) > 5*time.Minute {
			pause = first // a long healthy session: this failure is a new one
		}
		v.log.Warn("change view: session ended; starting again", "err", err, "in", pause)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(pause):
		}
		pause = min(2*pause, 30*time.Second)
	}
}

// session runs one group transact session: fence the previous writer,
// read the index back from the view's topics, then derive and commit
// batch after batch.
func (v *View) session(ctx context.Context) error {
	c := v.cfg
	opts := append([]kgo.Opt{
		kgo.TransactionalID(c.Topics.CDCTransactionalID()),
		kgo.TransactionTimeout(60 * time.Second),
		kgo.ConsumerGroup(c.Topics.CDCGroup()),
		// Static membership: a view started again after a kill takes its
		// place in the group at once instead of waiting for the killed
		// member's session to time out.
		kgo.InstanceID(c.Topics.CDCGroup()),
		kgo.ConsumeRegex(),
		kgo.ConsumeTopics(c.Topics.EventsPattern().String()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		// A new database's view topic is produced to right after it is
		// made: the client asks for its metadata at once, not up to 5 s
		// later (franz-go's default minimum age).
		kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.MetadataMaxAge(10 * time.Second),
		kgo.FetchMaxWait(500 * time.Millisecond),
	}, c.KafkaOpts...)
	sess, err := kgo.NewGroupTransactSession(opts...)
	if err != nil {
		return fmt.Errorf("change view: kafka: %w", err)
	}
	defer sess.Close()
	// InitProducerID fences a previous view and aborts what it left open,
	// so the view's topics hold only committed records from here on.
	if _, _, err := sess.Client().ProducerID(ctx); err != nil {
		return fmt.Errorf("change view: init transactional producer %q: %w", c.Topics.CDCTransactionalID(), err)
	}
	adm := kadm.NewClient(sess.Client())
	if err := v.ensure(ctx, adm, c.Topics.CDCHeartbeats(), false); err != nil {
		return err
	}
	idx, err := v.rebuild(ctx, adm)
	if err != nil {
		return err
	}
	v.log.Info("change view: reading the event topics", "objects", idx.Len(), "group", c.Topics.CDCGroup())
	b := &batcher{v: v, idx: idx, adm: adm, queues: map[string][]*kgo.Record{}}
	for {
		fs := sess.PollRecords(ctx, c.MaxRecords)
		if ctx.Err() != nil {
			return nil
		}
		var ferr error
		fs.EachError(func(topic string, p int32, err error) {
			if ferr == nil {
				ferr = fmt.Errorf("change view: fetch %s/%d: %w", topic, p, err)
			}
		})
		if ferr != nil {
			return ferr
		}
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			b.queues[p.Topic] = append(b.queues[p.Topic], p.Records...)
		})
		out, done, err := b.run(ctx)
		if err != nil {
			return err // the index may be ahead of Kafka: the next session reads it again
		}
		// A topic whose head waits for another's copy stops being
		// fetched once its queue holds a batch, so waiting costs no more
		// memory than that.
		var pause, resume []string
		for topic, q := range b.queues {
			if len(q) >= c.MaxRecords {
				pause = append(pause, topic)
			} else {
				resume = append(resume, topic)
			}
		}
		sess.Client().PauseFetchTopics(pause...)
		sess.Client().ResumeFetchTopics(resume...)
		if len(done) == 0 {
			continue
		}
		if err := v.commit(ctx, sess, adm, out, done); err != nil {
			return err
		}
	}
}

// batcher holds the event records fetched and not yet derived, a queue
// per topic, and derives what it can: every record in its topic's order;
// an event on several databases' topics (a table renamed across
// databases, a transaction writing several) only once it heads each of
// those topics' queues, all its copies then in one go. So every database's
// records come in its events' order, and a rename's two sides read the
// index as both databases left it just before the rename.
type batcher struct {
	v      *View
	idx    *Index
	adm    *kadm.Client
	queues map[string][]*kgo.Record
	// heads holds the decoded value of records decoded while they wait at
	// a queue's head, so a waiting event is decoded once, not every poll.
	heads map[*kgo.Record]any
	// waiting is, by event ID, an event at a queue's head that waits for
	// its other copies: since when (logged after a minute) and when the
	// topics it waits on were last seen to exist (asked again every
	// recheckTopics, not every poll).
	waiting map[string]*waitingEvent
}

// waitingEvent is an event waiting for a copy on another topic.
type waitingEvent struct {
	since, warned, checked time.Time
}

// recheckTopics is how often a waiting event asks again whether the
// topics it waits on still exist.
const recheckTopics = 5 * time.Second

// decode returns r's value, decoded once while r waits in its queue.
func (b *batcher) decode(ctx context.Context, r *kgo.Record) (any, error) {
	if v, ok := b.heads[r]; ok {
		return v, nil
	}
	v, err := b.v.decode(ctx, r)
	if err != nil {
		return nil, err
	}
	if b.heads == nil {
		b.heads = map[*kgo.Record]any{}
	}
	b.heads[r] = v
	return v, nil
}

// run derives all it can of the queues and returns the view records and,
// by topic, the offset after the last record derived.
func (b *batcher) run(ctx context.Context) ([]*kgo.Record, map[string]kgo.EpochOffset, error) {
	var out []*kgo.Record
	done := map[string]kgo.EpochOffset{}
	pop := func(topic string) {
		r := b.queues[topic][0]
		b.queues[topic] = b.queues[topic][1:]
		delete(b.heads, r)
		done[topic] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset + 1}
	}
	pattern := b.v.cfg.Topics.EventsPattern()
	for progress := true; progress; {
		progress = false
		for topic, q := range b.queues {
			for len(q) > 0 {
				m := pattern.FindStringSubmatch(topic)
				if m == nil {
					pop(topic)
					q = b.queues[topic]
					continue
				}
				r := q[0]
				val, err := b.decode(ctx, r)
				if err != nil {
					return nil, nil, err
				}
				ev, isEvent := val.(*schemas.Event)
				if !isEvent || len(ev.Databases) < 2 {
					recs, err := b.v.one(ctx, m[1], r, val, b.idx)
					if err != nil {
						return nil, nil, err
					}
					out = append(out, recs...)
					pop(topic)
					q = b.queues[topic]
					progress = true
					continue
				}
				copies, ok, err := b.copies(ctx, ev)
				if err != nil {
					return nil, nil, err
				}
				if !ok {
					break // waits for its other copies
				}
				for _, ct := range copies {
					recs, err := b.v.one(ctx, pattern.FindStringSubmatch(ct)[1], b.queues[ct][0], val, b.idx)
					if err != nil {
						return nil, nil, err
					}
					out = append(out, recs...)
					pop(ct)
				}
				q = b.queues[topic]
				progress = true
			}
		}
	}
	return out, done, nil
}

// copies returns the topics whose queues ev heads, if it heads every one
// of its databases' topics that exists; ok false while one is behind.
func (b *batcher) copies(ctx context.Context, ev *schemas.Event) (topics []string, ok bool, err error) {
	var missing []string
	for _, db := range ev.Databases {
		t := b.v.cfg.Topics.Events(db)
		q := b.queues[t]
		if len(q) > 0 {
			val, err := b.decode(ctx, q[0])
			if err != nil {
				return nil, false, err
			}
			if e, isEvent := val.(*schemas.Event); isEvent && e.EventID == ev.EventID {
				topics = append(topics, t)
				continue
			}
		}
		missing = append(missing, t)
	}
	key := strconv.FormatInt(ev.EventID, 10)
	if len(missing) == 0 {
		delete(b.waiting, key)
		return topics, true, nil
	}
	// A database whose topic is gone (deleted, out of scope) has no copy
	// to wait for.
	now := time.Now()
	w := b.waiting[key]
	if w != nil && now.Sub(w.checked) < recheckTopics {
		return nil, false, nil // its topics existed a moment ago
	}
	td, err := b.adm.ListTopics(ctx, missing...)
	if err != nil {
		return nil, false, fmt.Errorf("change view: list topics %v: %w", missing, err)
	}
	for _, t := range missing {
		if d, exists := td[t]; exists && d.Err == nil {
			if b.waiting == nil {
				b.waiting = map[string]*waitingEvent{}
			}
			if w == nil {
				w = &waitingEvent{since: now, warned: now}
				b.waiting[key] = w
			}
			w.checked = now
			if now.Sub(w.warned) > time.Minute {
				b.v.log.Warn("change view: an event on several databases' topics waits for its copy on another",
					"event_id", ev.EventID, "type", ev.EventType, "waits_for", t, "since", w.since)
				w.warned = now
			}
			return nil, false, nil
		}
	}
	delete(b.waiting, key)
	return topics, true, nil
}

// decode decodes an event topic's record; a record no schema reads
// stops the view there.
func (v *View) decode(ctx context.Context, r *kgo.Record) (any, error) {
	val, err := v.cfg.Events.Decode(ctx, r.Value)
	if err != nil {
		if errors.Is(err, schemas.ErrUnknownSchemaID) {
			return nil, &FatalError{Topic: r.Topic, Offset: r.Offset, Err: err}
		}
		return nil, fmt.Errorf("change view: decode %s at offset %d: %w", r.Topic, r.Offset, err)
	}
	return val, nil
}

// one derives the view records of one event record, decoded as val, read
// from database db's topic.
func (v *View) one(ctx context.Context, db string, r *kgo.Record, val any, idx *Index) ([]*kgo.Record, error) {
	switch ev := val.(type) {
	case *schemas.Heartbeat:
		hv, err := v.cfg.Codec.Heartbeat(ctx, v.cfg.Topics.CDCHeartbeats(), ev)
		if err != nil {
			return nil, err
		}
		return []*kgo.Record{{Topic: v.cfg.Topics.CDCHeartbeats(), Key: []byte(ev.Database), Value: hv}}, nil
	case *schemas.Event:
		v.m.events.Inc()
		if len(ev.Errors) > 0 {
			v.m.eventsWithErrors.Inc()
			v.log.Warn("change view: an event the tailer published with errors; its changes are not in the view",
				"topic", r.Topic, "offset", r.Offset, "event_id", ev.EventID, "type", ev.EventType, "errors", ev.Errors)
		}
		changes := Derive(ev, db, idx)
		idx.Apply(changes)
		v.m.objects.Set(float64(idx.Len()))
		src := Source{Name: v.cfg.Source, Version: v.cfg.Version, EventID: ev.EventID, EventTime: ev.EventTime}
		if ev.EventType.IsHivedr() && ev.Snapshot != nil {
			src.Snapshot, src.BootstrapID = true, ev.Snapshot.BootstrapID
		}
		if src.Name == "" {
			src.Name = ev.Source
		}
		var out []*kgo.Record
		for _, ch := range changes {
			topic := v.cfg.Topics.CDC(ch.Key.Database)
			k, err := v.cfg.Codec.Key(ctx, topic, ch.Key)
			if err != nil {
				return nil, err
			}
			val, err := v.cfg.Codec.Value(ctx, topic, ch, src)
			if err != nil {
				return nil, err
			}
			id := []byte(strconv.FormatInt(ev.EventID, 10))
			hdr := []kgo.RecordHeader{{Key: kafka.HeaderType, Value: []byte("io.hivedr.cdc.Envelope")}, {Key: kafka.HeaderEventID, Value: id}}
			out = append(out, &kgo.Record{Topic: topic, Key: k, Value: val, Headers: hdr})
			if ch.Op == OpDelete { // then the tombstone, for compaction
				out = append(out, &kgo.Record{Topic: topic, Key: k, Headers: hdr[1:]})
			}
			v.m.records.WithLabelValues(string(ch.Op)).Inc()
		}
		return out, nil
	default:
		return nil, &FatalError{Topic: r.Topic, Offset: r.Offset, Err: fmt.Errorf("a %T is not an event topic's record", val)}
	}
}

// commit writes out and, by topic, the offsets after the event records
// derived (done) in one transaction. Records fetched and not derived yet
// (waiting in a queue) are not committed: a view started again reads them
// again.
func (v *View) commit(ctx context.Context, sess *kgo.GroupTransactSession, adm *kadm.Client, out []*kgo.Record, done map[string]kgo.EpochOffset) error {
	for _, r := range out {
		if err := v.ensure(ctx, adm, r.Topic, r.Topic != v.cfg.Topics.CDCHeartbeats()); err != nil {
			return err
		}
	}
	if err := sess.Begin(); err != nil {
		return fmt.Errorf("change view: begin transaction: %w", err)
	}
	firstErr := kafka.ProduceAll(ctx, sess, out)
	if firstErr != nil {
		firstErr = fmt.Errorf("change view: %w", firstErr)
	}
	try := kgo.TryCommit
	if firstErr != nil {
		try = kgo.TryAbort
	}
	ectx := context.WithoutCancel(ctx)
	// The session would commit the offsets of everything polled; the
	// hook commits each topic's offset after its last record derived,
	// and nothing for the others.
	hook := kgo.PreTxnCommitFnContext(ectx, func(req *kmsg.TxnOffsetCommitRequest) error {
		topics := req.Topics[:0]
		for _, t := range req.Topics {
			if _, ok := done[t.Topic]; ok {
				topics = append(topics, t)
			}
		}
		// A topic whose records were all fetched before the last commit
		// (they waited in its queue) is not among the session's offsets.
		for topic := range done {
			if !slices.ContainsFunc(topics, func(t kmsg.TxnOffsetCommitRequestTopic) bool { return t.Topic == topic }) {
				t := kmsg.NewTxnOffsetCommitRequestTopic()
				t.Topic = topic
				t.Partitions = []kmsg.TxnOffsetCommitRequestTopicPartition{kmsg.NewTxnOffsetCommitRequestTopicPartition()}
				topics = append(topics, t)
			}
		}
		for i := range topics {
			eo := done[topics[i].Topic]
			p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			p.Partition, p.Offset, p.LeaderEpoch = 0, eo.Offset, eo.Epoch
			topics[i].Partitions = []kmsg.TxnOffsetCommitRequestTopicPartition{p}
		}
		req.Topics = topics
		return nil
	})
	start := time.Now()
	committed, err := sess.End(hook, try)
	v.m.commitSeconds.Observe(time.Since(start).Seconds())
	switch {
	case err != nil:
		v.m.transactions.WithLabelValues("failed").Inc()
		return fmt.Errorf("change view: end transaction: %w", err)
	case firstErr != nil:
		v.m.transactions.WithLabelValues("aborted").Inc()
		return firstErr
	case !committed:
		v.m.transactions.WithLabelValues("aborted").Inc()
		return errors.New("change view: transaction aborted (the group rebalanced)")
	}
	v.m.transactions.WithLabelValues("committed").Inc()
	return nil
}

// ensure creates a view topic (compacted) or the heartbeat topic once.
func (v *View) ensure(ctx context.Context, adm *kadm.Client, topic string, compact bool) error {
	if v.ensured[topic] {
		return nil
	}
	spec := kafka.Spec{Name: topic, Partitions: 1, ReplicationFactor: v.cfg.ReplicationFactor, Precreated: v.cfg.Precreated}
	if compact {
		spec.Compact, spec.Configs = true, v.cfg.TopicConfigs
	} else {
		spec.Retention = 7 * 24 * time.Hour
	}
	if _, err := kafka.Ensure(ctx, adm, spec); err != nil {
		return fmt.Errorf("change view: %w", err)
	}
	v.ensured[topic] = true
	return nil
}

// rebuild reads the index back from the view's topics: each key's last
// record, a delete or tombstone removing it. The view's previous writer
// was fenced first, so the topics hold what its last committed
// transaction left, the same transaction as the offsets the group
// resumes from.
func (v *View) rebuild(ctx context.Context, adm *kadm.Client) (*Index, error) {
	start := time.Now()
	td, err := adm.ListTopics(ctx)
	if err != nil {
		return nil, fmt.Errorf("change view: list topics: %w", err)
	}
	idx := NewIndex()
	pattern := v.cfg.Topics.CDCPattern()
	var topics []string
	for _, topic := range td.Names() {
		if pattern.MatchString(topic) {
			topics = append(topics, topic)
			v.ensured[topic] = true
		}
	}
	read := 0
	if len(topics) > 0 {
		starts, err := adm.ListStartOffsets(ctx, topics...)
		if err != nil {
			return nil, fmt.Errorf("change view: start offsets of its topics: %w", err)
		}
		ends, err := adm.ListCommittedOffsets(ctx, topics...)
		if err != nil {
			return nil, fmt.Errorf("change view: committed end offsets of its topics: %w", err)
		}
		from, end := map[string]int64{}, map[string]int64{}
		for _, topic := range topics {
			e, ok := ends.Lookup(topic, 0)
			if !ok || e.Err != nil {
				return nil, fmt.Errorf("change view: committed end of %s: %v", topic, e.Err)
			}
			end[topic] = e.Offset
			if s, ok := starts.Lookup(topic, 0); ok && s.Err == nil {
				from[topic] = s.Offset
			}
		}
		err = kafka.EachCommittedFirst(ctx, v.cfg.KafkaOpts, from, end, func(r *kgo.Record) error {
			rec, err := v.cfg.Codec.Decode(ctx, r.Key, r.Value)
			if err != nil {
				return fmt.Errorf("change view: read back %s at offset %d: %w", r.Topic, r.Offset, err)
			}
			read++
			switch {
			case rec.Tombstone || rec.Op == OpDelete:
				idx.Delete(rec.Key)
			case rec.After != nil:
				boot := ""
				if rec.Op == OpRead {
					boot = rec.Bootstrap
				}
				idx.Put(rec.After, boot)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	v.m.objects.Set(float64(idx.Len()))
	v.m.rebuildSeconds.Set(time.Since(start).Seconds())
	v.log.Info("change view: index read back from its topics", "records", read, "objects", idx.Len(), "took", time.Since(start).Round(time.Millisecond))
	return idx, nil
}

// Metrics are the view's Prometheus metrics (hivedr_cdc_*).
type Metrics struct {
	events           prometheus.Counter
	eventsWithErrors prometheus.Counter
	records          *prometheus.CounterVec
	transactions     *prometheus.CounterVec
	commitSeconds    prometheus.Histogram
	objects          prometheus.Gauge
	rebuildSeconds   prometheus.Gauge
	restarts         prometheus.Counter
	halted           prometheus.Gauge
}

// NewMetrics returns the view's metrics, not registered.
func NewMetrics() *Metrics {
	return &Metrics{
		events: prometheus.NewCounter(prometheus.CounterOpts{Name: "hivedr_cdc_events_total",
			Help: "Event records the change view read."}),
		eventsWithErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "hivedr_cdc_events_with_errors_total",
			Help: "Events the tailer published with errors (undecodable messages, ...): their changes are not in the view."}),
		records: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hivedr_cdc_records_total",
			Help: "Change view records written, by op (a delete's tombstone not counted)."}, []string{"op"}),
		transactions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hivedr_cdc_transactions_total",
			Help: "The change view's Kafka transactions, by outcome (committed, aborted, failed)."}, []string{"outcome"}),
		commitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "hivedr_cdc_commit_seconds",
			Help: "Time to end one change view transaction.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 12)}),
		objects: prometheus.NewGauge(prometheus.GaugeOpts{Name: "hivedr_cdc_objects",
			Help: "Databases, tables and partitions the change view holds."}),
		rebuildSeconds: prometheus.NewGauge(prometheus.GaugeOpts{Name: "hivedr_cdc_rebuild_seconds",
			Help: "How long the change view took to read its index back from its topics at its last start."}),
		restarts: prometheus.NewCounter(prometheus.CounterOpts{Name: "hivedr_cdc_session_restarts_total",
			Help: "Change view sessions ended by a failure and started again."}),
		halted: prometheus.NewGauge(prometheus.GaugeOpts{Name: "hivedr_cdc_halted",
			Help: "1 when the change view stopped at a record it cannot read (its log names it)."}),
	}
}

// Register registers the metrics with r.
func (m *Metrics) Register(r prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.events, m.eventsWithErrors, m.records, m.transactions, m.commitSeconds,
		m.objects, m.rebuildSeconds, m.restarts, m.halted} {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// Metrics returns the view's metrics, to register.
func (v *View) Metrics() *Metrics { return v.m }

// Events is the number of event records the view has derived and
// committed or is about to (hivedr_cdc_events_total).
func (m *Metrics) Events() int64 {
	var pb dto.Metric
	if err := m.events.Write(&pb); err != nil {
		return 0
	}
	return int64(pb.GetCounter().GetValue())
}
