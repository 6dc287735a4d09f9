package applier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/internal/state"
	"github.com/hivedr/hivedr/schemas"
)

// item is one record of an event topic, decoded.
type item struct {
	rec *kgo.Record
	ev  *schemas.Event
	hb  *schemas.Heartbeat
	err error
	// control is a transaction marker: nothing to apply, only an offset.
	control bool
	// size is the record's encoded size (key and value), counted against
	// LookAheadBytes.
	size int64
}

// worker applies one database's topic, in order.
type worker struct {
	a         *Applier
	db, topic string
	partition int32
	log       *slog.Logger
	// ctx ends the worker (stop); done closes when run has returned.
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	// between ends the worker between two steps (finish): every wait
	// ends with it, while a step in progress (its metastore calls) runs
	// on ctx to its end. A child of ctx.
	between context.Context
	finish  context.CancelFunc

	mu     sync.Mutex
	queue  []*item
	events int   // events in queue
	bytes  int64 // the queue's records' encoded size (grow)
	// paused: push paused the topic's fetching and it has not been
	// resumed since (resuming wakes the client's fetch loop, so it is
	// done only when needed, not after every apply).
	paused bool
	// stalled: the worker waits or is halted, so its queue does not count
	// for the fetch gate (gate.go; setStalled).
	stalled bool
	// exited: run has returned, and bytes no longer count in the
	// applier's buffered total (what is queued after stays for retire's
	// look at the head, and is read again by whoever owns the topic next).
	exited   bool
	complete time.Time // source time up to which the replica is complete
	// applied is when the worker last applied an event (popN): head has
	// the cache forget its objects once it has been idle cacheIdle.
	applied time.Time
	// forgetAt wakes an idle worker when its cache is due to be forgotten
	// (head, wakeToForget); made on first use, then stopped and re-armed.
	// Only the worker's goroutine touches it.
	forgetAt *time.Timer
	// dropped: the database's DROP_DATABASE was done, and no
	// CREATE_DATABASE or bootstrap BEGIN since. A dropped database has no
	// replica to age: its replica_age series is removed (else it would
	// grow past the RPO and alert forever).
	dropped bool
	// lagGauge and ageGauge are the database's lag series, looked up once
	// per lookupEvery reports (reportLag): a lookup hashes the label, and
	// the reporter sets every database's series each second. nil: look up.
	lagGauge, ageGauge prometheus.Gauge
	reports            int

	wake chan struct{}

	// ms is the DR metastore connection of the step in progress (conn's),
	// taken from the applier's pool for the step (connect) and given back
	// after it (disconnect); nil between steps.
	ms    Metastore
	conn  *conn
	cache *cache
	// delayed are the obsolete ACID directories waiting for
	// applier.prune_delay (prunedelay.go), set by run; nil when it is 0.
	delayed *delayedRemovals
}

// newWorker makes the worker of one database's topic; run it with run. Its
// context exists from the start, so stop works even before run begins.
func newWorker(parent context.Context, a *Applier, db, topic string, partition int32) *worker {
	ctx, cancel := context.WithCancel(parent)
	between, finish := context.WithCancel(ctx)
	return &worker{
		between: between, finish: finish,
		a: a, db: db, topic: topic, partition: partition,
		log:    a.log.With("db", db),
		cache:  newCache(db),
		wake:   make(chan struct{}, 1),
		done:   make(chan struct{}),
		ctx:    ctx,
		cancel: cancel,
	}
}

// push appends items. Beyond LookAhead events or its share of
// LookAheadBytes (Applier.overShare) it pauses
// fetching of the topic; pop resumes it once the queue is at most half
// full by both. Both decide under w.mu, so a pause is never made on a
// count that a concurrent pop has already drained (the topic would stay
// paused with nothing queued to resume it).
func (w *worker) push(items []*item) {
	w.mu.Lock()
	defer w.a.gateCheck()
	defer w.mu.Unlock()
	for _, it := range items {
		w.queue = append(w.queue, it)
		w.grow(it.size)
		if it.ev != nil {
			w.events++
		}
	}
	if !w.paused && w.full() {
		w.a.cl.PauseFetchTopics(w.topic)
		w.paused = true
	}
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// grow adds d to the queue's encoded size and, while the worker runs, to
// the applier's buffered total; under w.mu.
func (w *worker) grow(d int64) {
	w.bytes += d
	if !w.exited {
		w.a.buffered.Add(d)
		if w.stalled {
			w.a.stalled.Add(d)
		}
	}
}

// full reports whether the queue is past its look-ahead; under w.mu.
func (w *worker) full() bool {
	return w.events > w.a.cfg.LookAhead || w.a.overShare(w.bytes)
}

// drained reports whether the queue is down to half its look-ahead, by
// events and by bytes: a paused topic is fetched again; under w.mu.
// (<=: with LookAhead 1, half is 0.)
func (w *worker) drained() bool {
	return w.events <= w.a.cfg.LookAhead/2 && w.a.underShare(w.bytes)
}

// resumeDrained fetches the topic again if push paused it and the queue
// is drained; under w.mu.
func (w *worker) resumeDrained() {
	if w.paused && w.drained() {
		w.a.cl.ResumeFetchTopics(w.topic)
		w.paused = false
	}
}

func (w *worker) stop() { w.cancel() }

// stopBetween ends the worker at the end of the step it is in (or at
// once when it waits), and waits for that up to bound; past it, it stops
// it (stop) and waits for that. It reports whether the worker ended
// between two steps: then no metastore call of it is in progress, and
// none lost in transit is left unretried (a step whose call failed in
// transit is tried again to its end, its waits not cut short by finish;
// the bound ends that).
func (w *worker) stopBetween(bound time.Duration) bool {
	w.finish()
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case <-w.done:
		return true
	case <-t.C:
		w.stop()
		<-w.done
		return false
	}
}

