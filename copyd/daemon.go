package copyd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/internal/location"
	"github.com/hivedr/hivedr/schemas"
)

// Codec turns records into Kafka values and back (schemas.Serde).
type Codec interface {
	Encode(v any) ([]byte, error)
	Decode(ctx context.Context, b []byte) (any, error)
}

// Copier copies one task's file and reports how it went (*Engine).
type Copier interface {
	Copy(ctx context.Context, task schemas.CopyTask) schemas.CopyCompletion
}

// DaemonConfig wires a Daemon.
type DaemonConfig struct {
	// Brokers are the Kafka seed brokers.
	Brokers []string
	// Site, set for a further DR site's daemon (fan-out), passes over the
	// tasks outside the site's scope and writes the others to the site's
	// targets; Topics then names the site's completions topic.
	Site *Site
	// Topics names the manifests and completions topics.
	Topics kafka.Topics
	// Group is the consumer group all copy daemons share.
	Group string
	// TransactionalID must be unique per daemon and stable across its
	// restarts, so a restarted daemon fences its own zombie.
	TransactionalID string
	// Instance, when set, is the daemon's static group membership ID
	// (KIP-345): a daemon restarted after a crash takes its partitions back
	// at once instead of waiting for its old session to time out.
	Instance string
	// SessionTimeout is the group session: how long a daemon that stopped
	// heartbeating keeps its partitions before the others take them over.
	// Heartbeats go every sixth of it. 0: copyd.session_timeout's
	// default.
	SessionTimeout time.Duration
	// Workers is how many files are copied at once. 0: copyd.workers'
	// default.
	Workers int
	// MaxBatch bounds the sliding window: the most copy tasks one
	// partition holds at once, queued, copying, or finished and waiting
	// for an older task of the partition before they can be committed; a
	// partition that holds that many is not fetched until some commit.
	// 0: 4*Workers (config.DefaultMaxBatch, copyd.max_batch's default).
	MaxBatch int
	// CommitInterval is how often finished tasks are committed (one Kafka
	// transaction for all partitions); 0: 200ms (not configurable: tests
	// shorten it). A full window commits at once.
	CommitInterval time.Duration
	// CompletionPartitions and ReplicationFactor create the completions
	// topic if it is missing. 0: kafka.manifest_partitions' and
	// kafka.replication_factor's defaults.
	CompletionPartitions int32
	ReplicationFactor    int16
	// PrecreatedTopics: the topics are made by someone else
	// (kafka.precreated_topics); copyd only checks they exist.
	PrecreatedTopics bool

	Copier Copier
	Codec  Codec
	Logger *slog.Logger
	// Metrics, when set, get the window's gauge and the transaction
	// counts (the Engine's metrics are usually the same *Metrics).
	Metrics *Metrics
	// KafkaOpts are added to the Kafka client (TLS, SASL, tests).
	KafkaOpts []kgo.Opt
}

// Daemon consumes copy tasks and publishes their completions.
//
// Tasks run concurrently (Workers at once) in a sliding window (window.go)
// per partition, in any order: a slow file holds back nothing but the
// commit of its own partition's later offsets.
//
// Exactly one completion per task (none for a task a further site passes
// over: DaemonConfig.Site). Invariant: a task's completion is
// produced only in the Kafka transaction that commits its partition's
// offset past it (commit, below). Every few hundred milliseconds the
// daemon begins a transaction, produces the completions of the
// contiguous finished prefix of every partition's window, commits each
// partition's offset just past its prefix in the same transaction
// (GroupTransactSession.End, with the offsets rewritten by a
// PreTxnCommitFnContext hook: the session would otherwise commit
// everything polled), and ends it. So:
//
//   - The committed offset never passes an unfinished task.
//   - If the daemon dies before the commit, the transaction aborts: the
//     tasks are delivered again (to it or to another daemon) and their
//     completions, never visible to read_committed readers, are produced
//     again; the files are then in place, so the copies are
//     SKIPPED_IDENTICAL with no bytes moved.
//   - If a rebalance revokes partitions, OnPartitionsRevoked drops their
//     slots and cancels their copies (the new owner redoes them; staging
//     names and rename-into-place make two writers safe), and the session
//     aborts the next transaction. After any abort the session rewinds
//     every partition to its committed offset, so the daemon drops its
//     whole window: everything in it is delivered again.
type Daemon struct {
	cfg DaemonConfig
	log *slog.Logger
	m   *Metrics

	win     *window      // the running window (tests)
	commits atomic.Int64 // transactions committed
}

