package applier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/beltran/gohive/hive_metastore"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/internal/retry"
	"github.com/hivedr/hivedr/internal/state"
	"github.com/hivedr/hivedr/schemas"
)

// Codec decodes Kafka values (schemas.Serde).
type Codec interface {
	Decode(ctx context.Context, b []byte) (any, error)
}

// Skip is an operator's request to skip one event of one database.
type Skip struct {
	DB      string
	EventID int64
}

// Config wires an Applier.
type Config struct {
	// Brokers are the Kafka seed brokers.
	Brokers []string
	// Topics names the event and completion topics.
	Topics kafka.Topics
	// Group is the applier's consumer group; its committed offsets on the
	// event topics are the replication checkpoints.
	Group string
	// Instance, when set, is the applier's static group membership ID.
	Instance string
	// SessionTimeout is the group session: how long a member that stopped
	// heartbeating keeps its databases before the others take them over.
	// Heartbeats go every sixth of it. 0: applier.session_timeout's
	// default.
	SessionTimeout time.Duration
	// Source names the primary site (DR databases are marked with it).
	Source string
	// Dial connects to the DR metastore. The database workers share at
	// most DRConnections of its connections (pool.go); a failover's fence
	// confirmation and the skip records at start dial one of their own.
	Dial func(ctx context.Context) (Metastore, func() error, error)
	// DRConnections is the most DR metastore connections the database
	// workers share. 0: applier.dr_connections' default.
	DRConnections int
	// Policy maps locations and says what is in scope.
	Policy Policy
	// Databases, when set, is a regular expression the databases whose
	// topics the applier reads must match whole: a further DR site's
	// scope (config.Replication.DatabasePattern), narrower than what the
	// tailer publishes. "": every database's topic.
	Databases string
	// RPO returns a database's recovery point objective, exported beside
	// its replica age (hivedr_rpo_seconds); nil exports none.
	RPO func(db string) time.Duration
	// Files lists and removes DR files (the prunes: exec.go, prunes.go).
	Files Files
	// Completions is the local completion store.
	Completions *state.Completions
	Codec       Codec
	// HaltAfter is how long a worker waits on a file that cannot be copied
	// (FAILED, SOURCE_GONE) with no later event removing it, or retries
	// an event the DR metastore fails (TransientError), before it halts.
	// 0: applier.halt_after's default.
	HaltAfter time.Duration
	// PruneDelay is how long the files of obsolete ACID directories stay
	// after the event that made them obsolete (prunedelay.go); 0 removes
	// them at once (config.DefaultPruneDelay).
	PruneDelay time.Duration
	// LookAhead is the most events a worker buffers beyond the one it
	// applies (fetching of its topic pauses beyond it). 0:
	// applier.look_ahead's default.
	LookAhead int
	// LookAheadBytes bounds what all the workers buffer together, by the
	// records' encoded size (their Kafka keys and values): a worker over
	// its fair share (it divided among the running workers) pauses its
	// topic while all the workers together hold more than it (overShare).
	// A bootstrap's records carry whole Thrift objects, and a backlog of a
	// million events over ten databases held 880 MiB with 16 MiB for each
	// worker. 0: applier.look_ahead_bytes' default.
	LookAheadBytes int64
	// BatchPartitions is the most consecutive SNAPSHOT_PARTITION records
	// of one table a worker applies as one plan (one add_partitions /
	// alter_partitions), marking their offsets together after it; 1
	// applies them one by one. 0: applier.batch_partitions' default.
	BatchPartitions int
	// CompletionPartitions and ReplicationFactor create the completions
	// topic if it is missing. 0: kafka.manifest_partitions' and
	// kafka.replication_factor's defaults.
	CompletionPartitions int32
	ReplicationFactor    int16
	// PrecreatedTopics: the topics are made by someone else
	// (kafka.precreated_topics); the applier only checks they exist.
	PrecreatedTopics bool
	// Skips are operator requests to skip events (hivedr apply
	// --skip-event), recorded on the DR database before the workers start.
	Skips []Skip
	// Operator names who asked for Skips (user@host).
	Operator string

	Logger    *slog.Logger
	Metrics   *Metrics
	KafkaOpts []kgo.Opt
}

