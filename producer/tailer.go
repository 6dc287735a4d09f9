package producer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hivedr/hivedr/internal/buildinfo"
	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/hmsevent"
	"github.com/hivedr/hivedr/internal/hmslog"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/internal/location"
	"github.com/hivedr/hivedr/internal/retry"
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
	// Origin is the source section: the source's name (the tailer's
	// checkpoints, every record's source info) and metastore.
	Origin config.Source
	// Kafka is the cluster and the topics' settings.
	Kafka config.Kafka
	// Tailer is the tailer's tuning, validated.
	Tailer config.Tailer
	// Replication is the policy, validated (config.Config.Validate
	// compiles it).
	Replication config.Replication
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
	// Snapshots reads the source metastore's objects for bootstraps; nil
	// takes no bootstrap request (they wait on the control topic).
	Snapshots Snapshots
	// Txns reads source transactions' writes for commits whose message
	// names none (txns.go); nil publishes those commits without them.
	Txns TxnWrites
	// DirSnapshots takes HDFS snapshots of the source directories a
	// bootstrap copies (*fs.Router); nil copies from the live tree.
	DirSnapshots DirSnapshots
	// Scope delivers a new replication scope (config.Watch: the file
	// changed, or SIGHUP): taken between two transactions (applyScope).
	// nil: the scope read at start.
	Scope <-chan config.Replication
}

// Tailer publishes the source notification log to Kafka. Create it with New
// and run it with Run; it is not reusable after Run returns.
type Tailer struct {
	cfg    Config
	conf   *sections // cfg's configuration sections, which applyScope changes
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
	heartbeatRound int64 // heartbeat rounds begun (dueHeartbeats)
	faulted        bool  // a FaultEnv point was reached (fault.go)

	// writer names this process in its checkpoints (kafka.HeaderWriter).
	writer string
	// rebuild: the producer is replaced and the checkpoint read again
	// before the next step (restart), after a transaction whose end is
	// unknown or a fence; fenced: first check that no other tailer
	// wrote the newest checkpoint.
	rebuild, fenced bool

	// Bootstraps (bootstrap.go), committed with the checkpoint.
	reqOff       int64                    // next offset of the control topic to read
	boots        []schemas.BootstrapState // in progress
	lastReqPoll  time.Time
	warned       map[string]bool      // what was logged once
	autoCheck    bool                 // look for databases to bootstrap by policy
	partNames    map[string]partNames // by bootstrap: the partitions of the table it is in
	lastProgress time.Time            // when bootstraps' progress was last logged

	// By bootstrap: the tables this process read (bootstrap_reads.go).
	tablesRead map[string]map[string]bool

	// HDFS snapshots of bootstraps (hdfssnap.go), committed with the
	// checkpoint: those waiting for their copies, and where the count of
	// completions stands.
	releases    []schemas.SnapshotRelease
	compOffs    []int64
	touch       map[string]*touchIndex // by bootstrap: tables changed since its snapshots
	lastRelease time.Time              // when completions were last counted

	// Source transactions that allocated write IDs and have not ended
	// (txns.go), committed with the checkpoint.
	txns *txnTable

	// Bootstraps' transactional tables (bootstrap_acid.go), in memory.
	acid *acidBoot

	version string // this build's, for source_info

	// maxBytes is the largest record batch the topics take
	// (kafka.max_message_bytes); a record over it is published without
	// its payload, with RECORD_TOO_LARGE (fit.go).
	maxBytes int32
}

// sections are the configuration sections a Tailer reads, named as in
// the configuration file.
type sections struct {
	Source      config.Source
	Kafka       config.Kafka
	Tailer      config.Tailer
	Replication config.Replication
}

