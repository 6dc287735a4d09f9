package producer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/hmslog"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/internal/location"
	"github.com/hivedr/hivedr/schemas"
)

// Codec turns records into Kafka values and back (schemas.Serde: the
// Confluent wire format with registered schemas).
type Codec interface {
	Encode(v any) ([]byte, error)
	Decode(ctx context.Context, b []byte) (any, error)
}

// Config wires a Tailer.
type Config struct {
	// Conf is the loaded configuration (source name, Kafka, tailer tuning,
	// replication policy).
	Conf *config.Config
	// Source is the notification log to read.
	Source hmslog.Source
	// Codec encodes records (and decodes the checkpoint).
	Codec Codec
	// Lister lists source directories whose files an event does not list
	// (external tables); nil publishes such events without files.
	Lister Lister
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// Metrics; nil means new, unregistered metrics.
	Metrics *Metrics
	// KafkaOpts are added to every Kafka client the tailer makes (TLS, SASL,
	// test hooks).
	KafkaOpts []kgo.Opt
}

// Tailer publishes the source notification log to Kafka. Create it with New
// and run it with Run; it is not reusable after Run returns.
type Tailer struct {
	cfg    Config
	conf   *config.Config
	topics kafka.Topics
	log    *slog.Logger
	m      *Metrics

	prod   *kgo.Client // transactional
	adm    *kadm.Client
	lister *lister // nil: no Lister

	checkpoint     int64 // last event ID published or filtered, committed
	checkpointTime time.Time
	chain          chain // last event published per database topic, committed
	head           int64
	created        map[string]bool // topics known to exist
	inScope        []string        // in-scope databases, for heartbeats
	lastDBRefresh  time.Time
	lastHeartbeat  time.Time
}

// New checks cfg and connects to Kafka. Nothing is read or written yet.
func New(cfg Config) (*Tailer, error) {
	if cfg.Conf == nil || cfg.Source == nil || cfg.Codec == nil {
		return nil, errors.New("producer: Config needs Conf, Source and Codec")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics()
	}
	c := cfg.Conf
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(c.Kafka.Brokers...),
		kgo.TransactionalID(c.Tailer.TransactionalID),
		kgo.TransactionTimeout(60 * time.Second),
		kgo.ProducerBatchMaxBytes(16 << 20),
		kgo.MaxBufferedRecords(1 << 20),
		kgo.ProducerLinger(0),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
	}, cfg.KafkaOpts...)
	prod, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka producer: %w", err)
	}
	t := &Tailer{
		cfg: cfg, conf: c, topics: kafka.Topics{Prefix: c.Kafka.TopicPrefix},
		log: cfg.Logger.With("role", "tailer", "source", c.Source.Name), m: cfg.Metrics,
		prod: prod, adm: kadm.NewClient(prod), created: map[string]bool{},
	}
	if cfg.Lister != nil {
		t.lister = &lister{l: cfg.Lister, pol: &c.Replication, retryFor: c.Tailer.ListRetryFor.Duration,
			now: time.Now, sleep: sleep, log: t.log}
	}
	return t, nil
}

// Run tails until ctx ends (returning nil) or a fatal error: a broken chain
// (errors.Is(err, ErrChainBroken)), a fenced producer, or a configuration
// the cluster refuses. Transient source and Kafka errors are retried.
func (t *Tailer) Run(ctx context.Context) error {
	defer t.prod.Close()
	if err := t.start(ctx); err != nil {
		t.m.setState(schemas.StateFailed)
		return err
	}
	t.m.setState(schemas.StateRunning)
	backoff := time.Second
	for {
		progressed, err := t.step(ctx)
		switch {
		case ctx.Err() != nil:
			t.m.setState(schemas.StateStopped)
			return nil
		case errors.Is(err, ErrChainBroken):
			t.m.setState(schemas.StateChainBroken)
			t.log.Error("chain broken: stopping", "err", err)
			if merr := t.markChainBroken(ctx); merr != nil {
				t.log.Error("could not record CHAIN_BROKEN in the checkpoints topic", "err", merr)
			}
			return err
		case isFatalKafka(err):
			t.m.setState(schemas.StateFailed)
			return err
		case err != nil:
			t.m.errors.Inc()
			t.log.Warn("tail step failed; retrying from the checkpoint", "err", err, "checkpoint", t.checkpoint, "backoff", backoff)
			// A topic deleted under us (by an operator) is created again
			// by the retry instead of failing every produce to it.
			clear(t.created)
			if !sleep(ctx, backoff) {
				t.m.setState(schemas.StateStopped)
				return nil
			}
			backoff = min(backoff*2, 30*time.Second)
			continue
		}
		backoff = time.Second
		if !progressed && !sleep(ctx, t.conf.Tailer.PollInterval.Duration) {
			t.m.setState(schemas.StateStopped)
			return nil
		}
	}
}