// run is the worker's loop. Guarantee 1 (order): items are taken strictly
// from the head of the queue, which holds the topic's records in offset
// order, and an item leaves the queue (and its offset is marked for
// commit) only after its event was applied or found to need nothing.
func (w *worker) run() {
	defer close(w.done)
	ctx := w.ctx
	defer w.cancel()
	defer func() {
		// What it still queues no longer counts against the others, and
		// whoever owns the database now reports it (under w.mu: the lag
		// reporter sets nothing for an exited worker).
		w.mu.Lock()
		defer w.a.gateCheck()
		defer w.mu.Unlock()
		w.a.buffered.Add(-w.bytes)
		if w.stalled {
			w.a.stalled.Add(-w.bytes)
		}
		w.exited = true
		w.a.m.lagEvents.DeleteLabelValues(w.db)
		w.a.m.replicaAge.DeleteLabelValues(w.db)
		w.a.m.rpo.DeleteLabelValues(w.db)
		w.a.m.halted.DeletePartialMatch(map[string]string{"db": w.db})
		w.a.m.waiting.DeletePartialMatch(map[string]string{"db": w.db})
		w.a.m.waitingFiles.DeleteLabelValues(w.db)
	}()
	if w.a.cfg.RPO != nil {
		w.a.m.rpo.WithLabelValues(w.db).Set(w.a.cfg.RPO(w.db).Seconds())
	}
	w.reportLag()
	w.delayed = newDelayedRemovals(w.a.cfg.PruneDelay)
	go w.removeDelayed(ctx)
	defer w.wakeToForget(false, 0)
	w.log.Info("database worker started", "topic", w.topic)
	for {
		it, ok := w.head(w.between)
		if !ok {
			return
		}
		var goOn bool
		switch {
		case it.control:
			w.pop(it)
			continue
		case it.err != nil:
			goOn = w.halt(ctx, nil, Decision{Outcome: Halt, Reason: ReasonUndecodableRecord, Detail: it.err.Error()})
		case it.hb != nil:
			goOn = w.heartbeat(ctx, it)
		default:
			goOn = w.handle(ctx, it)
		}
		if !goOn {
			return
		}
	}
}

// batch returns the items a plan of head may cover: head, and when head
// is a bootstrap's SNAPSHOT_PARTITION record, the consecutive records
// after it in the queue that are partition records of the same bootstrap
// and table, up to BatchPartitions records; when head may start a run of
// events on the database's tables (RunKey), the consecutive events after
// it that may join it, up to BatchPartitions partitions (transaction markers between
// them included, a heartbeat ends it). Only what the queue holds is
// taken; the plan decides how many of them it covers (Decision.Covered).
func (w *worker) batch(head *item) []*item {
	items := []*item{head}
	if w.a.cfg.BatchPartitions <= 1 {
		return items
	}
	if key, ok := partitionBatchKey(head.ev); ok {
		return append(items, w.following(func(ev *schemas.Event, n int) (int, bool) {
			k, ok := partitionBatchKey(ev)
			return 1, ok && k == key && 1+n < w.a.cfg.BatchPartitions
		}, false)...)
	}
	_, n0, ok := RunKey(w.db, head.ev)
	if !ok {
		return items
	}
	return append(items, w.following(func(ev *schemas.Event, n int) (int, bool) {
		_, m, ok := RunKey(w.db, ev)
		return m, ok && n0+n+m <= w.a.cfg.BatchPartitions
	}, true)...)
}

// following returns the consecutive items after the queue's head that
// join its batch: take says, given what the items taken so far count,
// what the next event counts and whether it is taken. Transaction
// markers between taken events are taken too, and with heartbeats so
// are heartbeats whose chain the event before them already satisfies
// (their previous event is at most that one: applied with the batch,
// the DR database is past it); anything else that is not an event ends
// the batch.
func (w *worker) following(take func(ev *schemas.Event, n int) (int, bool), heartbeats bool) []*item {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, last := 0, 0
	prev := w.queue[0].ev
	for i := 1; i < len(w.queue); i++ {
		it := w.queue[i]
		if it.control {
			continue
		}
		if hb := it.hb; hb != nil && heartbeats && prev != nil && hb.PreviousEventID != nil && *hb.PreviousEventID <= prev.EventID {
			continue
		}
		if it.ev == nil {
			break
		}
		prev = it.ev
		m, ok := take(it.ev, n)
		if !ok {
			break
		}
		n, last = n+m, i
	}
	return slices.Clone(w.queue[1 : last+1])
}

// batchKey is what the partition records of one batch share.
type batchKey struct {
	bootstrap string
	table     TableKey
}

func partitionBatchKey(ev *schemas.Event) (batchKey, bool) {
	if ev == nil || ev.EventType != schemas.EventSnapshotPartition || ev.Snapshot == nil || len(ev.Errors) > 0 {
		return batchKey{}, false
	}
	c, ok := ev.Payload.(*schemas.PartitionChange)
	if !ok {
		return batchKey{}, false
	}
	return batchKey{ev.Snapshot.BootstrapID, eventTable(ev, c.Table)}, true
}

