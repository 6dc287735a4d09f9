package applier

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hivedr/hivedr/schemas"
)

// newDatabases returns the databases cp names (its topics' chain and its
// bootstraps) that seen does not hold yet, sorted, and adds them to seen.
func newDatabases(seen map[string]bool, cp *schemas.TailerCheckpoint) []string {
	var out []string
	add := func(db string) {
		if db != "" && !seen[db] {
			seen[db] = true
			out = append(out, db)
		}
	}
	for db := range cp.TopicLastEventIDs {
		add(db)
	}
	for _, b := range cp.Bootstraps {
		add(b.Database)
	}
	sort.Strings(out)
	return out
}

// watchNewDatabases finds new databases' topics at once. The event
// consumer finds topics matching its pattern by refreshing the cluster's
// metadata, every 10 s; a new database's first event would wait for that.
// The tailer's checkpoint, written in the same transaction as the events,
// names every database it has published to, so this reads the checkpoints
// topic from its end and, whenever a checkpoint names a database not seen
// before, has the event consumer refresh its metadata now: the pattern
// then matches the new topic and the group assigns it.
func (a *Applier) watchNewDatabases(ctx context.Context, events *kgo.Client) {
	topic := a.cfg.Topics.Checkpoints()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(a.cfg.Brokers...),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// A checkpoint becomes readable when its transaction commits, and
		// a read_committed long poll is not always woken by that: keep
		// the wait short so none is missed for seconds.
		kgo.FetchMaxWait(500 * time.Millisecond),
	}, a.cfg.KafkaOpts...)...)
	if err != nil {
		a.log.Warn("cannot watch the tailer's checkpoints; new databases are found by the periodic metadata refresh", "topic", topic, "err", err)
		return
	}
	defer cl.Close()
	seen := map[string]bool{}
	var lastErr time.Time
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return
		}
		for _, fe := range fs.Errors() {
			if errors.Is(fe.Err, context.Canceled) || errors.Is(fe.Err, kgo.ErrClientClosed) {
				continue
			}
			if time.Since(lastErr) > time.Minute {
				lastErr = time.Now()
				a.log.Warn("reading the tailer's checkpoints; new databases may wait for the periodic metadata refresh", "topic", topic, "err", fe.Err)
			}
		}
		var found []string
		fs.EachRecord(func(r *kgo.Record) {
			v, err := a.cfg.Codec.Decode(ctx, r.Value)
			if cp, ok := v.(*schemas.TailerCheckpoint); err == nil && ok {
				found = append(found, newDatabases(seen, cp)...)
			}
		})
		if len(found) > 0 {
			a.log.Info("the tailer published to new databases; refreshing the topics", "databases", found)
			events.ForceMetadataRefresh()
		}
	}
}