// start creates the shared topics, fences any earlier tailer with the same
// transactional ID and reads the checkpoint.
func (t *Tailer) start(ctx context.Context) error {
	k := t.conf.Kafka
	if _, err := kafka.Ensure(ctx, t.adm,
		kafka.Spec{Name: t.topics.Manifests(), Partitions: k.ManifestPartitions, ReplicationFactor: k.ReplicationFactor, Retention: k.Retention.Duration},
		kafka.Spec{Name: t.topics.Completions(), Partitions: k.ManifestPartitions, ReplicationFactor: k.ReplicationFactor, Retention: k.Retention.Duration},
		kafka.Spec{Name: t.topics.Checkpoints(), Partitions: 1, ReplicationFactor: k.ReplicationFactor, Compact: true},
	); err != nil {
		return err
	}
	// Loading the producer ID runs InitProducerID for our transactional
	// ID: it fences any zombie tailer and aborts a transaction a killed
	// tailer left open, so the checkpoint read below sees only what was
	// committed.
	if _, _, err := t.prod.ProducerID(ctx); err != nil {
		return fmt.Errorf("init transactional producer %q: %w", t.conf.Tailer.TransactionalID, err)
	}
	cp, found, err := readCheckpoint(ctx, t.prod, t.topics.Checkpoints(), t.conf.Source.Name, t.cfg.Codec, t.consumeOpts())
	if err != nil {
		return err
	}
	if found {
		t.checkpoint, t.checkpointTime, t.chain = cp.LastEventID, cp.LastEventTime, cp.TopicLastEventIDs
		t.log.Info("resuming from checkpoint", "event_id", cp.LastEventID, "written", cp.Written, "topics", len(cp.TopicLastEventIDs))
	} else {
		start, _ := t.conf.Tailer.StartPosition()
		switch start {
		case -1:
			if start, err = t.cfg.Source.Head(ctx); err != nil {
				return err
			}
			t.log.Info("no checkpoint: starting at the log's head; earlier events are not published (bootstrap them separately)", "event_id", start)
		case 0:
			first, err := t.cfg.Source.Next(ctx, 0, 1)
			if err != nil {
				return err
			}
			if len(first) > 0 {
				start = first[0].EventID - 1
			}
			t.log.Info("no checkpoint: starting at the log's first event", "event_id", start+1)
		default:
			t.log.Info("no checkpoint: starting after the configured event", "event_id", start)
		}
		t.checkpoint = start
	}
	t.m.lastPublished.Set(float64(t.checkpoint))
	return nil
}

// consumeOpts are the options of the short-lived readers of the tailer's
// own topics.
func (t *Tailer) consumeOpts() []kgo.Opt {
	return append([]kgo.Opt{kgo.SeedBrokers(t.conf.Kafka.Brokers...)}, t.cfg.KafkaOpts...)
}