// New checks cfg and connects to Kafka. Nothing is read or written yet.
func New(cfg Config) (*Tailer, error) {
	if cfg.Origin.Name == "" || len(cfg.Kafka.Brokers) == 0 || cfg.Tailer.TransactionalID == "" || cfg.Source == nil || cfg.Codec == nil {
		return nil, errors.New("producer: Config needs Origin, Kafka, Tailer (validated), Source and Codec")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics()
	}
	config.FillZero(&cfg.Kafka.MaxMessageBytes, "kafka.max_message_bytes") // built in code without it
	c := &sections{Source: cfg.Origin, Kafka: cfg.Kafka, Tailer: cfg.Tailer, Replication: cfg.Replication}
	t := &Tailer{
		cfg: cfg, conf: c, topics: kafka.Topics{Prefix: c.Kafka.TopicPrefix},
		log: cfg.Logger.With("role", "tailer", "source", c.Source.Name), m: cfg.Metrics,
		warned: map[string]bool{}, version: buildinfo.Get().Version,
		maxBytes: c.Kafka.MaxMessageBytes, writer: writerName(),
	}
	t.forget()
	prod, err := t.newProducer()
	if err != nil {
		return nil, err
	}
	t.prod, t.adm = prod, kadm.NewClient(prod)
	if cfg.Lister != nil {
		t.lister = &lister{l: cfg.Lister, pol: &c.Replication, retryFor: c.Tailer.ListRetryFor.Duration,
			now: time.Now, sleep: sleep, log: t.log, meta: newMetadataCache(metadataCached)}
	}
	return t, nil
}