// commitInterval is DaemonConfig.CommitInterval when it is zero.
const commitInterval = 200 * time.Millisecond

// revokeWait is how long a revoke waits for the copies it cancelled to
// return, so that a cancelled write does not race the new owner's.
const revokeWait = 10 * time.Second

// endTimeout bounds a transaction's produce and commit. They run on a
// context of their own: cancelling one midway leaves the client in an
// unknown state (GroupTransactSession.End).
const endTimeout = 60 * time.Second

// NewDaemon checks cfg.
func NewDaemon(cfg DaemonConfig) (*Daemon, error) {
	if cfg.Copier == nil || cfg.Codec == nil || len(cfg.Brokers) == 0 || cfg.Group == "" || cfg.TransactionalID == "" {
		return nil, errors.New("copyd: DaemonConfig needs Copier, Codec, Brokers, Group and TransactionalID")
	}
	// A field left zero gets its configuration key's default.
	config.FillZero(&cfg.Workers, "copyd.workers")
	if cfg.MaxBatch == 0 {
		cfg.MaxBatch = config.DefaultMaxBatch(cfg.Workers)
	}
	config.FillZero(&cfg.SessionTimeout, "copyd.session_timeout")
	config.FillZero(&cfg.CompletionPartitions, "kafka.manifest_partitions")
	config.FillZero(&cfg.ReplicationFactor, "kafka.replication_factor")
	if cfg.CommitInterval == 0 {
		cfg.CommitInterval = commitInterval
	}
	if cfg.Workers < 0 || cfg.MaxBatch < 0 || cfg.SessionTimeout < 0 || cfg.CommitInterval < 0 || cfg.CompletionPartitions < 0 ||
		cfg.ReplicationFactor < 0 {
		return nil, errors.New("copyd: DaemonConfig's durations, sizes and counts must not be negative")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m := cfg.Metrics
	if m == nil {
		m = NewMetrics()
	}
	return &Daemon{cfg: cfg, m: m, log: cfg.Logger.With("role", "copyd", "group", cfg.Group)}, nil
}

// Run copies until ctx ends (returning nil) or a fatal Kafka error. It
// returns only after every copy it started has returned.
func (d *Daemon) Run(ctx context.Context) error {
	c := d.cfg
	// Copies run on contexts of their own, cancelled only by the window
	// (drop, halt), which marks the slot dropped first: a copy
	// interrupted by a revoke or a shutdown is never published.
	copyCtx, stopCopies := context.WithCancel(context.WithoutCancel(ctx))
	defer stopCopies()
	var copies sync.WaitGroup
	defer copies.Wait()
	var w *window
	w = newWindow(c.Workers, func(s *slot) {
		sctx, cancel := context.WithCancel(copyCtx)
		s.cancel = cancel
		copies.Add(1)
		go func() {
			defer copies.Done()
			comp := c.Copier.Copy(sctx, s.task)
			cancel()
			w.finish(s, comp)
		}()
	})
	w.onSize = func(n int) { d.m.window.Set(float64(n)) }
	d.win = w

	var (
		exits    []chan struct{}
		err      error
		failures int
	)
	for {
		// A session being set up or retried is the loop alive too
		// (Kafka away is readiness's business): each attempt and each
		// wait between them marks it (the waits are at most 30s).
		d.m.loop.Beat()
		var progressed bool
		exits, progressed, err = d.session(ctx, w)
		var se *sessionError
		// Refused credentials or ACLs (the group, the transactional ID,
		// a topic) stay refused: stop at once, nothing committed.
		if err == nil || ctx.Err() != nil || !errors.As(err, &se) || kafka.IsAuthError(err) {
			break
		}
		if progressed {
			failures = 0
		}
		failures++
		if failures > maxSessionFailures {
			err = fmt.Errorf("%w (%d Kafka sessions in a row failed)", err, failures)
			break
		}
		// The transaction's outcome is unknown (End's errors leave the
		// client unusable): whatever it did, a new session with the same
		// transactional ID fences the old one, and the group's committed
		// offsets say what is left. Everything in the window comes again
		// from there; a task whose completion did commit is past them.
		delay := backoff(failures, time.Second, 30*time.Second)
		d.log.Warn("kafka session failed; dropping the window and starting a new session",
			"err", err, "failures", failures, "retry_in", delay.Round(time.Millisecond))
		d.m.sessions.Inc()
		waitAll(w.drop(nil, true, false), revokeWait)
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
		if ctx.Err() != nil {
			err = nil
			break
		}
	}
	if exits == nil {
		exits = w.halt()
	}
	waitAll(exits, revokeWait)
	return err
}

// maxSessionFailures bounds how many Kafka sessions in a row may fail
// (broker away, transaction ended in error) before the daemon gives up;
// with the backoff capped at 30s that is some ten minutes of outage. A
// session that committed something resets the count.
const maxSessionFailures = 20

// sessionError is a failure of the Kafka session itself (connecting,
// creating the completions topic, beginning or ending a transaction),
// which a new session may overcome.
type sessionError struct{ err error }

func (e *sessionError) Error() string { return e.err.Error() }
func (e *sessionError) Unwrap() error { return e.err }

// session runs one Kafka group transact session until ctx ends (nil) or an
// error. It reports whether it committed anything. When ctx ended it halts
// the window and commits what finished, and returns the halted copies'
// exit channels.
func (d *Daemon) session(ctx context.Context, w *window) (exits []chan struct{}, progressed bool, err error) {
	c := d.cfg
	topic := c.Topics.Manifests()
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(c.Brokers...),
		kgo.TransactionalID(c.TransactionalID),
		kgo.TransactionTimeout(60 * time.Second),
		kgo.ConsumerGroup(c.Group),
		kgo.SessionTimeout(c.SessionTimeout),
		kgo.HeartbeatInterval(config.HeartbeatInterval(c.SessionTimeout)),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		// A partition resumed after a pause (pace) is fetched again only
		// once the fetch in flight returns, which waits this long when
		// there is nothing new: keep it short (franz-go's default is 5s,
		// Kafka's own consumers' 500ms), or a backlog of quick tasks in
		// one partition idles between windows.
		kgo.FetchMaxWait(200 * time.Millisecond),
		// Also called for lost partitions (the session falls back to it).
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
			d.revoked(w, revoked[topic])
		}),
	}, c.KafkaOpts...)
	if c.Instance != "" {
		opts = append(opts, kgo.InstanceID(c.Instance))
	}
	sess, err := kgo.NewGroupTransactSession(opts...)
	if err != nil {
		return nil, false, fmt.Errorf("copyd: kafka: %w", err)
	}
	// Leaving the group revokes everything, which cancels what still runs.
	defer sess.Close()
	// Initialise the transactional producer at once: InitProducerID
	// aborts the transaction a killed predecessor (same transactional ID)
	// left open. Until then its pending offset commit makes the group's
	// offset fetch (RequireStableFetchOffsets) answer "unstable", and the
	// daemon would copy nothing until the broker timed the transaction
	// out, a minute later.
	if _, _, err := sess.Client().ProducerID(ctx); err != nil {
		return nil, false, &sessionError{fmt.Errorf("copyd: init transactional producer %q: %w", c.TransactionalID, err)}
	}
	if _, err := kafka.Ensure(ctx, kadm.NewClient(sess.Client()), kafka.Spec{
		Name: c.Topics.Completions(), Partitions: c.CompletionPartitions, ReplicationFactor: c.ReplicationFactor,
		Precreated: c.PrecreatedTopics,
	}); err != nil {
		return nil, false, &sessionError{err}
	}
	d.log.Info("consuming copy tasks", "topic", topic, "workers", c.Workers, "window", c.MaxBatch)

	before := d.commits.Load()
	err = d.loop(ctx, sess, w)
	progressed = d.commits.Load() > before
	if err != nil {
		return nil, progressed, err
	}
	// Stopping: no new copies, the running ones cancelled (and not
	// published); what finished is committed one last time, so a clean
	// stop loses no finished work.
	exits = w.halt()
	if cerr := d.commit(ctx, sess, w); cerr != nil {
		d.log.Warn("last commit failed; its tasks will be delivered again", "err", cerr)
	}
	return exits, progressed, nil
}