// step reads one batch and publishes it in one transaction, with
// heartbeats when due. It reports whether it published any event.
func (t *Tailer) step(ctx context.Context) (bool, error) {
	if time.Since(t.lastDBRefresh) > 30*time.Second {
		if err := t.refreshDatabases(ctx); err != nil {
			return false, err
		}
	}
	pollStart := time.Now()
	evs, err := t.cfg.Source.Next(ctx, t.checkpoint, t.conf.Tailer.BatchSize)
	t.m.pollSeconds.Observe(time.Since(pollStart).Seconds())
	if err != nil {
		return false, err
	}
	if len(evs) == 0 || t.head < evs[len(evs)-1].EventID {
		if t.head, err = t.cfg.Source.Head(ctx); err != nil {
			return false, err
		}
		t.m.sourceHead.Set(float64(t.head))
	}
	n := contiguous(t.checkpoint, evs)
	if n == 0 && (len(evs) > 0 || t.head > t.checkpoint) {
		if len(evs) == 0 {
			// The head moved past us but nothing came back: either events
			// arrived between the two calls, or everything after the
			// checkpoint was purged. Ask again to tell which.
			if evs, err = t.cfg.Source.Next(ctx, t.checkpoint, 1); err != nil {
				return false, err
			}
		}
		if len(evs) == 0 || evs[0].EventID != t.checkpoint+1 {
			gap := &GapError{Checkpoint: t.checkpoint, Head: t.head}
			if len(evs) > 0 {
				gap.Found = evs[0].EventID
			}
			return false, gap
		}
		return true, nil // a new event appeared; the next step takes it
	}
	evs = evs[:n] // a gap inside the batch is reported by the next step

	heartbeat := time.Since(t.lastHeartbeat) >= t.conf.Tailer.HeartbeatInterval.Duration
	if len(evs) == 0 && !heartbeat {
		return false, nil
	}
	if err := t.publish(ctx, evs, heartbeat); err != nil {
		return false, err
	}
	return len(evs) > 0, nil
}

// publish writes evs, their copy tasks, heartbeats if due, and the new
// checkpoint in one Kafka transaction.
//
// Guarantee 2 (no loss, no gap, exactly once): the checkpoint record
// commits or aborts together with the events it covers, and a restarted
// tailer resumes from the newest committed checkpoint after fencing the
// old producer, so a read_committed consumer sees every event once. The
// checkpoint carries each topic's chain (see chain.go) in the same
// transaction, so the chain a consumer checks never skips a committed
// record nor names an aborted one.
func (t *Tailer) publish(ctx context.Context, evs []hmslog.RawEvent, heartbeat bool) error {
	var (
		recs []*kgo.Record
		jobs []encodeJob
	)
	cp, cpTime := t.checkpoint, t.checkpointTime
	next := t.chain.clone()
	ps := t.prepare(ctx, evs)
	var dbs []string // the database topics this transaction writes
	for _, p := range ps {
		if p.err == nil && p.routed.Filtered == "" {
			dbs = append(dbs, p.routed.Event.Databases...)
		}
	}
	if heartbeat {
		dbs = append(dbs, t.inScope...)
	}
	if err := t.prepareTopics(ctx, next, dbs); err != nil {
		return err
	}
	for i, p := range ps {
		ev := &p.routed.Event
		if p.err != nil {
			return p.err
		}
		t.m.eventsRead.WithLabelValues(string(ev.EventType)).Inc()
		cp, cpTime = evs[i].EventID, ev.EventTime
		if p.routed.Filtered != "" {
			t.m.eventsFiltered.WithLabelValues(p.routed.Filtered, ev.Database).Inc()
			continue
		}
		if len(ev.Errors) > 0 {
			t.log.Warn("publishing event with errors; the applier will halt its databases on it",
				"event_id", ev.EventID, "type", ev.EventType, "databases", ev.Databases, "errors", ev.Errors)
		}
		id := strconv.FormatInt(ev.EventID, 10)
		for _, db := range ev.Databases {
			topic := t.topics.Events(db)
			// Each topic's record carries that topic's previous event, so
			// an event published to two databases is encoded twice.
			r := record(topic, id, nil, schemas.NameMetastoreEvent, id)
			jobs = append(jobs, encodeJob{rec: r, ev: ev, prev: next[db]})
			recs = append(recs, r)
			next[db] = ev.EventID
			t.m.eventsPublished.WithLabelValues(string(ev.EventType), db).Inc()
		}
		for j, task := range p.routed.Tasks {
			// Keyed by target: tasks that write the same file (an INSERT
			// OVERWRITE reusing a name) share a partition, in event order,
			// so one copy daemon sees them in order and runs them one
			// after the other.
			key := task.TargetURI
			if c, err := location.Canonical(key); err == nil {
				key = c // two spellings of one file share a partition too
			}
			r := record(t.topics.Manifests(), key, p.taskValues[j], schemas.NameCopyTask, id)
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: kafka.HeaderTaskID, Value: []byte(task.TaskID)})
			recs = append(recs, r)
		}
		t.m.tasksPublished.Add(float64(len(p.routed.Tasks)))
	}
	if err := t.encodeEvents(jobs); err != nil {
		return err
	}
	if heartbeat {
		now := time.Now()
		for _, db := range t.inScope {
			topic := t.topics.Events(db)
			prev := next[db]
			hv, err := t.cfg.Codec.Encode(&schemas.Heartbeat{
				Database: db, ScannedEventID: cp, ScannedEventTime: cpTime,
				SourceHeadEventID: t.head, Sent: now, Source: t.conf.Source.Name, PreviousEventID: &prev,
			})
			if err != nil {
				return fmt.Errorf("encode heartbeat for %s: %w", db, err)
			}
			recs = append(recs, record(topic, "heartbeat", hv, schemas.NameHeartbeat, ""))
		}
	}
	cv, err := t.cfg.Codec.Encode(&schemas.TailerCheckpoint{
		Source: t.conf.Source.Name, LastEventID: cp, LastEventTime: cpTime, Written: time.Now(), State: schemas.StateRunning,
		TopicLastEventIDs: next,
	})
	if err != nil {
		return fmt.Errorf("encode checkpoint: %w", err)
	}
	recs = append(recs, record(t.topics.Checkpoints(), t.conf.Source.Name, cv, schemas.NameTailerCheckpoint, ""))

	start := time.Now()
	if err := t.transact(ctx, recs); err != nil {
		return err
	}
	t.m.produceSeconds.Observe(time.Since(start).Seconds())
	t.checkpoint, t.checkpointTime, t.chain = cp, cpTime, next
	t.m.lastPublished.Set(float64(cp))
	if heartbeat {
		t.lastHeartbeat = time.Now()
	}
	return nil
}