// Applier replays the event topics onto the DR metastore.
type Applier struct {
	cfg Config
	log *slog.Logger
	m   *Metrics

	mu      sync.Mutex
	workers map[string]*worker // by topic
	// running counts the workers and buffered the encoded size of what
	// their queues hold together, for overShare (read without mu: a
	// worker's push holds its own lock).
	running  atomic.Int64
	buffered atomic.Int64
	// stalled is the part of buffered that stalled workers queue (the
	// fetch gate does not weigh it: gate.go).
	stalled atomic.Int64
	gate    fetchGate
	// marked is set when a worker marks offsets for commit (commitMarked).
	marked atomic.Bool
	cl     *kgo.Client
	// pool holds the DR metastore connections the workers share.
	pool *pool

	fetchErrLogged map[string]time.Time // by topic and error; the poll loop's own

	// controls are operators' requests read from the control topic, for
	// the poll loop (runControls); wakePoll ends the poll in progress so
	// it acts on them at once. Both under mu.
	controls []schemas.ApplierControl
	wakePoll context.CancelFunc
	// controlReady closes once the control reader knows the offset it
	// reads from: a request published after that reaches this applier.
	// The event consumer joins the group only then.
	controlReady chan struct{}
	// owned are the event topics assigned to this member, with their
	// partitions (the group's callbacks keep it, under mu): control
	// requests for others are not ours, and the fetch gate holds back
	// these.
	owned map[string][]int32
}

// New checks cfg.
func New(cfg Config) (*Applier, error) {
	if len(cfg.Brokers) == 0 || cfg.Group == "" || cfg.Dial == nil || cfg.Policy == nil || cfg.Completions == nil || cfg.Codec == nil {
		return nil, errors.New("applier: Config needs Brokers, Group, Dial, Policy, Completions and Codec")
	}
	if cfg.Databases != "" {
		if _, err := regexp.Compile(cfg.Databases); err != nil {
			return nil, fmt.Errorf("applier: the databases' pattern %q: %w", cfg.Databases, err)
		}
	}
	// A field left zero gets its configuration key's default.
	config.FillZero(&cfg.HaltAfter, "applier.halt_after")
	config.FillZero(&cfg.LookAhead, "applier.look_ahead")
	config.FillZero(&cfg.LookAheadBytes, "applier.look_ahead_bytes")
	config.FillZero(&cfg.SessionTimeout, "applier.session_timeout")
	config.FillZero(&cfg.BatchPartitions, "applier.batch_partitions")
	config.FillZero(&cfg.DRConnections, "applier.dr_connections")
	config.FillZero(&cfg.CompletionPartitions, "kafka.manifest_partitions")
	config.FillZero(&cfg.ReplicationFactor, "kafka.replication_factor")
	if cfg.HaltAfter < 0 || cfg.LookAhead < 0 || cfg.LookAheadBytes < 0 || cfg.SessionTimeout < 0 || cfg.BatchPartitions < 0 ||
		cfg.DRConnections < 0 || cfg.CompletionPartitions < 0 || cfg.ReplicationFactor < 0 {
		return nil, errors.New("applier: Config's durations, sizes and counts must not be negative")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics()
	}
	log := cfg.Logger.With("role", "applier")
	return &Applier{cfg: cfg, m: cfg.Metrics, log: log, workers: map[string]*worker{},
		pool:           newPool(cfg.DRConnections, cfg.Dial, log, cfg.Metrics),
		fetchErrLogged: map[string]time.Time{}, controlReady: make(chan struct{}), owned: map[string][]int32{}}, nil
}