// loop polls, commits and waits until ctx ends (nil) or a fatal error.
// Each round marks hivedr_copyd_loop_timestamp_seconds (health.Loop): a
// poll waits at most CommitInterval, a commit at most endTimeout.
func (d *Daemon) loop(ctx context.Context, sess *kgo.GroupTransactSession, w *window) error {
	c := d.cfg
	paused := map[int32]bool{}
	last := time.Now()
	for ctx.Err() == nil {
		d.m.loop.Round(ctx)
		if ctx.Err() != nil {
			break // (the loop.hang fault point)
		}
		_, ready := w.committable()
		counts := w.counts()
		full := false
		for _, n := range counts {
			full = full || n >= c.MaxBatch
		}
		due := time.Until(last.Add(c.CommitInterval))
		if ready > 0 && (due <= 0 || full || 2*ready >= c.MaxBatch) {
			if err := d.commit(ctx, sess, w); err != nil {
				return err
			}
			last = time.Now()
			continue
		}
		wait := c.CommitInterval
		if ready > 0 {
			wait = max(due, time.Millisecond)
		}
		if err := d.poll(ctx, sess, w, d.pace(sess, counts, paused), wait); err != nil {
			return err
		}
	}
	return nil
}

// pace pauses fetching the partitions that hold MaxBatch tasks, resumes
// those it paused (paused is what it paused) once they are down to half
// that (a resumed partition waits for the fetch in flight: resuming at
// once would pause and resume it for every task), and returns how many
// records the next poll may take: no more than the fullest partition still
// fetched has room for, so no partition ever holds more than MaxBatch.
func (d *Daemon) pace(sess *kgo.GroupTransactSession, counts map[int32]int, paused map[int32]bool) int {
	topic := d.cfg.Topics.Manifests()
	var pause, resume []int32
	for p, n := range counts {
		if n >= d.cfg.MaxBatch && !paused[p] {
			pause = append(pause, p)
			paused[p] = true
		}
	}
	for p := range paused {
		if counts[p] <= d.cfg.MaxBatch/2 {
			resume = append(resume, p)
			delete(paused, p)
		}
	}
	if len(pause) > 0 {
		sess.Client().PauseFetchPartitions(map[string][]int32{topic: pause})
	}
	if len(resume) > 0 {
		sess.Client().ResumeFetchPartitions(map[string][]int32{topic: resume})
	}
	fullest := 0
	for p, n := range counts {
		if !paused[p] {
			fullest = max(fullest, n)
		}
	}
	return d.cfg.MaxBatch - fullest
}