// markChainBroken writes one more checkpoint at the current position with
// state CHAIN_BROKEN, so `hivedr status` can say why the tailer stopped
// after its process (and its state metric) is gone. A restarted tailer
// resumes from it as from any checkpoint, and finds the same gap.
func (t *Tailer) markChainBroken(ctx context.Context) error {
	cv, err := t.cfg.Codec.Encode(&schemas.TailerCheckpoint{
		Source: t.conf.Source.Name, LastEventID: t.checkpoint, LastEventTime: t.checkpointTime, Written: time.Now(),
		State: schemas.StateChainBroken, TopicLastEventIDs: t.chain,
	})
	if err != nil {
		return fmt.Errorf("encode checkpoint: %w", err)
	}
	return t.transact(ctx, []*kgo.Record{record(t.topics.Checkpoints(), t.conf.Source.Name, cv, schemas.NameTailerCheckpoint, "")})
}

// encodeJob is one event record whose value is still to be encoded with
// its topic's previous event.
type encodeJob struct {
	rec  *kgo.Record
	ev   *schemas.Event
	prev int64
}

// encodeEvents fills in the jobs' record values, on all cores.
func (t *Tailer) encodeEvents(jobs []encodeJob) error {
	errs := make([]error, len(jobs))
	parallel(len(jobs), func(i int) {
		j := jobs[i]
		ev := *j.ev // a copy: the same event may be encoded for two topics at once
		ev.PreviousEventID = &j.prev
		if j.rec.Value, errs[i] = t.cfg.Codec.Encode(&ev); errs[i] != nil {
			errs[i] = fmt.Errorf("encode event %d (%s) for %s: %w", ev.EventID, ev.EventType, j.rec.Topic, errs[i])
		}
	})
	return errors.Join(errs...)
}

// prepared is one event decoded, routed and with its copy tasks encoded.
type prepared struct {
	routed     Routed
	taskValues [][]byte // the encoded copy tasks
	err        error
}

// prepare decodes, routes and encodes the copy tasks of evs on all cores:
// each step is pure, and results keep the order of evs.
func (t *Tailer) prepare(ctx context.Context, evs []hmslog.RawEvent) []prepared {
	out := make([]prepared, len(evs))
	parallel(len(evs), func(i int) { out[i] = t.prepareOne(ctx, evs[i]) })
	return out
}

// parallel runs fn(0) ... fn(n-1) on up to GOMAXPROCS goroutines, a few
// dozen calls each at least, and returns when all have.
func parallel(n int, fn func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), max(1, n/32))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				fn(i)
			}
		}()
	}
	wg.Wait()
}