// Run applies events until ctx ends (returning nil) or a fatal error.
func (a *Applier) Run(ctx context.Context) error {
	if err := a.recordSkips(ctx); err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := a.readCompletions(ctx); err != nil && ctx.Err() == nil {
			cancel(err)
		}
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := a.readControl(ctx); err != nil && ctx.Err() == nil {
			cancel(fmt.Errorf("applier control topic %s: %w", a.cfg.Topics.ApplierControl(), err))
		}
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		a.reportLags(ctx)
	}()
	err := a.consumeEvents(ctx)
	cancel(err)
	wg.Wait()
	a.pool.close() // (the workers have stopped: all are idle)
	if err == nil || errors.Is(err, context.Canceled) {
		if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
			return cause
		}
		return nil
	}
	return err
}

// reportLags keeps every worker's lag gauges and the look-ahead gauge
// (from buffered) current, once a second: one goroutine for all the
// databases, not a ticker each (thousands of databases would wake
// thousands of goroutines a second).
func (a *Applier) reportLags(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var ws []*worker
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		a.mu.Lock()
		ws = ws[:0]
		for _, w := range a.workers {
			ws = append(ws, w)
		}
		a.mu.Unlock()
		for _, w := range ws {
			w.reportLag()
		}
		clear(ws)
		a.m.lookAhead.Set(float64(a.buffered.Load()))
	}
}

// recordSkips writes the operator's skip requests on the DR databases, so
// the record of who skipped what outlives the process.
func (a *Applier) recordSkips(ctx context.Context) error {
	if len(a.cfg.Skips) == 0 {
		return nil
	}
	ms, closeFn, err := a.cfg.Dial(ctx)
	if err != nil {
		return err
	}
	defer closeFn()
	for _, s := range a.cfg.Skips {
		if err := RecordSkip(ctx, ms, a.cfg.Source, a.cfg.Operator, s); err != nil {
			return err
		}
		a.log.Warn("event will be skipped", "db", s.DB, "event_id", s.EventID, "by", a.cfg.Operator)
	}
	return nil
}

// SkipMetastore is what RecordSkip needs of the DR metastore.
type SkipMetastore interface {
	GetDatabase(ctx context.Context, name string) (*hive_metastore.Database, error)
	AlterDatabase(ctx context.Context, name string, db *hive_metastore.Database) error
}

// RecordSkip writes an operator's request to skip an event on its DR
// database (hivedr.skipped.<id>: who and when), where the database's
// worker finds it when it plans that event. It refuses a database that
// is not this pipeline's replica and an event the replica is already
// past. A running applier reads it on its next plan of the event; a
// worker halted on it must plan again (schemas.ControlReplan).
func RecordSkip(ctx context.Context, ms SkipMetastore, source, operator string, s Skip) error {
	db, err := ms.GetDatabase(ctx, s.DB)
	if err != nil {
		return fmt.Errorf("--skip-event %s:%d: DR database %s: %w", s.DB, s.EventID, s.DB, err)
	}
	if db.Parameters[drparam.Target] != drparam.TargetMark(source) {
		return fmt.Errorf("--skip-event %s:%d: DR database %s is not a replication target of this pipeline (%s=%q)", s.DB, s.EventID, s.DB, drparam.Target, db.Parameters[drparam.Target])
	}
	if stamp(db.Parameters) >= s.EventID {
		return fmt.Errorf("--skip-event %s:%d: DR database %s is already at event %d", s.DB, s.EventID, s.DB, stamp(db.Parameters))
	}
	db.Parameters[drparam.SkipKey(s.EventID)] = fmt.Sprintf("requested by %s at %s", operator, time.Now().UTC().Format(time.RFC3339))
	if err := ms.AlterDatabase(ctx, s.DB, db); err != nil {
		return fmt.Errorf("--skip-event %s:%d: record it on the DR database: %w", s.DB, s.EventID, err)
	}
	return nil
}