// head waits for the oldest item.
func (w *worker) head(ctx context.Context) (*item, bool) {
	for {
		w.mu.Lock()
		if len(w.queue) > 0 {
			it := w.queue[0]
			w.mu.Unlock()
			return it, true
		}
		pending, since := !w.applied.IsZero(), time.Since(w.applied)
		if pending && since >= cacheIdle {
			w.applied, pending = time.Time{}, false
			w.cache.forget()
		}
		w.mu.Unlock()
		w.wakeToForget(pending, cacheIdle-since)
		select {
		case <-ctx.Done():
			return nil, false
		case <-w.wake:
		}
	}
}

// wakeToForget has the worker woken after d, when its cache is due to
// be forgotten (head), if pending; else cancels that. One timer a worker,
// armed only while it caches what it applied; only the worker's
// goroutine calls it.
func (w *worker) wakeToForget(pending bool, d time.Duration) {
	switch {
	case !pending:
		if w.forgetAt != nil {
			w.forgetAt.Stop()
		}
	case w.forgetAt == nil:
		w.forgetAt = time.AfterFunc(d, func() {
			select {
			case w.wake <- struct{}{}:
			default:
			}
		})
	default:
		w.forgetAt.Reset(d)
	}
}

// pop removes the head and marks its offset for commit: the event is done.
func (w *worker) pop(it *item) { w.popN([]*item{it}) }

// popN removes items, the head of the queue, and marks their offsets for
// commit: they are done (a batch, together).
func (w *worker) popN(items []*item) {
	w.mu.Lock()
	clear(w.queue[:len(items)]) // (the backing array keeps no popped item alive)
	w.queue = w.queue[len(items):]
	for _, it := range items {
		w.grow(-it.size)
		if it.hb != nil {
			// A heartbeat a run covered (following): every event before it
			// is applied.
			if t := it.hb.CompleteAt(); t.After(w.complete) {
				w.complete = t
			}
		}
		if it.ev == nil {
			continue
		}
		w.applied = time.Now()
		w.events--
		if movesComplete(it.ev) && it.ev.EventTime.After(w.complete) {
			w.complete = it.ev.EventTime
		}
		switch it.ev.EventType {
		case schemas.EventDropDatabase:
			w.dropped = w.dropped || strings.EqualFold(it.ev.Database, w.db)
		case schemas.EventCreateDatabase, schemas.EventSnapshotBegin:
			// (What may come after a drop without recreating the database,
			// such as a table's drop logged after it, leaves it dropped.)
			w.dropped = false
		}
	}
	w.resumeDrained()
	w.mu.Unlock()
	w.a.gateCheck()
	// Checkpoint: the offsets are marked only now, after the apply
	// succeeded; they are committed within a second (commitMarked) and
	// on revoke or shutdown.
	recs := make([]*kgo.Record, len(items))
	for i, it := range items {
		recs[i] = it.rec
	}
	w.a.cl.MarkCommitRecords(recs...)
	w.a.marked.Store(true)
}

// movesComplete reports whether applying ev makes the replica complete up
// to its time: not a bootstrap's BEGIN, TABLE or PARTITION record (the
// replica is consistent again only at its END), nor a discontinuity
// marker (its time is the tailer's start, not an event's; the next event
// or heartbeat says).
func movesComplete(ev *schemas.Event) bool {
	return (!isSnapshot(ev.EventType) || ev.EventType == schemas.EventSnapshotEnd) && ev.EventType != schemas.EventDiscontinuity
}

// later returns the events queued after the first n items.
func (w *worker) later(n int) []*schemas.Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]*schemas.Event, 0, w.events)
	for _, it := range w.queue[min(n, len(w.queue)):] {
		if it.ev != nil {
			out = append(out, it.ev)
		}
	}
	return out
}