// prepareOne decodes, routes, lists and encodes one event. Scope comes
// first: an event of a database or table out of scope is never listed.
func (t *Tailer) prepareOne(ctx context.Context, raw hmslog.RawEvent) prepared {
	ev := Decode(raw)
	ev.Source = t.conf.Source.Name
	p := prepared{routed: Route(ev, &t.conf.Replication)}
	if p.routed.Filtered != "" {
		return p
	}
	if t.lister != nil {
		files, errs, err := t.lister.list(ctx, &p.routed.Event)
		if err != nil {
			return prepared{err: err}
		}
		p.routed.AddFiles(files, &t.conf.Replication)
		p.routed.Event.Errors = append(p.routed.Event.Errors, errs...)
	}
	for i := range p.routed.Tasks {
		v, err := t.cfg.Codec.Encode(&p.routed.Tasks[i])
		if err != nil {
			p.err = fmt.Errorf("encode copy task %s: %w", p.routed.Tasks[i].TaskID, err)
			return p
		}
		p.taskValues = append(p.taskValues, v)
	}
	return p
}

// transact produces recs in one transaction and commits it; on any error
// it aborts, so nothing of the batch becomes visible.
func (t *Tailer) transact(ctx context.Context, recs []*kgo.Record) error {
	if err := t.prod.BeginTransaction(); err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	// Produce callbacks run on franz-go's goroutines, possibly several at
	// once (one per partition), so the first error is kept under a lock.
	var (
		mu        sync.Mutex
		firstErr  error
		recreated []string // topics deleted and created again under us
		wg        sync.WaitGroup
	)
	wg.Add(len(recs))
	for _, r := range recs {
		t.prod.Produce(ctx, r, func(r *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = fmt.Errorf("produce to %s: %w", r.Topic, err)
				}
				if errors.Is(err, kerr.UnknownTopicID) && !slices.Contains(recreated, r.Topic) {
					recreated = append(recreated, r.Topic)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(recreated) > 0 {
		// The client keeps the ID of the topic it first produced to; a
		// topic deleted and created again fails with UNKNOWN_TOPIC_ID
		// until the client forgets it. The retry (from the checkpoint)
		// then produces to the new topic, whose records continue each
		// chain, so a consumer of the old topic sees the loss.
		defer func() {
			t.prod.PurgeTopicsFromProducing(recreated...)
			t.log.Warn("topics were deleted and created again; producing to the new ones", "topics", recreated)
		}()
	}
	commit := kgo.TryCommit
	if firstErr != nil {
		commit = kgo.TryAbort
		if err := t.prod.AbortBufferedRecords(ctx); err != nil {
			return errors.Join(firstErr, fmt.Errorf("abort buffered records: %w", err))
		}
	}
	if err := t.prod.EndTransaction(ctx, commit); err != nil {
		return errors.Join(firstErr, fmt.Errorf("end transaction: %w", err))
	}
	return firstErr
}

func record(topic, key string, value []byte, typ, eventID string) *kgo.Record {
	r := &kgo.Record{Topic: topic, Key: []byte(key), Value: value,
		Headers: []kgo.RecordHeader{{Key: kafka.HeaderType, Value: []byte(typ)}}}
	if eventID != "" {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: kafka.HeaderEventID, Value: []byte(eventID)})
	}
	return r
}

// refreshDatabases re-reads which source databases are in scope, for
// heartbeats.
func (t *Tailer) refreshDatabases(ctx context.Context) error {
	dbs, err := t.cfg.Source.Databases(ctx)
	if err != nil {
		return err
	}
	var in []string
	for _, db := range dbs {
		if _, ok := t.conf.Replication.Scope(db); ok {
			in = append(in, db)
		}
	}
	slices.Sort(in)
	t.inScope = in
	t.lastDBRefresh = time.Now()
	return nil
}

// isFatalKafka reports errors no retry can fix: another tailer with our
// transactional ID fenced us, or the cluster refuses us the ID.
func isFatalKafka(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) ||
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed) || errors.Is(err, kerr.InvalidTransactionTimeout)
}

func sleep(ctx context.Context, d time.Duration) bool {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-tm.C:
		return true
	}
}