// poll takes up to n records, waiting at most wait, into the window.
func (d *Daemon) poll(ctx context.Context, sess *kgo.GroupTransactSession, w *window, n int, wait time.Duration) error {
	revokes := w.revokeCount()
	pctx, cancel := context.WithTimeout(ctx, wait)
	fs := sess.PollRecords(pctx, n)
	cancel()
	var fatal error
	fs.EachError(func(topic string, p int32, err error) {
		switch {
		case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		case errors.Is(err, kgo.ErrClientClosed):
			fatal = err
		case kafka.IsAuthError(err):
			// The group or the manifests topic refused us: no retry
			// changes it. Nothing was polled, so nothing is committed.
			if fatal == nil {
				fatal = fmt.Errorf("group %s, topic %s: %w", d.cfg.Group, d.cfg.Topics.Manifests(), err)
			}
		default:
			d.log.Warn("fetch failed", "topic", topic, "partition", p, "err", err)
		}
	})
	if fatal != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("copyd: poll: %w", fatal)
	}
	// Every polled record goes into the window, even beside a fetch
	// error: the session's fetch position has moved past it.
	var slots []*slot
	fs.EachRecord(func(r *kgo.Record) { slots = append(slots, d.slotFor(ctx, r)) })
	if len(slots) == 0 || ctx.Err() != nil {
		// Stopping: a record that failed to decode because ctx ended
		// must not complete FAILED. Leaving records out is safe only
		// because nothing of their partitions is added after them.
		return nil
	}
	if !w.add(revokes, slots) {
		// A revoke came between the poll and now: these records may be
		// of a partition no longer ours, or follow slots just dropped.
		// Abort a transaction to rewind every partition to its
		// committed offset, and start again from there.
		d.log.Info("partitions moved while polling; taking the tasks again from the committed offsets")
		return d.reset(sess, w)
	}
	return nil
}