// handle applies one event (or a batch of bootstrap partition records,
// starting with it), waiting and retrying as long as needed. It returns
// false when the worker must stop (halted or cancelled).
func (w *worker) handle(ctx context.Context, it *item) bool {
	ev := it.ev
	var (
		waitingSince time.Time // first wait on a copy that cannot succeed
		waitReason   Reason
		waitStart    time.Time
		backoff      = 500 * time.Millisecond
		conflicts    int
		failingSince time.Time // first TransientError of this event
		// inTransit: a call of this plan failed in transit (a timeout, a
		// reset): the metastore may still be running it, or have run it.
		inTransit bool
	)
	endWait := func() {
		if waitReason != "" {
			w.a.m.waiting.DeleteLabelValues(w.db, string(waitReason))
			w.a.m.waitingFiles.DeleteLabelValues(w.db)
			w.a.m.waitSeconds.WithLabelValues(w.db, string(waitReason)).Add(time.Since(waitStart).Seconds())
			waitReason = ""
		}
	}
	defer endWait()
	for {
		start := time.Now()
		items := w.batch(it) // again at each try: the queue may have grown
		evs := eventsOf(items)
		d, err := w.step(ctx, evs, len(items))
		if ctx.Err() != nil {
			return false
		}
		if err != nil {
			var fenced *FencedError
			if errors.As(err, &fenced) {
				w.cache.reset()
				return w.halt(ctx, ev, Decision{Outcome: Halt, Reason: ReasonFailedOver, Detail: err.Error()})
			}
			var refused *RefusedError
			if errors.As(err, &refused) && (isConflict(refused) || inTransit) && conflicts < maxConflicts {
				// The object is there (or gone) though the plan read it
				// otherwise: most likely a call of a killed applier that
				// the metastore finished after this one read the state
				// (the soak found it). Or a call this worker made earlier
				// and lost in transit is still running on the metastore,
				// and its twin is refused for it: a create_database that
				// timed out under load, run again while the first still
				// made the database's directory, was refused "Unable to
				// create database managed directory" (make bench-idle, 20
				// databases of 500 tables at once). Read again and plan
				// again; after a loss in transit, once the backoff let the
				// first call end.
				conflicts++
				w.log.Warn("the DR metastore changed under the plan; reading it again", "event_id", ev.EventID,
					"type", ev.EventType, "err", err, "attempt", conflicts, "after_a_call_lost_in_transit", inTransit)
				w.cache.reset()
				// (A call lost in transit may still run: the wait is
				// not cut short by finish, so the step ends first.)
				if inTransit && !sleep(ctx, backoff) {
					return false
				}
				continue
			}
			if errors.As(err, &refused) {
				return w.halt(ctx, ev, Decision{Outcome: Halt, Reason: ReasonMetastoreRefused, Detail: err.Error()})
			}
			var failed *TransientError
			if errors.As(err, &failed) {
				// The metastore failed, not refused (classify): retried
				// as long as applier.halt_after bounds a wait on a copy.
				if failingSince.IsZero() {
					failingSince = time.Now()
				}
				if time.Since(failingSince) >= w.a.cfg.HaltAfter {
					return w.halt(ctx, ev, Decision{Outcome: Halt, Reason: ReasonMetastoreRefused,
						Detail: fmt.Sprintf("%s (failing for %s)", err, w.a.cfg.HaltAfter)})
				}
				w.log.Warn("the DR metastore failed; retrying", "event_id", ev.EventID, "type", ev.EventType, "err", err, "retry_in", backoff)
				w.cache.reset() // a failed call may have done part of its work
				if !sleep(ctx, backoff) {
					return false
				}
				backoff = min(2*backoff, 30*time.Second)
				continue
			}
			w.log.Warn("apply failed; retrying", "event_id", ev.EventID, "type", ev.EventType, "err", err, "retry_in", backoff)
			inTransit = true
			if !sleep(ctx, backoff) { // (not cut short by finish: see above)
				return false
			}
			backoff = min(2*backoff, 30*time.Second)
			continue
		}
		switch d.Outcome {
		case Apply, NoOp:
			endWait()
			items, evs = covered(items, evs, d.Covered)
			w.finished(ctx, evs, d, time.Since(start))
			w.popN(items)
			w.stall(false)
			return true
		case Halt:
			return w.halt(ctx, ev, d)
		case Wait:
			if d.Reason != waitReason {
				endWait()
				waitReason, waitStart = d.Reason, time.Now()
				w.log.Info("event waits", "event_id", ev.EventID, "type", ev.EventType, "reason", d.Reason, "detail", d.Detail)
			}
			w.a.m.waiting.WithLabelValues(w.db, string(d.Reason)).Set(1)
			if d.Reason == ReasonWaitingForFiles {
				w.a.m.waitingFiles.WithLabelValues(w.db).Set(float64(len(d.WaitTasks)))
			}
			if d.Reason == ReasonSourceGone || d.Reason == ReasonCopyFailed {
				if waitingSince.IsZero() {
					waitingSince = time.Now()
				}
				if time.Since(waitingSince) >= w.a.cfg.HaltAfter {
					d.Outcome = Halt
					d.Detail += fmt.Sprintf(" (waited %s for a later event removing it)", w.a.cfg.HaltAfter)
					return w.halt(ctx, ev, d)
				}
			} else {
				waitingSince = time.Time{}
			}
			w.stall(true) // until it applies again (popN below)
			if !w.await(d) {
				return false
			}
		}
	}
}

// filesRecheck is how often a decision waiting for file copies is made
// again when none of its copies completed and no event arrived.
const filesRecheck = 10 * time.Second

// await waits for what may change a Wait decision: more events (the
// look-ahead), a completion, or a second. A decision waiting for file
// copies changes only once one of them completes (or more events arrive):
// the completions of other databases' files do not wake it, and it is
// made again without them only every filesRecheck. So hundreds of
// databases waiting for files do not take turns at the DR metastore
// connections (pool.go) to plan again for nothing. It returns false when
// the worker ends.
func (w *worker) await(d Decision) bool {
	every := time.Second
	if d.Reason == ReasonWaitingForFiles {
		every = filesRecheck
	}
	t := time.NewTimer(every)
	defer t.Stop()
	changed := w.a.cfg.Completions.Changed()
	// (A completion that came since the plan read them: at once.)
	if d.Reason == ReasonWaitingForFiles && w.anyCompleted(d.WaitTasks) {
		return true
	}
	for {
		select {
		case <-w.between.Done():
			return false
		case <-w.wake: // more events: the look-ahead may have changed
			return true
		case <-t.C:
			return true
		case <-changed:
			changed = w.a.cfg.Completions.Changed() // (before looking: none is missed)
			if d.Reason != ReasonWaitingForFiles || w.anyCompleted(d.WaitTasks) {
				return true
			}
		}
	}
}

// anyCompleted reports whether one of the copy tasks has a completion (or
// the store cannot tell: the plan finds out).
func (w *worker) anyCompleted(tasks []string) bool {
	for _, id := range tasks {
		if _, ok, err := w.a.cfg.Completions.Get(id); ok || err != nil {
			return true
		}
	}
	return len(tasks) == 0
}

