package copyd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hivedr/hivedr/internal/kafka"
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
	// Workers is how many files are copied at once. Default 8.
	Workers int
	// MaxBatch is the most copy tasks taken per round. Default 4*Workers.
	MaxBatch int
	// CompletionPartitions and ReplicationFactor create the completions
	// topic if it is missing.
	CompletionPartitions int32
	ReplicationFactor    int16

	Copier Copier
	Codec  Codec
	Logger *slog.Logger
	// KafkaOpts are added to the Kafka client (TLS, SASL, tests).
	KafkaOpts []kgo.Opt
}

// Daemon consumes copy tasks and publishes their completions.
//
// Exactly one completion per task: a round's completions are produced in
// one Kafka transaction that also commits the consumer group's offsets of
// the round's tasks (consume-transform-produce). If the daemon dies, or a
// rebalance moves the partitions, before the commit, the transaction
// aborts and the tasks are delivered again; their files are then already
// in place, so the second copy is a SKIPPED_IDENTICAL with no bytes moved,
// and still only one completion becomes visible to read_committed readers.
//
// Tasks of a round run concurrently, in any order; the round's offsets are
// committed only when all of its tasks are done, so the committed offset
// never passes an unfinished task.
type Daemon struct {
	cfg DaemonConfig
	log *slog.Logger
}

// NewDaemon checks cfg.
func NewDaemon(cfg DaemonConfig) (*Daemon, error) {
	if cfg.Copier == nil || cfg.Codec == nil || len(cfg.Brokers) == 0 || cfg.Group == "" || cfg.TransactionalID == "" {
		return nil, errors.New("copyd: DaemonConfig needs Copier, Codec, Brokers, Group and TransactionalID")
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 8
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 4 * cfg.Workers
	}
	if cfg.CompletionPartitions <= 0 {
		cfg.CompletionPartitions = 12
	}
	if cfg.ReplicationFactor <= 0 {
		cfg.ReplicationFactor = 1
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Daemon{cfg: cfg, log: cfg.Logger.With("role", "copyd", "group", cfg.Group)}, nil
}

// Run copies until ctx ends (returning nil) or a fatal Kafka error.
func (d *Daemon) Run(ctx context.Context) error {
	c := d.cfg
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(c.Brokers...),
		kgo.TransactionalID(c.TransactionalID),
		kgo.TransactionTimeout(60 * time.Second),
		kgo.ConsumerGroup(c.Group),
		kgo.ConsumeTopics(c.Topics.Manifests()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
	}, c.KafkaOpts...)
	if c.Instance != "" {
		opts = append(opts, kgo.InstanceID(c.Instance))
	}
	sess, err := kgo.NewGroupTransactSession(opts...)
	if err != nil {
		return fmt.Errorf("copyd: kafka: %w", err)
	}
	defer sess.Close()
	if err := kafka.Ensure(ctx, kadm.NewClient(sess.Client()), kafka.Spec{
		Name: c.Topics.Completions(), Partitions: c.CompletionPartitions, ReplicationFactor: c.ReplicationFactor,
	}); err != nil {
		return err
	}
	d.log.Info("consuming copy tasks", "topic", c.Topics.Manifests(), "workers", c.Workers)
	for {
		fs := sess.PollRecords(ctx, c.MaxBatch)
		if ctx.Err() != nil {
			return nil
		}
		if err := fs.Err0(); err != nil {
			if errors.Is(err, context.Canceled) {
				return nil
			}
			d.log.Warn("fetch failed", "err", err)
			continue
		}
		recs := fs.Records()
		if len(recs) == 0 {
			continue
		}
		if err := d.round(ctx, sess, recs); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

// round copies recs' tasks and publishes their completions with the
// group's offsets in one transaction.
func (d *Daemon) round(ctx context.Context, sess *kgo.GroupTransactSession, recs []*kgo.Record) error {
	comps := make([]schemas.CopyCompletion, len(recs))
	sem := make(chan struct{}, d.cfg.Workers)
	var wg sync.WaitGroup
	for i, r := range recs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			comps[i] = d.copyRecord(ctx, r)
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		// Stopping mid-round: publish nothing; the tasks come back to
		// whoever owns their partitions next.
		return ctx.Err()
	}
	if err := sess.Begin(); err != nil {
		return fmt.Errorf("copyd: begin transaction: %w", err)
	}
	var (
		mu       sync.Mutex
		firstErr error
		pwg      sync.WaitGroup
	)
	for i := range comps {
		v, err := d.cfg.Codec.Encode(&comps[i])
		if err != nil {
			mu.Lock()
			if firstErr == nil {
				firstErr = fmt.Errorf("copyd: encode completion of %s: %w", comps[i].TaskID, err)
			}
			mu.Unlock()
			break
		}
		pwg.Add(1)
		rec := &kgo.Record{Topic: d.cfg.Topics.Completions(), Key: []byte(comps[i].TaskID), Value: v,
			Headers: []kgo.RecordHeader{{Key: kafka.HeaderType, Value: []byte(schemas.NameCopyCompletion)}}}
		sess.Produce(ctx, rec, func(_ *kgo.Record, err error) {
			defer pwg.Done()
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = fmt.Errorf("copyd: produce completion: %w", err)
				}
				mu.Unlock()
			}
		})
	}
	pwg.Wait()
	try := kgo.TryCommit
	if firstErr != nil {
		try = kgo.TryAbort
	}
	committed, err := sess.End(ctx, try)
	switch {
	case err != nil:
		return errors.Join(firstErr, fmt.Errorf("copyd: end transaction: %w", err))
	case firstErr != nil:
		d.log.Warn("round aborted; its tasks will be delivered again", "err", firstErr)
	case !committed:
		d.log.Info("round not committed (partitions moved); its tasks will be delivered again", "tasks", len(recs))
	default:
		d.log.Debug("round committed", "tasks", len(recs))
	}
	return nil
}

// copyRecord decodes one manifest record and copies its task. A record
// that does not decode still gets a completion, FAILED with the reason, so
// nothing is skipped silently.
func (d *Daemon) copyRecord(ctx context.Context, r *kgo.Record) schemas.CopyCompletion {
	v, err := d.cfg.Codec.Decode(ctx, r.Value)
	task, ok := v.(*schemas.CopyTask)
	if err != nil || !ok {
		if err == nil {
			err = fmt.Errorf("record is a %T, not a CopyTask", v)
		}
		now := time.Now()
		return schemas.CopyCompletion{
			TaskID: string(r.Key), Status: schemas.StatusFailed, Length: -1,
			Error:   fmt.Sprintf("manifest record %s/%d@%d does not decode: %v", r.Topic, r.Partition, r.Offset, err),
			Started: now, Finished: now, Attempts: 0,
		}
	}
	return d.cfg.Copier.Copy(ctx, *task)
}