// slotFor decodes one manifest record into a slot. A record that does not
// decode still gets a completion, FAILED with the reason, so nothing is
// skipped silently; it needs no copy and is finished at once.
func (d *Daemon) slotFor(ctx context.Context, r *kgo.Record) *slot {
	s := &slot{part: r.Partition, offset: r.Offset, epoch: r.LeaderEpoch}
	v, err := d.cfg.Codec.Decode(ctx, r.Value)
	task, ok := v.(*schemas.CopyTask)
	if err != nil || !ok {
		if err == nil {
			err = fmt.Errorf("record is a %T, not a CopyTask", v)
		}
		now := time.Now()
		s.state = slotDone
		s.comp = schemas.CopyCompletion{
			TaskID: recordTaskID(r), Status: schemas.StatusFailed, Length: -1,
			Error:   fmt.Sprintf("manifest record %s/%d@%d does not decode: %v", r.Topic, r.Partition, r.Offset, err),
			Started: now, Finished: now, Attempts: 0,
		}
		return s
	}
	if site := d.cfg.Site; site != nil {
		if !site.InScope(task.Database, task.Table) {
			// Not the site's: committed with the others, no completion.
			s.state, s.passed = slotDone, true
			return s
		}
		tgt, err := site.Target(task)
		if err != nil {
			now := time.Now()
			s.state = slotDone
			s.comp = schemas.CopyCompletion{TaskID: task.TaskID, EventID: task.EventID, Database: task.Database,
				SourceURI: task.SourceURI, TargetURI: task.TargetURI, Status: schemas.StatusFailed, Length: -1,
				Error: err.Error(), Started: now, Finished: now}
			return s
		}
		task.TargetURI = tgt
	}
	s.task = *task
	s.target = targetKey(task.TargetURI)
	return s
}

// recordTaskID is a manifest record's task ID: its hivedr.task_id header
// (manifests are keyed by target), or its key for records of tailers that
// keyed them by task ID.
func recordTaskID(r *kgo.Record) string {
	for _, h := range r.Headers {
		if h.Key == kafka.HeaderTaskID {
			return string(h.Value)
		}
	}
	return string(r.Key)
}

// targetKey is the form of a target compared for same-target
// serialisation: its canonical form (package location), the location the
// Engine writes to, so two spellings of one file serialise. A target that
// does not parse is kept as it is; the Engine refuses it.
func targetKey(uri string) string {
	if c, err := location.Canonical(uri); err == nil {
		return c
	}
	return uri
}