// covered returns the items and events of a batch that a decision
// covering the first event and k more covers.
func covered(items []*item, evs []*schemas.Event, k int) ([]*item, []*schemas.Event) {
	if k >= len(evs)-1 {
		return items, evs
	}
	last := evs[k]
	for i, it := range items {
		if it.ev == last {
			return items[:i+1], evs[:k+1]
		}
	}
	return items, evs // (not reached: every event is one of the items)
}

// finished accounts for the events a decision applied or found applied: the
// metrics, and a debug line per event ("event done", which bench-lag
// reads), at info for a superseded object or a bootstrap's applied batch.
func (w *worker) finished(ctx context.Context, evs []*schemas.Event, d Decision, took time.Duration) {
	ev, last := evs[0], evs[len(evs)-1]
	result := ReasonApplied
	if d.Outcome == NoOp {
		result = d.Reason
	} else {
		w.a.m.applySeconds.WithLabelValues(string(ev.EventType)).Observe(took.Seconds())
	}
	w.a.m.batchEvents.WithLabelValues(w.db).Observe(float64(len(evs)))
	w.a.m.lastID.WithLabelValues(w.db).Set(float64(last.EventID))
	w.a.m.lastTime.WithLabelValues(w.db).Set(float64(last.EventTime.Unix()))
	w.a.m.halted.DeletePartialMatch(map[string]string{"db": w.db})
	w.countBootstrap(evs)
	if len(evs) > 1 && len(d.Results) == len(evs) {
		// A run of events: each its own result, one line each.
		for i, e := range evs {
			w.a.m.events.WithLabelValues(w.db, string(e.EventType), string(d.Results[i])).Inc()
			if d.Results[i] == ReasonApplied && movesComplete(e) {
				w.a.m.eventLag.WithLabelValues(w.db).Observe(time.Since(e.EventTime).Seconds())
			}
			lvl := slog.LevelDebug
			if d.Results[i] == ReasonSuperseded || d.Results[i] == ReasonSupersededByBootstrap {
				lvl = slog.LevelInfo
			}
			w.log.Log(ctx, lvl, "event done", "event_id", e.EventID, "type", e.EventType, "result", d.Results[i],
				"run_first", ev.EventID, "run_events", len(evs), "actions", len(d.Actions))
		}
		return
	}
	if d.Outcome == Apply && movesComplete(ev) {
		w.a.m.eventLag.WithLabelValues(w.db).Observe(time.Since(ev.EventTime).Seconds())
	}
	w.a.m.events.WithLabelValues(w.db, string(ev.EventType), string(result)).Add(float64(len(evs)))
	lvl := slog.LevelDebug
	if d.Detail != "" && (d.Reason == ReasonSuperseded || d.Reason == ReasonSupersededByBootstrap || isSnapshot(ev.EventType) && d.Outcome == Apply) {
		lvl = slog.LevelInfo
	}
	attrs := []any{"event_id", ev.EventID, "type", ev.EventType, "result", result, "actions", len(d.Actions), "detail", d.Detail}
	if ev.Snapshot != nil {
		attrs = append(attrs, "bootstrap", ev.Snapshot.BootstrapID, "seq", ev.Snapshot.Seq, "records", len(evs))
	}
	w.log.Log(ctx, lvl, "event done", attrs...)
}

// heartbeat checks a heartbeat's chain (PlanHeartbeat) and, unless the
// database halts on it, moves the time up to which the replica is
// complete to the heartbeat's scanned time: every event of the database
// up to the heartbeat's scanned event is on the topic before it, and all
// of those were applied. It returns false when the worker must stop.
func (w *worker) heartbeat(ctx context.Context, it *item) bool {
	for backoff := 500 * time.Millisecond; ; backoff = min(2*backoff, 30*time.Second) {
		d, err := w.stepHeartbeat(ctx, it.hb)
		if ctx.Err() != nil {
			return false
		}
		if err != nil {
			var refused *RefusedError
			if errors.As(err, &refused) {
				return w.halt(ctx, nil, Decision{Outcome: Halt, Reason: ReasonMetastoreRefused, Detail: err.Error()})
			}
			w.log.Warn("heartbeat check failed; retrying", "err", err, "retry_in", backoff)
			if !sleep(w.between, backoff) {
				return false
			}
			continue
		}
		if d.Outcome == Halt {
			return w.halt(ctx, nil, d)
		}
		if d.Outcome == Apply {
			w.log.Warn("heartbeat: "+d.Detail, "previous_event_id", *it.hb.PreviousEventID)
		}
		w.mu.Lock()
		if t := it.hb.CompleteAt(); t.After(w.complete) && d.Reason != ReasonInBootstrap {
			w.complete = t
		}
		w.mu.Unlock()
		w.pop(it)
		return true
	}
}