// completionsStart creates the completions topic if needed and lists its
// partitions, the positions the completion store holds, and the start
// offsets of the partitions it holds none for.
func (a *Applier) completionsStart(ctx context.Context, topic string) (parts []int32, stored map[int32]int64, starts kadm.ListedOffsets, err error) {
	seed, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(a.cfg.Brokers...)}, a.cfg.KafkaOpts...)...)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("kafka client: %w", err)
	}
	adm := kadm.NewClient(seed)
	_, err = kafka.Ensure(ctx, adm, kafka.Spec{Name: topic, Partitions: a.cfg.CompletionPartitions, ReplicationFactor: a.cfg.ReplicationFactor,
		Precreated: a.cfg.PrecreatedTopics})
	// A topic just created takes a moment to appear in metadata.
	for i := 0; err == nil && len(parts) == 0; i++ {
		var td kadm.TopicDetails
		if td, err = adm.ListTopics(ctx, topic); err != nil {
			break
		}
		if d, ok := td[topic]; ok && d.Err == nil && len(d.Partitions) > 0 {
			parts = d.Partitions.Numbers()
			break
		}
		if i == 60 {
			err = fmt.Errorf("topic %s not in the cluster's metadata 30s after creating it", topic)
			break
		}
		if !sleep(ctx, 500*time.Millisecond) {
			err = ctx.Err()
		}
	}
	if err == nil {
		stored, err = a.cfg.Completions.Offsets(topic)
	}
	// Partitions the store has no position for start at their first
	// offset, listed here rather than left to the consumer: a partition
	// whose start the consumer must still list joins only after the
	// first fetch of the others returns, which is a full long poll
	// (5 s) when they have nothing new, and events waited that long for
	// completions published while the applier was down.
	if err == nil && len(stored) < len(parts) {
		starts, err = adm.ListStartOffsets(ctx, topic)
		if err == nil {
			err = starts.Error()
		}
	}
	seed.Close()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("completions topic %s: %w", topic, err)
	}
	return parts, stored, starts, nil
}

// readCompletions copies the completions topic into the local store, from
// the position the store recorded (the start of the topic for a new or
// lost store).
func (a *Applier) readCompletions(ctx context.Context) error {
	topic := a.cfg.Topics.Completions()
	var (
		parts  []int32
		stored map[int32]int64
		starts kadm.ListedOffsets
	)
	// Kafka may be away for a while at start (a broker restart): wait for
	// it, bounded, instead of stopping the applier.
	err := retry.Until(ctx, a.log, "completions topic "+topic, retry.Policy{Fatal: kafka.IsAuthError}, func(ctx context.Context) (err error) {
		parts, stored, starts, err = a.completionsStart(ctx, topic)
		return err
	})
	if err != nil {
		return err
	}
	offsets := completionOffsets(parts, stored, func(p int32) (int64, bool) {
		s, ok := starts.Lookup(topic, p)
		return s.Offset, ok
	})
	if len(stored) == 0 {
		a.log.Info("reading the completions topic from its start (new or lost completion store)", "topic", topic)
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(a.cfg.Brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	}, a.cfg.KafkaOpts...)...)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		for _, fe := range fs.Errors() {
			if kafka.IsAuthError(fe.Err) {
				return fmt.Errorf("completions topic %s: %w", topic, fe.Err)
			}
			if !errors.Is(fe.Err, context.Canceled) {
				a.log.Warn("reading completions", "topic", fe.Topic, "partition", fe.Partition, "err", fe.Err)
			}
		}
		var batch []state.Completion
		next := map[int32]int64{}
		fs.EachRecord(func(r *kgo.Record) {
			next[r.Partition] = r.Offset + 1
			v, err := a.cfg.Codec.Decode(ctx, r.Value)
			c, ok := v.(*schemas.CopyCompletion)
			if err != nil || !ok {
				a.m.undecodable.Inc()
				a.log.Error("completion record does not decode; an event waiting for it waits until the file is copied again",
					"topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "key", string(r.Key), "err", err, "type", fmt.Sprintf("%T", v))
				return
			}
			a.m.completions.WithLabelValues(string(c.Status)).Inc()
			msg := c.Error
			if c.Evidence != "" {
				msg = strings.TrimSpace(msg + "; evidence: " + c.Evidence)
			}
			batch = append(batch, state.Completion{TaskID: c.TaskID, EventID: c.EventID, Target: c.TargetURI, Status: string(c.Status), Error: msg})
		})
		if len(next) == 0 {
			continue
		}
		if err := a.cfg.Completions.Put(batch, topic, next); err != nil {
			return err
		}

	}
}