// Run tails until ctx ends (returning nil) or a fatal error: a broken chain
// (errors.Is(err, ErrChainBroken)), a fenced producer, or a configuration
// the cluster refuses. Transient source and Kafka errors are retried.
func (t *Tailer) Run(ctx context.Context) error {
	defer func() { t.closeProducer() }() // (restart replaces it)
	// Kafka (or the source) may be away for a while at start, as when the
	// broker restarts: wait for it, bounded, instead of exiting.
	if err := retry.Until(ctx, t.log, "tailer start (topics, transactional producer, checkpoint)", retry.Policy{
		Fatal: func(err error) bool { return isFatalKafka(err) || isFenced(err) || errors.Is(err, ErrChainBroken) },
	}, func(ctx context.Context) error {
		t.m.loop.Beat() // each attempt: a start retried is alive
		return t.start(ctx)
	}); err != nil {
		if ctx.Err() != nil {
			t.m.setState(schemas.StateStopped)
			return nil
		}
		t.m.setState(schemas.StateFailed)
		return err
	}
	t.m.setState(schemas.StateRunning)
	backoff := time.Second
	var lastErr error // the last step's, for restart's report
	// scope is a change of the replication scope not applied yet: taken
	// from cfg.Scope, applied again each round until applyScope succeeds.
	var scope *config.Replication
	for {
		// Every round marks hivedr_tailer_loop_timestamp_seconds
		// (health.Loop), failed ones too: a round is one batch of events
		// and one page of each bootstrap, each call bounded by its
		// timeout, then a wait of at most 30s.
		t.m.loop.Round(ctx)
		var err error
		select {
		case rep, ok := <-t.cfg.Scope:
			if ok {
				scope = &rep
			}
		default:
		}
		// (A failed round is rebuilt from the checkpoint first: the
		// scope applies to the state Kafka holds.)
		if t.rebuild {
			err = t.restart(ctx, lastErr)
		}
		if err == nil && scope != nil {
			if err = t.applyScope(ctx, *scope); err == nil {
				scope = nil
			}
		}
		var progressed bool
		if err == nil {
			progressed, err = t.step(ctx)
		}
		if err == nil {
			var booted bool
			booted, err = t.bootstrapStep(ctx)
			progressed = progressed || booted
		}
		switch {
		case ctx.Err() != nil:
			t.m.setState(schemas.StateStopped)
			return nil
		case errors.Is(err, ErrChainBroken):
			t.m.setState(schemas.StateChainBroken)
			t.log.Error("CHAIN_BROKEN: stopping; repair with `hivedr bootstrap -repair-chain`, then restart the tailer", "err", err)
			if merr := t.markChainBroken(ctx); merr != nil {
				t.log.Error("could not record CHAIN_BROKEN in the checkpoints topic", "err", merr)
			}
			return err
		case isFatalKafka(err):
			t.m.setState(schemas.StateFailed)
			return err
		case isFenced(err):
			// By the coordinator or by another tailer: restart tells.
			t.fenced, t.rebuild = true, true
			fallthrough
		case err != nil:
			lastErr = err
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
		kafka.Spec{Name: t.topics.Manifests(), Partitions: k.ManifestPartitions, ReplicationFactor: k.ReplicationFactor, Retention: k.Retention.Duration,
			MaxMessageBytes: t.maxBytes, Precreated: k.PrecreatedTopics},
		kafka.Spec{Name: t.topics.Completions(), Partitions: k.ManifestPartitions, ReplicationFactor: k.ReplicationFactor, Retention: k.Retention.Duration,
			MaxMessageBytes: t.maxBytes, Precreated: k.PrecreatedTopics},
		kafka.Spec{Name: t.topics.Checkpoints(), Partitions: 1, ReplicationFactor: k.ReplicationFactor, Compact: true, MaxMessageBytes: t.maxBytes,
			Precreated: k.PrecreatedTopics},
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
	cp, _, found, err := readCheckpoint(ctx, t.prod, t.topics.Checkpoints(), t.conf.Source.Name, t.cfg.Codec, t.consumeOpts())
	if err != nil {
		return err
	}
	if found {
		t.checkpoint, t.checkpointTime, t.chain = cp.LastEventID, cp.LastEventTime, cp.TopicLastEventIDs
		t.reqOff, t.boots = cp.RequestsOffset, cp.Bootstraps
		t.releases, t.compOffs = cp.SnapshotReleases, cp.CompletionsOffsets
		t.txns = newTxnTable(cp.OpenTxns, cp.TxnsTrackedAbove)
		if cp.TxnsTrackedAbove < 0 {
			// An older tailer's checkpoint: transactions open now may
			// have allocated before this one tracks them.
			if err := t.trackTxnsFromNow(ctx); err != nil {
				return err
			}
		}
		t.log.Info("resuming from checkpoint", "event_id", cp.LastEventID, "written", cp.Written, "topics", len(cp.TopicLastEventIDs),
			"bootstraps", len(cp.Bootstraps), "state", cp.State)
		if err := t.ensureControl(ctx); err != nil {
			return err
		}
		if cp.State == schemas.StateChainBroken {
			if err := t.repairChain(ctx); err != nil {
				return err
			}
		}
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
		if err := t.trackTxnsFromNow(ctx); err != nil {
			return err
		}
		if err := t.ensureControl(ctx); err != nil {
			return err
		}
		if err := t.markDiscontinuity(ctx); err != nil {
			return err
		}
	}
	t.sweepSnapshots(ctx)
	t.m.openTxns.Set(float64(len(t.txns.open)))
	t.m.lastPublished.Set(float64(t.checkpoint))
	t.m.setBootstraps(t.boots)
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
	st := t.state()
	next := st.chain
	ps, txns, err := t.prepare(ctx, evs, st.txns)
	if err != nil {
		return err
	}
	st.txns = txns
	var dbs []string // the database topics this transaction writes
	for _, p := range ps {
		if p.err == nil && p.routed.Filtered == "" {
			for _, db := range p.routed.Event.Databases {
				if !t.bootstrapping(db) {
					dbs = append(dbs, db)
				}
			}
		}
	}
	var beats []string
	if heartbeat {
		t.heartbeatRound++
		for _, db := range dueHeartbeats(t.inScope, t.heartbeatRound, &t.conf.Replication, t.conf.Tailer) {
			if !t.bootstrapping(db) { // its topic waits for the bootstrap
				beats = append(beats, db)
			}
		}
		dbs = append(dbs, beats...)
	}
	if err := t.prepareTopics(ctx, next, dbs); err != nil {
		return err
	}
	var entered []tableKey // tables renamed into the scope
	for i, p := range ps {
		ev := &p.routed.Event
		if p.err != nil {
			return p.err
		}
		t.m.eventsRead.WithLabelValues(string(ev.EventType)).Inc()
		st.cp, st.cpTime = evs[i].EventID, ev.EventTime
		if p.routed.Filtered != "" {
			t.m.eventsFiltered.WithLabelValues(p.routed.Filtered, ev.Database).Inc()
			continue
		}
		if len(ev.Errors) > 0 {
			t.log.Warn("publishing event with errors; the applier will halt its databases on it",
				"event_id", ev.EventID, "type", ev.EventType, "databases", ev.Databases, "errors", ev.Errors)
		}
		id := strconv.FormatInt(ev.EventID, 10)
		published := false
		for _, db := range ev.Databases {
			if t.bootstrapping(db) {
				// Published by the bootstrap's catch-up, after its END.
				continue
			}
			topic := t.topics.Events(db)
			// Each topic's record carries that topic's previous event, so
			// an event published to two databases is encoded twice.
			r := record(topic, id, nil, schemas.NameMetastoreEvent, id)
			jobs = append(jobs, encodeJob{rec: r, ev: ev, prev: next[db]})
			recs = append(recs, r)
			next[db] = ev.EventID
			published = true
			t.m.eventsPublished.WithLabelValues(string(ev.EventType), db).Inc()
		}
		if !published {
			continue // its copy tasks go with it, in the catch-up
		}
		if k, ok := enteredScope(ev, &t.conf.Replication); ok {
			entered = append(entered, k)
		}
		recs = append(recs, t.taskRecords(&p, id)...)
	}
	if err := t.encodeEvents(jobs); err != nil {
		return err
	}
	if heartbeat {
		now := time.Now()
		for _, db := range beats {
			topic := t.topics.Events(db)
			prev := next[db]
			hv, err := t.cfg.Codec.Encode(&schemas.Heartbeat{
				Database: db, ScannedEventID: st.cp, ScannedEventTime: st.cpTime,
				SourceHeadEventID: t.head, Sent: now, Source: t.conf.Source.Name, PreviousEventID: &prev,
			})
			if err != nil {
				return fmt.Errorf("encode heartbeat for %s: %w", db, err)
			}
			recs = append(recs, record(topic, "heartbeat", hv, schemas.NameHeartbeat, ""))
		}
	}
	// A table renamed into the scope is bootstrapped on its own, at this
	// transaction's checkpoint: the rename is on the topic before its
	// BEGIN, and the applier's enters_scope halt on it ends there.
	st.boots = t.enterScope(st, entered)

	start := time.Now()
	if err := t.commit(ctx, recs, st, schemas.StateRunning); err != nil {
		return err
	}
	t.m.produceSeconds.Observe(time.Since(start).Seconds())
	if heartbeat {
		t.lastHeartbeat = time.Now()
	}
	return nil
}

// taskRecords are the manifests records of a prepared event's copy tasks.
func (t *Tailer) taskRecords(p *prepared, id string) []*kgo.Record {
	var recs []*kgo.Record
	for j, task := range p.routed.Tasks {
		// Keyed by target: tasks that write the same file (an INSERT
		// OVERWRITE reusing a name) share a partition, in event order,
		// so one copy daemon sees them in order and runs them one
		// after the other.
		recs = append(recs, taskRecord(t.topics.Manifests(), task, p.taskValues[j], id))
	}
	t.m.tasksPublished.Add(float64(len(p.routed.Tasks)))
	return recs
}

// taskRecord is the manifests record of one copy task, keyed by its
// target in canonical form (two spellings of one file share a partition).
func taskRecord(topic string, task schemas.CopyTask, value []byte, eventID string) *kgo.Record {
	key := task.TargetURI
	if c, err := location.Canonical(key); err == nil {
		key = c
	}
	r := record(topic, key, value, schemas.NameCopyTask, eventID)
	r.Headers = append(r.Headers, kgo.RecordHeader{Key: kafka.HeaderTaskID, Value: []byte(task.TaskID)})
	return r
}

// newProducer makes the transactional producer. It only connects: its
// producer ID is initialised (fencing any other client of the
// transactional ID) by start.
func (t *Tailer) newProducer() (*kgo.Client, error) {
	c := t.conf
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(c.Kafka.Brokers...),
		kgo.TransactionalID(c.Tailer.TransactionalID),
		kgo.TransactionTimeout(60 * time.Second),
		// The topics' max.message.bytes (set when the tailer creates
		// them): a batch the producer makes is one the broker takes.
		kgo.ProducerBatchMaxBytes(t.maxBytes),
		kgo.MaxBufferedRecords(1 << 20),
		kgo.ProducerLinger(0),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		// A topic just created may still be missing from the broker's
		// metadata at the first refresh; the retry then waits this long
		// (franz-go's default 5 s), and a new database's first events
		// with it. Periodic refreshes stay at MetadataMaxAge.
		kgo.MetadataMinAge(250 * time.Millisecond),
	}, t.cfg.KafkaOpts...)
	prod, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka producer: %w", err)
	}
	return prod, nil
}