// commit publishes the committable prefixes of the window with their
// offsets in one transaction.
//
// Invariant (exactly one completion per task): this is the only place a
// completion is produced, and it is produced in the transaction whose
// TxnOffsetCommit moves its partition's offset just past it. Both become
// visible together or not at all.
func (d *Daemon) commit(ctx context.Context, sess *kgo.GroupTransactSession, w *window) error {
	bs, total := w.committable()
	if total == 0 {
		return nil
	}
	// Encode before beginning: an encoding failure (the registry away)
	// then costs nothing but a retry at the next commit.
	recs := make([]*kgo.Record, 0, total)
	want := make(map[int32]kgo.EpochOffset, len(bs))
	for _, b := range bs {
		for _, s := range b.slots {
			if s.passed {
				continue
			}
			v, err := d.cfg.Codec.Encode(&s.comp)
			if err != nil {
				d.log.Warn("cannot encode a completion; retrying at the next commit", "task", s.comp.TaskID, "err", err)
				return nil
			}
			recs = append(recs, &kgo.Record{Topic: d.cfg.Topics.Completions(), Key: []byte(s.comp.TaskID), Value: v,
				Headers: []kgo.RecordHeader{{Key: kafka.HeaderType, Value: []byte(schemas.NameCopyCompletion)}}})
		}
		want[b.part] = kgo.EpochOffset{Epoch: b.epoch, Offset: b.next}
	}

	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), endTimeout)
	defer cancel()
	if err := sess.Begin(); err != nil {
		return &sessionError{fmt.Errorf("copyd: begin transaction: %w", err)}
	}
	firstErr := kafka.ProduceAll(ectx, sess, recs)
	if firstErr != nil {
		firstErr = fmt.Errorf("copyd: completions: %w", firstErr)
	}
	try := kgo.TryCommit
	if firstErr != nil {
		try = kgo.TryAbort
	}
	// The session commits the offsets of everything polled; the hook
	// commits instead each partition's offset just past its prefix, and
	// nothing for the others. A partition wanted but missing from the
	// request (not ours any more) fails the commit, which aborts.
	topic := d.cfg.Topics.Manifests()
	hook := kgo.PreTxnCommitFnContext(ectx, func(req *kmsg.TxnOffsetCommitRequest) error {
		seen := 0
		topics := req.Topics[:0]
		for _, t := range req.Topics {
			if t.Topic != topic {
				continue
			}
			parts := t.Partitions[:0]
			for _, p := range t.Partitions {
				eo, ok := want[p.Partition]
				if !ok {
					continue
				}
				p.Offset, p.LeaderEpoch = eo.Offset, eo.Epoch
				parts = append(parts, p)
				seen++
			}
			if len(parts) > 0 {
				t.Partitions = parts
				topics = append(topics, t)
			}
		}
		req.Topics = topics
		if seen != len(want) {
			return fmt.Errorf("%w (%d of %d)", errNotOwned, len(want)-seen, len(want))
		}
		return nil
	})
	committed, err := sess.End(hook, try)
	if err != nil && !errors.Is(err, errNotOwned) {
		return &sessionError{errors.Join(firstErr, fmt.Errorf("copyd: end transaction: %w", err))}
	}
	if committed {
		d.commits.Add(1)
		w.committed(bs)
		d.m.txns.WithLabelValues("committed").Inc()
		d.log.Debug("committed", "completions", total, "partitions", len(bs))
		return nil
	}
	// Aborted: the session has rewound every partition to its committed
	// offset, so everything in the window comes again. Drop it all.
	d.m.txns.WithLabelValues("aborted").Inc()
	switch {
	case firstErr != nil:
		d.log.Warn("commit aborted; the window's tasks will be delivered again", "err", firstErr)
	case err != nil:
		d.log.Info("commit aborted (partitions moved); the window's tasks will be delivered again", "err", err)
	default:
		d.log.Info("commit aborted (partitions moved); the window's tasks will be delivered again", "tasks", w.len())
	}
	waitAll(w.drop(nil, true, false), 0)
	if kafka.IsAuthError(firstErr) {
		// Denied the completions topic: every retry would copy the
		// window again and be denied again.
		return fmt.Errorf("topic %s: %w", d.cfg.Topics.Completions(), firstErr)
	}
	return nil
}

// errNotOwned is the commit hook's refusal to commit without a partition
// it was asked to commit.
var errNotOwned = errors.New("copyd: a partition to commit is not among the group's offsets")

// reset aborts an empty transaction, which rewinds every partition to its
// committed offset, and drops the whole window.
func (d *Daemon) reset(sess *kgo.GroupTransactSession, w *window) error {
	waitAll(w.drop(nil, true, false), 0)
	ctx, cancel := context.WithTimeout(context.Background(), endTimeout)
	defer cancel()
	if err := sess.Begin(); err != nil {
		return &sessionError{fmt.Errorf("copyd: begin transaction: %w", err)}
	}
	if _, err := sess.End(ctx, kgo.TryAbort); err != nil {
		return &sessionError{fmt.Errorf("copyd: abort transaction: %w", err)}
	}
	d.m.txns.WithLabelValues("aborted").Inc()
	return nil
}

// revoked drops the window's slots of partitions this daemon no longer
// owns and cancels their copies; their completions are never published,
// and the new owner redoes them. It waits a little for the cancelled
// copies to return. It runs on the Kafka client's goroutine, within the
// session's revoke handling, so the session also aborts the next commit.
func (d *Daemon) revoked(w *window, parts []int32) {
	if len(parts) == 0 {
		return
	}
	exits := w.drop(parts, false, true)
	d.log.Info("partitions revoked; their copies are cancelled and left to the new owner",
		"partitions", parts, "cancelled", len(exits))
	waitAll(exits, revokeWait)
}

// waitAll waits for chans to close, for at most d (0: do not wait).
func waitAll(chans []chan struct{}, d time.Duration) {
	if d <= 0 || len(chans) == 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	for _, c := range chans {
		select {
		case <-c:
		case <-t.C:
			return
		}
	}
}