// completionOffsets is where the completions reader starts on each
// partition: the store's position, else the partition's listed start,
// else (not listed) its start as the consumer finds it.
func completionOffsets(parts []int32, stored map[int32]int64, start func(int32) (int64, bool)) map[int32]kgo.Offset {
	offsets := map[int32]kgo.Offset{}
	for _, p := range parts {
		if o, ok := stored[p]; ok {
			offsets[p] = kgo.NewOffset().At(o)
		} else if o, ok := start(p); ok {
			offsets[p] = kgo.NewOffset().At(o)
		} else {
			offsets[p] = kgo.NewOffset().AtStart()
		}
	}
	return offsets
}

// consumeEvents runs the group consumer over the event topics and hands
// each database's records to its worker.
//
// Rebalances happen only between polls (BlockRebalanceOnPoll), and the
// dispatcher never blocks between a poll and AllowRebalance: a worker
// whose queue is full gets its topic paused instead. So a revoked topic's
// worker is stopped, and its applied offsets committed, before any other
// member can own the topic: two workers never apply one database at once.
func (a *Applier) consumeEvents(ctx context.Context) error {
	// Join the group only once the control reader knows where it reads
	// from: a request published while this applier owns a topic (a
	// replan by failback, a seek by replay) is then never missed. (The
	// reader's failure cancels ctx.)
	select {
	case <-a.controlReady:
	case <-ctx.Done():
		return nil
	}
	pattern := "^" + strings.ReplaceAll(a.cfg.Topics.Prefix, ".", `\.`) + `\.events\..+`
	if a.cfg.Databases != "" {
		pattern = "^" + regexp.QuoteMeta(a.cfg.Topics.Prefix+".events.") + "(?:" + a.cfg.Databases + ")$"
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(a.cfg.Brokers...),
		kgo.ConsumerGroup(a.cfg.Group),
		// A killed applier's databases move once its session ends, so a
		// short session is a quick hand-over (docs/applier.md, hand-over).
		kgo.SessionTimeout(a.cfg.SessionTimeout),
		kgo.HeartbeatInterval(config.HeartbeatInterval(a.cfg.SessionTimeout)),
		kgo.ConsumeRegex(),
		kgo.ConsumeTopics(pattern),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Transaction markers come through as control records so their
		// offsets are committed too: a caught-up applier's group lag is 0,
		// not 1, for dashboards that read it as RPO.
		kgo.KeepControlRecords(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// New databases' topics are found at once (watchNewDatabases);
		// the periodic refresh is the fallback, not more often: each
		// lists every topic (at 2,000 databases, once every 10 s was a
		// quarter of a percent of a core).
		kgo.MetadataMaxAge(30 * time.Second),
		// A topic newly assigned is fetched only once the fetch in flight
		// returns, which waits this long when nothing is new (franz-go's
		// default is 5 s): a new database's first event would wait for it.
		kgo.FetchMaxWait(500 * time.Millisecond),
		// A fetch response waits in the client until polled, beside what
		// the workers buffer, and the bound is on compressed bytes: a
		// response of 16 MiB held 60 MiB of records once decompressed
		// (at 2,000 databases behind), so 4 MiB, not franz-go's 50.
		kgo.FetchMaxBytes(4 << 20),
		// A topic's fetched records arrive whole before its worker can
		// pause it, so every database may hold one fetch of it beyond its
		// share of applier.look_ahead_bytes: a 64th of that (64 KiB to
		// 1 MiB, franz-go's default), not 1 MiB each.
		kgo.FetchMaxPartitionBytes(partitionFetch(a.cfg.LookAheadBytes)),
		// Marked offsets are committed within a second of being marked
		// (commitMarked); the client's own timer, which looks at every
		// partition each time it fires, is only the backstop: at a
		// thousand idle databases a scan a second was a tenth of the
		// idle applier's CPU.
		kgo.AutoCommitMarks(),
		kgo.AutoCommitInterval(time.Minute),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(func(_ context.Context, cl *kgo.Client, assigned map[string][]int32) {
			a.own(assigned, true)
			a.gateAdmit(cl, assigned)
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, lost map[string][]int32) {
			a.own(lost, false)
			a.stopWorkers(lost)
			if err := cl.CommitMarkedOffsets(ctx); err != nil {
				a.log.Warn("commit on revoke", "err", err)
			}
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
			a.own(lost, false)
			a.stopWorkers(lost)
		}),
	}
	if a.cfg.Instance != "" {
		opts = append(opts, kgo.InstanceID(a.cfg.Instance))
	}
	cl, err := kgo.NewClient(append(opts, a.cfg.KafkaOpts...)...)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	a.mu.Lock()
	a.cl = cl
	a.mu.Unlock()
	wctx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		a.watchNewDatabases(wctx, cl)
	}()
	committing := make(chan struct{})
	go func() {
		defer close(committing)
		a.commitMarked(wctx, cl)
	}()
	defer func() {
		stopWatch()
		<-watched
		<-committing
		a.stopWorkers(nil)
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := cl.CommitMarkedOffsets(cctx); err != nil {
			a.log.Warn("commit at shutdown", "err", err)
		}
		cl.LeaveGroup()
		cl.Close()
		a.leaveStatic()
	}()
	// The DR metastore's own connection pool (datanucleus.connectionPool.
	// maxPoolSize) cannot be read over Thrift (get_config_value refuses
	// it): the arithmetic is the operator's (docs/applier.md).
	a.log.Info("applier started", "group", a.cfg.Group, "topics", pattern, "dr_connections", a.cfg.DRConnections,
		"note", "every applier of the group holds up to dr_connections DR metastore connections (and one more while it confirms a failover's fence): keep instances x (dr_connections + 1) below the DR metastore's connection pool")
	for {
		// Every round marks hivedr_applier_loop_timestamp_seconds
		// (health.Loop): the poll returns at least every pollWait, with
		// or without records, and dispatching never blocks (a database
		// whose queue is full has its topic paused).
		a.m.loop.Round(ctx)
		pctx, wake := context.WithTimeout(ctx, pollWait)
		a.mu.Lock()
		a.wakePoll = wake
		if len(a.controls) > 0 {
			wake() // requests queued meanwhile: do not wait for records
		}
		a.mu.Unlock()
		fs := cl.PollRecords(pctx, 1000)
		wake()
		if ctx.Err() != nil {
			cl.AllowRebalance()
			return nil
		}
		if err := fatal(fs, a.cfg.Group); err != nil {
			cl.AllowRebalance()
			return err
		}
		recreated := a.fetchErrors(fs)
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			if len(p.Records) == 0 {
				return
			}
			a.dispatch(ctx, p.Topic, p.Partition, p.Records)
		})
		a.runControls(ctx, cl)
		cl.AllowRebalance()
		if len(recreated) > 0 {
			// The client keeps the ID a topic had when it first saw it; a
			// topic deleted and created again fails with UNKNOWN_TOPIC_ID
			// until the client forgets it. Forgotten, it is found again by
			// the pattern and consumed from the group's offset (or its
			// start); its records' chain says what was lost.
			a.log.Warn("topics were deleted and created again; consuming the new ones", "topics", recreated)
			cl.PurgeTopicsFromConsuming(recreated...)
		}
	}
}