// forget sets what the tailer holds in memory besides its checkpoint to
// what a new process starts with.
func (t *Tailer) forget() {
	t.created = map[string]bool{}
	t.partNames = map[string]partNames{}
	t.touch = map[string]*touchIndex{}
	t.tablesRead = nil
	t.acid = nil
	t.txns = newTxnTable(nil, 0)
	t.lastHeartbeat, t.lastReqPoll, t.lastRelease, t.lastDBRefresh = time.Time{}, time.Time{}, time.Time{}, time.Time{}
}

// writerName names this process for its checkpoints: host, process ID
// and a random part (a restarted container may reuse both).
func writerName() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d/%016x", host, os.Getpid(), rand.Uint64())
}

// AnotherTailerError is the fence of a newer tailer with the same
// transactional ID: its checkpoint is the newest. The fenced tailer
// stops; it never fences back.
type AnotherTailerError struct {
	TransactionalID string
	Source          string
	// Writer wrote the newest checkpoint ("" a tailer that does not name
	// itself); Self is this process.
	Writer, Self string
	Err          error
}

func (e *AnotherTailerError) Error() string {
	w := e.Writer
	if w == "" {
		w = "a tailer that does not name itself"
	}
	return fmt.Sprintf("another tailer with transactional ID %q took over: the newest checkpoint of source %s was written by %s, not by this process (%s); "+
		"stopping (run one tailer per source): %v", e.TransactionalID, e.Source, w, e.Self, e.Err)
}