// stepHeartbeat reads the DR database, plans the heartbeat and runs what
// it asks. A heartbeat is planned first from the worker's copy of the
// database when it was read less than heartbeatFresh ago: when that finds
// the chain unbroken (nothing to write) it is done without a metastore
// call; anything else is planned again from the database read anew.
func (w *worker) stepHeartbeat(ctx context.Context, hb *schemas.Heartbeat) (_ Decision, err error) {
	name := strings.ToLower(w.db)
	if cur, ok := w.cache.cachedDBWithin(name, time.Now(), heartbeatFresh); ok && cur != nil {
		d := PlanHeartbeat(HeartbeatInput{DB: w.db, Source: w.a.cfg.Source, Heartbeat: hb, Replica: cur})
		if d.Outcome == NoOp && d.Reason == ReasonHeartbeat {
			return d, nil
		}
	}
	if err := w.connect(ctx); err != nil {
		return Decision{}, err
	}
	defer func() { w.disconnect(ctx, err) }()
	x := w.executor()
	rep, err := x.read(ctx, Touched{Databases: []string{name}})
	if err != nil {
		w.cache.reset()
		return Decision{}, err
	}
	cur := rep.Databases[name]
	var accept bool
	if cur != nil && hb.PreviousEventID != nil {
		_, accept = cur.Parameters[drparam.SkipKey(*hb.PreviousEventID)]
	}
	d := PlanHeartbeat(HeartbeatInput{DB: w.db, Source: w.a.cfg.Source, Heartbeat: hb, Replica: cur, AcceptGap: accept})
	for _, act := range d.Actions {
		if err := x.run(ctx, act); err != nil {
			w.cache.reset()
			return Decision{}, err
		}
	}
	w.cache.apply(d.Actions)
	return d, nil
}

// executor runs on the worker's connection, with its cache, and times
// its calls (hivedr_applier_dr_call_seconds).
func (w *worker) executor() *executor {
	return &executor{ms: w.ms, files: w.a.cfg.Files, writtenAfter: w.a.cfg.Completions.WrittenAfter, cache: w.cache,
		log: w.log, observe: w.a.observeCall, delayed: w.delayed}
}

// connect takes a DR metastore connection from the applier's pool for a
// step, waiting for one (in turn with the other databases) when all are
// in use; disconnect gives it back.
func (w *worker) connect(ctx context.Context) error {
	c, err := w.a.pool.get(ctx)
	if err != nil {
		return err
	}
	w.conn, w.ms = c, c.ms
	return nil
}

// disconnect gives the step's connection back to the pool, or discards it
// when the step's error leaves it out of step with the metastore
// (connBroken).
func (w *worker) disconnect(ctx context.Context, err error) {
	c := w.conn
	w.conn, w.ms = nil, nil
	if connBroken(err) {
		// (A failure of the metastore's, not of ctx ending, backs the
		// pool's dials off.)
		w.a.pool.discard(c, ctx.Err() == nil)
		return
	}
	w.a.pool.put(c)
}

func eventsOf(items []*item) []*schemas.Event {
	var evs []*schemas.Event
	for _, it := range items {
		if it.ev != nil {
			evs = append(evs, it.ev)
		}
	}
	return evs
}

// countBootstrap counts the tables, partitions and files of the bootstrap
// records done (hivedr_applier_bootstrap_applied_total).
func (w *worker) countBootstrap(evs []*schemas.Event) {
	var tables, parts, files int
	for _, ev := range evs {
		switch ev.EventType {
		case schemas.EventSnapshotTable:
			tables++
		case schemas.EventSnapshotPartition:
			parts++
		default:
			continue
		}
		files += len(ev.Files)
	}
	for kind, n := range map[string]int{"tables": tables, "partitions": parts, "files": files} {
		if n > 0 {
			w.a.m.bootstrapApplied.WithLabelValues(w.db, kind).Add(float64(n))
		}
	}
}

// decide reads the state the events need (one event, or a batch of
// bootstrap partition records covering n queue items) and plans them.
func (w *worker) decide(ctx context.Context, x *executor, evs []*schemas.Event, n int) (decision, error) {
	ev := evs[0]
	touched := schemas.Touches(w.db, ev)
	for _, e := range evs[1:] {
		touched.Merge(schemas.Touches(w.db, e))
	}
	rep, err := x.read(ctx, touched)
	if err != nil {
		w.cache.reset()
		return decision{}, err
	}
	copies := map[string]Copy{}
	for _, e := range evs {
		for _, f := range e.Files {
			if f.TaskID == "" {
				continue
			}
			c, ok, err := w.a.cfg.Completions.Get(f.TaskID)
			if err != nil {
				return decision{}, err
			}
			if ok {
				copies[f.TaskID] = toCopy(c)
			}
		}
	}
	db := strings.ToLower(w.db)
	var inv *Inventory
	if tables, all, ok := InventoryScope(ev, rep.Databases[db]); ok {
		if inv, err = x.inventory(ctx, db, ev.Snapshot.BootstrapID, tables, all); err != nil {
			return decision{}, err
		}
	}
	wids, err := x.writeIDs(ctx, WriteIDScope(db, ev, rep)) // exec_acid_bootstrap.go
	if err != nil {
		return decision{}, err
	}
	var skip, acceptGap bool
	if cur := rep.Databases[db]; cur != nil {
		_, skip = cur.Parameters[drparam.SkipKey(ev.EventID)]
		if ev.PreviousEventID != nil {
			_, acceptGap = cur.Parameters[drparam.SkipKey(*ev.PreviousEventID)]
		}
	}
	d := Plan(Input{DB: w.db, Source: w.a.cfg.Source, Event: ev, Batch: evs[1:], Inventory: inv, Replica: rep, Copies: copies,
		Later: w.later(n), Skip: skip, AcceptGap: acceptGap, Policy: w.a.cfg.Policy, WriteIDs: wids})
	// A bootstrap's records share the cut's event ID: a skip of an event
	// with that ID is not theirs (Plan ignores it for them).
	return decision{d, skip && !isSnapshot(ev.EventType)}, nil
}