// pollWait bounds one poll of the event consumer, so that its loop goes
// round while no events come.
const pollWait = 5 * time.Second

// fetchErrors logs the partition errors of a fetch, each topic and error
// at most once a minute, and returns the topics that were deleted and
// created again (UNKNOWN_TOPIC_ID).
func (a *Applier) fetchErrors(fs kgo.Fetches) []string {
	var recreated []string
	now := time.Now()
	for _, fe := range fs.Errors() {
		if polled(fe.Err) {
			continue
		}
		if errors.Is(fe.Err, kerr.UnknownTopicID) && !slices.Contains(recreated, fe.Topic) {
			recreated = append(recreated, fe.Topic)
		}
		key := fe.Topic + "\x00" + fe.Err.Error()
		if last, ok := a.fetchErrLogged[key]; ok && now.Sub(last) < time.Minute {
			continue
		}
		a.fetchErrLogged[key] = now
		if fe.Topic == "" {
			a.log.Warn("the event consumer's group session failed; rejoining", "err", fe.Err)
			continue
		}
		a.log.Warn("fetching events failed; retrying", "topic", fe.Topic, "partition", fe.Partition, "err", fe.Err)
	}
	return recreated
}

// leaveStatic removes the applier's static member from the group on a
// clean stop. A static member does not leave when its client closes (that
// is what lets a crashed applier take its databases back at once), but an
// applier stopped on purpose must free the group: operators reset its
// offsets to re-drive, which Kafka allows only for an empty group.
func (a *Applier) leaveStatic() {
	if a.cfg.Instance == "" {
		return
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(a.cfg.Brokers...)}, a.cfg.KafkaOpts...)...)
	if err != nil {
		a.log.Warn("leave the group", "err", err)
		return
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := kadm.NewClient(cl).LeaveGroup(ctx, kadm.LeaveGroup(a.cfg.Group).InstanceIDs(a.cfg.Instance).Reason("hivedr apply stopped"))
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		a.log.Warn("leave the group", "group", a.cfg.Group, "instance", a.cfg.Instance, "err", err)
	}
}