func (e *AnotherTailerError) Unwrap() error { return e.Err }

// restart replaces the producer and takes up the newest committed
// checkpoint as a new process would (start): after a transaction whose
// end Kafka never confirmed (it may have committed: producing again from
// the checkpoint held in memory would publish its events twice), and
// after a fence (the producer is unusable). A fence is taken up only when
// this process wrote the newest checkpoint: then no other tailer has
// committed since, and the fence came from the transaction coordinator
// (which bumps the producer epoch when it ends a transaction the client
// lost track of across a broker restart); otherwise a newer tailer runs,
// and this one stops with AnotherTailerError.
func (t *Tailer) restart(ctx context.Context, cause error) error {
	prod, err := t.newProducer()
	if err != nil {
		return err
	}
	if t.fenced {
		// Read without initialising the new producer's ID, which would
		// fence the other tailer: its commits are below the last stable
		// offset, which is all a read_committed read needs.
		_, writer, found, err := readCheckpoint(ctx, prod, t.topics.Checkpoints(), t.conf.Source.Name, t.cfg.Codec, t.consumeOpts())
		if err != nil {
			prod.Close()
			return fmt.Errorf("fenced: read the newest checkpoint to tell whether another tailer runs: %w", err)
		}
		if !found || writer != t.writer {
			prod.Close()
			return &AnotherTailerError{TransactionalID: t.conf.Tailer.TransactionalID, Source: t.conf.Source.Name, Writer: writer, Self: t.writer, Err: cause}
		}
		t.fenced = false
		t.log.Warn("fenced by the transaction coordinator, not by another tailer (this process wrote the newest checkpoint); replacing the producer",
			"err", cause)
	}
	t.prod.Close()
	t.prod, t.adm = prod, kadm.NewClient(prod)
	t.forget()
	if err := t.start(ctx); err != nil {
		return err
	}
	t.rebuild = false
	t.log.Info("producer replaced; resumed from the newest committed checkpoint", "checkpoint", t.checkpoint)
	return nil
}