// decision is a Decision with whether it is of an event an operator
// skipped (its note goes on the skip record).
type decision struct {
	Decision
	skip bool
}

// step reads the state the events need (one event, or a batch of
// bootstrap partition records covering n queue items), plans, and runs
// the actions.
func (w *worker) step(ctx context.Context, evs []*schemas.Event, n int) (_ Decision, err error) {
	if err := w.connect(ctx); err != nil {
		return Decision{}, err
	}
	defer func() { w.disconnect(ctx, err) }()
	x := w.executor()
	ev := evs[0]
	// Another database's worker may change this one's objects around an
	// event naming both (a cross-database rename): forget what is cached
	// once it is done, whatever happened.
	if len(schemas.Touches(w.db, ev).Databases) > 1 {
		defer w.cache.reset()
	}
	dd, err := w.decide(ctx, x, evs, n)
	d := dd.Decision
	if err != nil || d.Outcome == Halt {
		return d, err
	}
	if dd.skip {
		noteSkip(d.Actions, w.db, ev)
	}
	x.prepare(d.Actions)
	for _, act := range d.Actions {
		if err := x.run(ctx, act); err != nil {
			w.cache.reset() // part of the actions may have happened
			return Decision{}, err
		}
	}
	w.cache.apply(d.Actions)
	return d, nil
}

// noteSkip completes the operator's skip record with what was skipped.
func noteSkip(actions []Action, db string, ev *schemas.Event) {
	AppendNote(actions, db, drparam.SkipKey(ev.EventID), fmt.Sprintf("skipped %s event %d at %s",
		ev.EventType, ev.EventID, time.Now().UTC().Format(time.RFC3339)))
}

func toCopy(c state.Completion) Copy {
	return Copy{Status: schemas.CopyStatus(c.Status), TargetURI: c.Target, Error: c.Error}
}

// maxConflicts bounds how often one event is planned again because the
// DR metastore said an object exists (or does not) against what the plan
// read, or refused a call after one of the plan's was lost in transit;
// beyond it the database halts (metastore_refused).
const maxConflicts = 3

// halt stops the database: loudly in the log, in the halted metric, and on
// the DR database (hivedr.halted) for `hivedr status`. It returns when the
// worker is cancelled (false) or, for a halt a bootstrap releases, when
// the halt ends (true: the worker goes on with its queue's head).
func (w *worker) halt(ctx context.Context, ev *schemas.Event, d Decision) bool {
	id, typ := int64(0), "-"
	if ev != nil {
		id, typ = ev.EventID, string(ev.EventType)
	}
	w.stall(true) // its queue waits: the fetch gate does not weigh it
	w.a.m.halted.WithLabelValues(w.db, string(d.Reason)).Set(1)
	attrs := []any{"event_id", id, "type", typ, "reason", d.Reason, "detail", d.Detail}
	// A broken chain's detail names the event to skip; a bootstrap's
	// records share the cut's ID and are not skipped one by one.
	if ev != nil && d.Reason != ReasonChainBroken && !isSnapshot(ev.EventType) {
		attrs = append(attrs, "skip", fmt.Sprintf("--skip-event %s:%d", w.db, id))
	}
	if ev != nil && ev.Snapshot != nil {
		attrs = append(attrs, "bootstrap", ev.Snapshot.BootstrapID, "seq", ev.Snapshot.Seq)
	}
	w.log.Error("database halted: fix the cause, then restart hivedr apply (or skip the event with --skip-event)", attrs...)
	if ctx.Err() == nil {
		if err := w.recordHalt(ctx, drparam.FormatHalt(id, typ, string(d.Reason), d.Detail)); err != nil {
			w.log.Warn("could not record the halt on the DR database", "err", err)
		}
	}
	if !d.Reason.ReleasedByBootstrap() {
		<-w.between.Done()
		return false
	}
	return w.awaitRelease(ctx, d.Reason)
}

// awaitRelease keeps a halted worker reading its topic instead of
// blocking: a whole-database bootstrap's BEGIN later in the queue releases
// the halt (the records before it are skipped: the bootstrap replaces the
// database as of its cut, see Reason.ReleasedByBootstrap), and for a
// missing object (replannable) the head is planned again as the queue
// grows, since a later event may remove the object or a bootstrap of the
// table bring it. It returns true once released, false when cancelled.
//
// Memory stays bounded: when the queue passes LookAhead events with no
// BEGIN in it (and the head, planned again, still halts), all but the
// head are dropped from memory (not marked: a restart reads them again)
// and fetching goes on, each arriving record looked at for a
// whole-database BEGIN only. A dropped record would be lost to a replan,
// so from then on only such a BEGIN releases (a table's bootstrap further
// than the look-ahead is seen after a restart, when it is within it).
func (w *worker) awaitRelease(ctx context.Context, reason Reason) (released bool) {
	defer func() {
		if released {
			w.stall(false)
		}
	}()
	w.log.Info("the halted database keeps reading its topic: a bootstrap of it later on the topic releases the halt", "reason", reason)
	var (
		overflow bool
		dropped  = map[schemas.EventType]int{} // records dropped from memory, by type
		last     *kgo.Record                   // the newest of them
	)
	for {
		w.mu.Lock()
		begin := -1
		for i := 1; i < len(w.queue); i++ {
			if wholeDatabaseBegin(w.db, w.queue[i].ev) {
				begin = i
				break
			}
		}
		full := begin < 0 && w.full()
		w.mu.Unlock()
		if begin > 0 {
			w.release(begin, dropped, last, reason)
			return true
		}
		// Planned again before anything is dropped: with the whole
		// look-ahead.
		if !overflow && reason.replannable() && w.replanned(ctx) {
			w.log.Info("the halted database goes on: more of its topic removes or brings the missing object", "reason", reason)
			return true
		}
		w.mu.Lock()
		if full {
			for _, it := range w.queue[1:] {
				if it.ev != nil {
					dropped[it.ev.EventType]++
				}
				last = it.rec
			}
			w.queue = w.queue[:1]
			w.events = 0
			w.grow(w.queue[0].size - w.bytes)
			if w.queue[0].ev != nil {
				w.events = 1
			}
			if !overflow {
				w.log.Info("the halted database's look-ahead is full: its records are read on, looked at for a bootstrap's BEGIN only (a restart reads them again)",
					"look_ahead", w.a.cfg.LookAhead)
			}
			overflow = true
			w.a.cl.ResumeFetchTopics(w.topic)
			w.paused = false
		}
		w.mu.Unlock()
		select {
		case <-w.between.Done():
			return false
		case <-w.wake:
		}
	}
}

