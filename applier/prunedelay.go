package applier

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hivedr/hivedr/internal/acid"
	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/location"
)

// Obsolete ACID directories are removed applier.prune_delay after the
// event that made them obsolete (a base's commit, a compaction), not at
// once. A DR reader that planned its query before the event reads them
// (Hive's readers choose their directories when the query starts and
// open the files later), so removing them at once fails a long query
// with FileNotFound; the source's cleaner waits for such readers too.
// Hive's cleaner waits until no read transaction older than the
// compaction is open; a replica cannot tell which of its readers use
// transactions (a reader of an insert-only table through another engine
// opens none), so a delay is the rule: a query that runs longer than it
// may still fail.
//
// Only obsolete ACID directories wait: a reader that starts after the
// event never reads them (a base covering them is valid), so keeping them
// a while shows no one stale data. The files of a non-transactional
// object (an INSERT OVERWRITE's old files, a truncate's, an object made
// again) sit beside the files a reader must read, and every reader would
// read both while they waited: they go at once.
//
// The wait is in memory, per database worker. A worker that stops (a
// crash, a rebalance moving its database) forgets what it waited to
// remove: those directories stay until the next prune of their directory
// (the next base or compaction there) removes them with the rest. DR
// readers never read them meanwhile; only the replica's listing holds
// more than the source's.

// delayedRemovals are the removals waiting for their delay.
type delayedRemovals struct {
	delay time.Duration
	// added has a value when a removal was queued since the worker's
	// remover last looked: an idle worker's remover sleeps on it, not on
	// a ticker (thousands of databases, thousands of idle workers).
	added chan struct{}
	mu    sync.Mutex
	queue []delayedRemoval // oldest first: every removal waits the same delay
}

// delayedRemoval is the files of obsolete ACID directories under one
// table or partition directory, due at due.
type delayedRemoval struct {
	due  time.Time
	dir  string
	what string // the action that found them, for errors and logs
	locs []string
	// eventID is the event that made them obsolete (copiedLater).
	eventID int64
}

// newDelayedRemovals is the queue of a worker with prune delay d; nil
// (remove at once) when d is not positive.
func newDelayedRemovals(d time.Duration) *delayedRemovals {
	if d <= 0 {
		return nil
	}
	return &delayedRemovals{delay: d, added: make(chan struct{}, 1)}
}

// add queues locs, found under dir by what (for event eventID) at now.
func (q *delayedRemovals) add(now time.Time, dir, what string, eventID int64, locs []string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.queue = append(q.queue, delayedRemoval{due: now.Add(q.delay), dir: dir, what: what, locs: locs, eventID: eventID})
	select {
	case q.added <- struct{}{}:
	default:
	}
}

// next returns when the first queued removal is due (every later one is
// due no earlier: all wait the same delay); false when none waits.
func (q *delayedRemovals) next() (time.Time, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.queue) == 0 {
		return time.Time{}, false
	}
	return q.queue[0].due, true
}

// take removes and returns the removals due at now.
func (q *delayedRemovals) take(now time.Time) []delayedRemoval {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for n < len(q.queue) && !q.queue[n].due.After(now) {
		n++
	}
	out := slices.Clone(q.queue[:n])
	q.queue = slices.Delete(q.queue, 0, n)
	return out
}

// retry queues r again, due after another delay.
func (q *delayedRemovals) retry(now time.Time, r delayedRemoval) {
	q.add(now, r.dir, r.what, r.eventID, r.locs)
}

// pending is how many removals wait.
func (q *delayedRemovals) pending() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queue)
}

// removeObsolete removes locs, the files of obsolete ACID directories
// under dir that what found, or queues them for the prune delay.
func (x *executor) removeObsolete(ctx context.Context, dir, what string, eventID int64, locs []string) error {
	if len(locs) == 0 {
		return nil
	}
	if x.delayed != nil {
		x.delayed.add(x.now(), dir, what, eventID, locs)
		return nil
	}
	for _, loc := range locs {
		if err := x.files.Remove(ctx, loc); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	return nil
}

// removeDue removes the queued files whose delay has passed. Each is
// checked again first: its directory must still be obsolete, covered by
// a directory under dir now (acid.ObsoleteAfter). A table dropped and
// made again meanwhile may have written a directory of the same name
// (its delta_1 is the old one's name), which is not obsolete: it stays.
// A removal that fails is queued again.
func (x *executor) removeDue(ctx context.Context) error {
	var errs []error
	for _, r := range x.delayed.take(x.now()) {
		if err := x.removeStillObsolete(ctx, r); err != nil {
			x.delayed.retry(x.now(), r)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (x *executor) removeStillObsolete(ctx context.Context, r delayedRemoval) error {
	if x.files == nil {
		return fmt.Errorf("%s: no filesystem is configured for DR data", r.what)
	}
	d, err := location.Parse(r.dir)
	if err != nil {
		return fmt.Errorf("%s: %w", r.what, err)
	}
	present := map[string]bool{}
	err = x.files.Walk(ctx, r.dir, func(loc string, _ int64) error {
		if l, err := location.Parse(loc); err == nil {
			if rel, ok := l.Rel(d); ok {
				top, _, _ := strings.Cut(rel, "/")
				present[top] = true
			}
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil // gone with its directory
	}
	if err != nil {
		return fmt.Errorf("%s: %w", r.what, err)
	}
	covered := func(top string) bool {
		for p := range present {
			if by, ok := acid.ParseDir(p); ok && p != top && acid.ObsoleteAfter(top, by) {
				return true
			}
		}
		return false
	}
	for _, loc := range r.locs {
		l, err := location.Parse(loc)
		if err != nil {
			continue
		}
		rel, ok := l.Rel(d)
		top, _, _ := strings.Cut(rel, "/")
		if !ok || !present[top] || !covered(top) {
			continue
		}
		// A copy made since for a later event (a table made again at
		// the path) carries its mark: it stays.
		if later, err := x.copiedLater(ctx, location.Append(d.String(), rel), loc, r.eventID); err != nil {
			return fmt.Errorf("%s: %w", r.what, err)
		} else if later {
			continue
		}
		if err := x.files.Remove(ctx, loc); err != nil {
			return fmt.Errorf("%s: %w", r.what, err)
		}
	}
	return nil
}

// removeDelayed runs the worker's delayed removals as they come due,
// until ctx ends. It sleeps until the first queued removal is due, or
// until one is queued when none waits: an idle worker's remover never
// wakes.
func (w *worker) removeDelayed(ctx context.Context) {
	q := w.delayed
	if q == nil {
		return
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		var due <-chan time.Time
		if at, ok := q.next(); ok {
			timer.Reset(max(time.Until(at), 0))
			due = timer.C
		}
		select {
		case <-ctx.Done():
			return
		case <-q.added:
			timer.Stop()
			continue
		case <-due:
		}
		x := &executor{files: w.a.cfg.Files, delayed: q, log: w.log}
		if err := x.removeDue(ctx); err != nil && ctx.Err() == nil {
			w.log.Warn("removing obsolete ACID directories after the prune delay failed; retrying after another delay", "err", err)
		}
	}
}