// txState is what a transaction's checkpoint records: the tailer adopts
// it once the transaction has committed.
type txState struct {
	cp       int64
	cpTime   time.Time
	chain    chain
	reqOff   int64
	boots    []schemas.BootstrapState
	releases []schemas.SnapshotRelease
	compOffs []int64
	txns     *txnTable // the committed one until a batch changes a copy
}

// state is a copy of the committed state for the next transaction to
// change.
func (t *Tailer) state() txState {
	return txState{cp: t.checkpoint, cpTime: t.checkpointTime, chain: t.chain.clone(), reqOff: t.reqOff, boots: slices.Clone(t.boots),
		releases: slices.Clone(t.releases), compOffs: slices.Clone(t.compOffs), txns: t.txns}
}

// commit produces recs and the checkpoint of st (in state) in one
// transaction and, once it committed, adopts st.
func (t *Tailer) commit(ctx context.Context, recs []*kgo.Record, st txState, state schemas.TailerState) error {
	cv, err := t.cfg.Codec.Encode(&schemas.TailerCheckpoint{
		Source: t.conf.Source.Name, LastEventID: st.cp, LastEventTime: st.cpTime, Written: time.Now(), State: state,
		TopicLastEventIDs: st.chain, RequestsOffset: st.reqOff, Bootstraps: st.boots,
		SnapshotReleases: st.releases, CompletionsOffsets: st.compOffs,
		OpenTxns: st.txns.list(), TxnsTrackedAbove: st.txns.above,
	})
	if err != nil {
		return fmt.Errorf("encode checkpoint: %w", err)
	}
	cr := record(t.topics.Checkpoints(), t.conf.Source.Name, cv, schemas.NameTailerCheckpoint, "")
	cr.Headers = append(cr.Headers, kgo.RecordHeader{Key: kafka.HeaderWriter, Value: []byte(t.writer)})
	if n := recordBytes(cr); n > int(t.maxBytes) {
		// Every database waits on the checkpoint: say what fills it.
		names := 0
		for _, b := range st.boots {
			names += len(b.PublishedTables)
		}
		return fmt.Errorf("the checkpoint is %d bytes, over kafka.max_message_bytes %d (%d bootstraps holding %d published table names): raise it",
			n, t.maxBytes, len(st.boots), names)
	}
	recs = append(recs, cr)
	if err := t.transact(ctx, recs); err != nil {
		return err
	}
	t.checkpoint, t.checkpointTime, t.chain, t.reqOff, t.boots = st.cp, st.cpTime, st.chain, st.reqOff, st.boots
	t.releases, t.compOffs, t.txns = st.releases, st.compOffs, st.txns
	t.m.openTxns.Set(float64(len(st.txns.open)))
	t.m.lastPublished.Set(float64(st.cp))
	t.m.setBootstraps(st.boots)
	return nil
}

// markChainBroken writes one more checkpoint at the current position with
// state CHAIN_BROKEN, so `hivedr status` can say why the tailer stopped
// after its process (and its state metric) is gone. A restarted tailer
// resumes from it as from any checkpoint, and finds the same gap.
func (t *Tailer) markChainBroken(ctx context.Context) error {
	return t.commit(ctx, nil, t.state(), schemas.StateChainBroken)
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
			return
		}
		_, errs[i] = t.fit(j.rec, &ev, strings.TrimPrefix(j.rec.Topic, t.topics.Events("")))
	})
	return errors.Join(errs...)
}