// release skips the n records at the head of the queue (the halted one
// and those up to a whole-database bootstrap's BEGIN) and the records
// dropped from memory before them, as superseded_by_bootstrap: counted by
// type, logged once, their offsets marked.
func (w *worker) release(n int, dropped map[schemas.EventType]int, last *kgo.Record, reason Reason) {
	w.mu.Lock()
	skipped, begin := w.queue[:n], w.queue[n].ev
	w.queue = w.queue[n:]
	var total int
	for _, it := range skipped {
		w.grow(-it.size)
		if it.ev != nil {
			w.events--
			dropped[it.ev.EventType]++
		}
		last = it.rec
	}
	w.resumeDrained()
	w.mu.Unlock()
	for typ, k := range dropped {
		w.a.m.events.WithLabelValues(w.db, string(typ), string(ReasonSupersededByBootstrap)).Add(float64(k))
		total += k
	}
	w.a.cl.MarkCommitRecords(last)
	w.a.marked.Store(true)
	w.a.m.halted.DeletePartialMatch(map[string]string{"db": w.db})
	w.log.Warn("halted database released by a bootstrap of it: the records before its BEGIN are skipped (superseded_by_bootstrap)",
		"reason", reason, "bootstrap", begin.Snapshot.BootstrapID, "cut_event_id", begin.EventID, "skipped_events", total)
}

// replanned plans the head of the queue again, without running anything,
// and reports whether it no longer halts.
func (w *worker) replanned(ctx context.Context) bool {
	w.mu.Lock()
	head := w.queue[0]
	w.mu.Unlock()
	if head.ev == nil {
		return false
	}
	if err := w.connect(ctx); err != nil {
		return false
	}
	x := w.executor()
	items := w.batch(head)
	d, err := w.decide(ctx, x, eventsOf(items), len(items))
	w.disconnect(ctx, err)
	return err == nil && d.Outcome != Halt
}

func (w *worker) recordHalt(ctx context.Context, msg string) (err error) {
	if err := w.connect(ctx); err != nil {
		return err
	}
	defer func() { w.disconnect(ctx, err) }()
	db, err := w.ms.GetDatabase(ctx, w.db)
	if err != nil {
		if isNoSuchObject(err) {
			return nil
		}
		return err
	}
	if db.Parameters[drparam.Target] != drparam.TargetMark(w.a.cfg.Source) {
		return nil // not ours to write
	}
	if len(msg) > 3000 {
		msg = msg[:3000] + "..."
	}
	db.Parameters[drparam.Halted] = msg
	w.cache.reset()
	return w.ms.AlterDatabase(ctx, w.db, db)
}

// reportLag sets the database's lag gauges (Applier.reportLags calls it
// every second); nothing once the worker has exited.
func (w *worker) reportLag() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.exited {
		return
	}
	n, complete, dropped := w.events, w.complete, w.dropped
	for _, it := range w.queue {
		if it.ev != nil {
			// (During a bootstrap the replica is complete only up to
			// where it was before it, until its END.)
			if movesComplete(it.ev) {
				complete = it.ev.EventTime
			}
			break
		}
	}
	// Looked up again now and then: a series deleted by another worker
	// of the database (a hand-over) would otherwise be set unseen.
	if w.reports++; w.reports%lookupEvery == 0 {
		w.lagGauge, w.ageGauge = nil, nil
	}
	if w.lagGauge == nil {
		w.lagGauge = w.a.m.lagEvents.WithLabelValues(w.db)
	}
	w.lagGauge.Set(float64(n))
	switch {
	case dropped && n == 0:
		w.a.m.replicaAge.DeleteLabelValues(w.db)
		w.ageGauge = nil
	case !complete.IsZero():
		if w.ageGauge == nil {
			w.ageGauge = w.a.m.replicaAge.WithLabelValues(w.db)
		}
		w.ageGauge.Set(max(0, time.Since(complete).Seconds()))
	}
}

// lookupEvery is how many lag reports a worker sets through the series
// it looked up before it looks them up again.
const lookupEvery = 30

func sleep(ctx context.Context, d time.Duration) bool {
	d += time.Duration(rand.Int64N(int64(d)/4 + 1))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