// polled reports whether a fetch error is only the end of a poll: woken
// (a control request), timed out (pollWait), or the client closed.
func polled(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, kgo.ErrClientClosed)
}

// fatal returns the first fetch error that ends the consumer of group.
func fatal(fs kgo.Fetches, group string) error {
	for _, fe := range fs.Errors() {
		if polled(fe.Err) {
			continue
		}
		// Refused credentials or ACLs (the group, an events topic) stay
		// refused: stop before anything is applied or committed.
		if kafka.IsAuthError(fe.Err) {
			if fe.Topic != "" {
				return fmt.Errorf("kafka: group %s, topic %s: %w", group, fe.Topic, fe.Err)
			}
			return fmt.Errorf("kafka: group %s: %w", group, fe.Err)
		}
		var ke *kgo.ErrFirstReadEOF
		if errors.As(fe.Err, &ke) {
			continue
		}
		// The client could not join (or was dropped from) the group, as
		// while the broker restarts: it keeps trying on its own, and
		// fetchErrors logs it. (The soak found the applier exiting here.)
		var ge *kgo.ErrGroupSession
		if errors.As(fe.Err, &ge) {
			continue
		}
		if fe.Topic == "" {
			return fmt.Errorf("kafka: %w", fe.Err)
		}
	}
	return nil
}

// observeCall records a DR call's time (hivedr_applier_dr_call_seconds).
func (a *Applier) observeCall(call string, took time.Duration) {
	a.m.drCallSeconds.WithLabelValues(call).Observe(took.Seconds())
}

// overShare reports whether a worker whose queue holds n bytes is past
// its part of LookAheadBytes, so its topic pauses: n is more than the
// whole budget, or more than the worker's fair share (the budget divided
// among the running workers) while all the queues together hold more
// than the budget. A worker under its fair share is never paused by the
// bytes, so a few busy databases may use what idle ones leave; and the
// queues together stay within about twice the budget (the fair shares
// add up to it, the busy workers' excess is bounded by it) plus a fetch
// each, however many databases the applier applies.
func (a *Applier) overShare(n int64) bool {
	budget := a.cfg.LookAheadBytes
	return n > budget || n > a.fairShare() && a.buffered.Load() > budget
}

// underShare reports whether a paused worker whose queue holds n bytes
// may fetch again: n is down to half its fair share, or the queues
// together hold at most half the budget and n at most half of it too.
func (a *Applier) underShare(n int64) bool {
	budget := a.cfg.LookAheadBytes
	return n <= a.fairShare()/2 || n <= budget/2 && a.buffered.Load() <= budget/2
}