// prepared is one event decoded, routed and with its copy tasks encoded.
type prepared struct {
	routed     Routed
	taskValues [][]byte // the encoded copy tasks
	err        error
}

// prepare decodes, routes and encodes the copy tasks of evs on all cores,
// results in the order of evs. Between decoding and routing, the
// transaction events go through txns in log order (completeTxns), which
// may read the source metastore, as do compactions (completeCompactions);
// txns as the batch leaves it is returned.
func (t *Tailer) prepare(ctx context.Context, evs []hmslog.RawEvent, txns *txnTable) ([]prepared, *txnTable, error) {
	decoded := make([]schemas.Event, len(evs))
	parallel(len(evs), func(i int) {
		decoded[i] = hmsevent.Decode(evs[i])
		decoded[i].Source = t.conf.Source.Name
	})
	txns, err := t.completeTxns(ctx, decoded, txns)
	if err != nil {
		return nil, nil, err
	}
	if err := t.completeCompactions(ctx, decoded); err != nil {
		return nil, nil, err
	}
	out := make([]prepared, len(evs))
	parallel(len(evs), func(i int) { out[i] = t.prepareOne(ctx, decoded[i]) })
	return out, txns, nil
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

// prepareOne routes, lists and encodes one decoded event. Scope comes
// first: an event of a database or table out of scope is never listed.
func (t *Tailer) prepareOne(ctx context.Context, ev schemas.Event) prepared {
	envelope(&ev, &t.conf.Source, t.version)
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
					if errors.Is(err, kerr.MessageTooLarge) {
						// Every record is at most kafka.max_message_bytes
						// (fit): the topic was created with less.
						firstErr = fmt.Errorf("%w (a batch of at most kafka.max_message_bytes %d: the topic takes less; raise its max.message.bytes to it)",
							firstErr, t.maxBytes)
					}
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
			t.rebuild = true // still in the transaction
			return errors.Join(firstErr, fmt.Errorf("abort buffered records: %w", err))
		}
	}
	if err := t.prod.EndTransaction(ctx, commit); err != nil {
		// Whether it committed is unknown (Kafka went away while it
		// did): the next step runs on a new producer, whose
		// initialisation ends the transaction either way, from the
		// checkpoint Kafka holds (restart).
		t.rebuild = true
		return errors.Join(firstErr, fmt.Errorf("end transaction (committed or not: the checkpoint is read again): %w", err))
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
	t.autoCheck = true
	return nil
}

// closeProducer ends a transaction a stop cut off (its abort ran on the
// cancelled context, so it never reached Kafka) before closing the
// producer: left open, it would hold every read_committed reader of its
// topics (the appliers, hivedr status) at its first record until the
// transaction timeout, or until a tailer starts again.
func (t *Tailer) closeProducer() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := t.prod.AbortBufferedRecords(ctx); err == nil {
		if err := t.prod.EndTransaction(ctx, kgo.TryAbort); err != nil {
			t.log.Warn("could not abort the transaction the stop cut off; Kafka aborts it at its timeout", "err", err)
		}
	}
	t.prod.Close()
}

// isFatalKafka reports errors no retry can fix: another tailer with our
// transactional ID fenced us, or the cluster refuses our credentials or
// an ACL (kafka.IsAuthError: the transactional ID, a topic, creating
// topics), before anything of the batch is committed.
func isFatalKafka(err error) bool {
	var other *AnotherTailerError
	return errors.As(err, &other) || errors.Is(err, kerr.InvalidTransactionTimeout) || kafka.IsAuthError(err)
}

// isFenced reports a fence of the producer: by a newer tailer, or by the
// transaction coordinator (restart tells which).
func isFenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch)
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