// partitionFetch is the most one fetch asks of one topic, for a
// look-ahead of budget bytes.
func partitionFetch(budget int64) int32 {
	return int32(min(max(budget/64, 64<<10), 1<<20))
}

// fairShare is LookAheadBytes divided among the running workers.
func (a *Applier) fairShare() int64 {
	return a.cfg.LookAheadBytes / max(1, a.running.Load())
}

// commitEvery is how often commitMarked looks for offsets marked since
// it last committed.
const commitEvery = time.Second

// commitMarked commits the offsets the workers marked, at most once per
// commitEvery and only when some were marked since the last commit, until
// ctx ends: an idle applier commits once per heartbeat round, not once a
// second over every partition it owns.
func (a *Applier) commitMarked(ctx context.Context, cl *kgo.Client) {
	t := time.NewTicker(commitEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !a.marked.Swap(false) {
			continue
		}
		if err := cl.CommitMarkedOffsets(ctx); err != nil && ctx.Err() == nil {
			a.marked.Store(true) // again at the next tick
			a.log.Warn("commit marked offsets; retrying", "err", err)
		}
	}
}

func (a *Applier) dispatch(ctx context.Context, topic string, partition int32, recs []*kgo.Record) {
	db := strings.TrimPrefix(topic, a.cfg.Topics.Prefix+".events.")
	a.mu.Lock()
	w := a.workers[topic]
	if w == nil {
		w = newWorker(ctx, a, db, topic, partition)
		a.workers[topic] = w
		a.running.Add(1)
		go func() {
			defer a.running.Add(-1)
			w.run()
		}()
	}
	a.mu.Unlock()
	items := make([]*item, 0, len(recs))
	for _, r := range recs {
		items = append(items, a.decode(ctx, r))
	}
	w.push(items) // pauses the topic when the worker's queue is full
}

// decode turns an event-topic record into an item; an undecodable record
// becomes an item that halts the worker when it reaches it.
func (a *Applier) decode(ctx context.Context, r *kgo.Record) *item {
	// What is kept of the record is what marking its offset needs, in a
	// record of its own: franz-go's records of a batch share one
	// allocation, and their strings point into the fetch response, which
	// would stay in memory for as long as one record of it is queued.
	it := &item{rec: &kgo.Record{Topic: strings.Clone(r.Topic), Partition: r.Partition, Offset: r.Offset,
		LeaderEpoch: r.LeaderEpoch, Timestamp: r.Timestamp, Attrs: r.Attrs}, size: int64(len(r.Key) + len(r.Value))}
	if r.Attrs.IsControl() {
		it.control = true
		return it
	}
	v, err := a.cfg.Codec.Decode(ctx, r.Value)
	switch v := v.(type) {
	case *schemas.Event:
		it.ev = v
	case *schemas.Heartbeat:
		it.hb = v
	default:
		if err == nil {
			err = fmt.Errorf("a %T record on an event topic", v)
		}
		it.err = fmt.Errorf("record at %s[%d] offset %d (key %q) does not decode: %w", r.Topic, r.Partition, r.Offset, r.Key, err)
	}
	return it
}

// stopWorkers stops the workers of the given topics (all when nil) and
// waits until they have returned.
//
// A topic is paused only while its worker's queue is full (dispatch), and
// the queue goes with the worker, so the topics are resumed here: franz-go
// keeps a topic paused across rebalances, and one revoked while paused
// would not be fetched when assigned back, stalling its database.
func (a *Applier) stopWorkers(topics map[string][]int32) {
	a.mu.Lock()
	var stopped []*worker
	var names []string
	for t, w := range a.workers {
		if _, ok := topics[t]; ok || topics == nil {
			w.stop()
			stopped = append(stopped, w)
			names = append(names, t)
			delete(a.workers, t)
		}
	}
	cl := a.cl
	a.mu.Unlock()
	for _, w := range stopped {
		<-w.done
	}
	if cl != nil && len(names) > 0 {
		cl.ResumeFetchTopics(names...)
	}
}
