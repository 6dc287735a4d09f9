package applier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

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

	mu       sync.Mutex
	queue    []*item
	events   int       // events in queue
	complete time.Time // source time up to which the replica is complete
	wake     chan struct{}

	ms      Metastore
	closeMS func() error
	cache   *cache
}

// newWorker makes the worker of one database's topic; run it with run. Its
// context exists from the start, so stop works even before run begins.
func newWorker(parent context.Context, a *Applier, db, topic string, partition int32) *worker {
	ctx, cancel := context.WithCancel(parent)
	return &worker{
		a: a, db: db, topic: topic, partition: partition,
		log:    a.log.With("db", db),
		cache:  newCache(db),
		wake:   make(chan struct{}, 1),
		done:   make(chan struct{}),
		ctx:    ctx,
		cancel: cancel,
	}
}

// push appends items. Beyond LookAhead events it pauses fetching of the
// topic; pop resumes it once the queue is at most half full. Both decide
// under w.mu, so a pause is never made on a count that a concurrent pop
// has already drained (the topic would stay paused with nothing queued
// to resume it).
func (w *worker) push(items []*item) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, it := range items {
		w.queue = append(w.queue, it)
		if it.ev != nil {
			w.events++
		}
	}
	if w.events > w.a.cfg.LookAhead {
		w.a.cl.PauseFetchTopics(w.topic)
	}
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *worker) stop() { w.cancel() }

// run is the worker's loop. Guarantee 1 (order): items are taken strictly
// from the head of the queue, which holds the topic's records in offset
// order, and an item leaves the queue (and its offset is marked for
// commit) only after its event was applied or found to need nothing.
func (w *worker) run() {
	defer close(w.done)
	ctx := w.ctx
	defer w.cancel()
	defer func() {
		if w.closeMS != nil {
			w.closeMS()
		}
		// Whoever owns the database now reports it.
		w.a.m.lagEvents.DeleteLabelValues(w.db)
		w.a.m.replicaAge.DeleteLabelValues(w.db)
		w.a.m.rpo.DeleteLabelValues(w.db)
		w.a.m.halted.DeletePartialMatch(map[string]string{"db": w.db})
		w.a.m.waiting.DeletePartialMatch(map[string]string{"db": w.db})
	}()
	if w.a.cfg.RPO != nil {
		w.a.m.rpo.WithLabelValues(w.db).Set(w.a.cfg.RPO(w.db).Seconds())
	}
	go w.reportLag(ctx)
	w.log.Info("database worker started", "topic", w.topic)
	for {
		it, ok := w.head(ctx)
		if !ok {
			return
		}
		switch {
		case it.control:
			w.pop(it)
			continue
		case it.err != nil:
			w.halt(ctx, nil, Decision{Outcome: Halt, Reason: ReasonUndecodableRecord, Detail: it.err.Error()})
			return
		case it.hb != nil:
			if !w.heartbeat(ctx, it) {
				return
			}
			continue
		}
		if !w.handle(ctx, it) {
			return
		}
	}
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
		w.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, false
		case <-w.wake:
		}
	}
}

// pop removes the head and marks its offset for commit: the event is done.
func (w *worker) pop(it *item) {
	w.mu.Lock()
	w.queue = w.queue[1:]
	if it.ev != nil {
		w.events--
		if it.ev.EventTime.After(w.complete) {
			w.complete = it.ev.EventTime
		}
	}
	// (<=: with LookAhead 1, half is 0.)
	if w.events <= w.a.cfg.LookAhead/2 {
		w.a.cl.ResumeFetchTopics(w.topic)
	}
	w.mu.Unlock()
	// Checkpoint: the offset is marked only now, after the apply
	// succeeded; the client commits marked offsets every second and on
	// revoke or shutdown.
	w.a.cl.MarkCommitRecords(it.rec)
}

// later returns the events queued after the head.
func (w *worker) later() []*schemas.Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]*schemas.Event, 0, w.events)
	for _, it := range w.queue[1:] {
		if it.ev != nil {
			out = append(out, it.ev)
		}
	}
	return out
}

// handle applies one event, waiting and retrying as long as needed. It
// returns false when the worker must stop (halted or cancelled).
func (w *worker) handle(ctx context.Context, it *item) bool {
	ev := it.ev
	var (
		waitingSince time.Time // first wait on a copy that cannot succeed
		waitReason   Reason
		waitStart    time.Time
		backoff      = 500 * time.Millisecond
	)
	endWait := func() {
		if waitReason != "" {
			w.a.m.waiting.DeleteLabelValues(w.db, string(waitReason))
			w.a.m.waitSeconds.WithLabelValues(w.db, string(waitReason)).Add(time.Since(waitStart).Seconds())
			waitReason = ""
		}
	}
	defer endWait()
	for {
		start := time.Now()
		d, err := w.step(ctx, ev)
		if ctx.Err() != nil {
			return false
		}
		if err != nil {
			var refused *RefusedError
			if errors.As(err, &refused) {
				w.halt(ctx, ev, Decision{Outcome: Halt, Reason: ReasonMetastoreRefused, Detail: err.Error()})
				return false
			}
			w.log.Warn("apply failed; retrying", "event_id", ev.EventID, "type", ev.EventType, "err", err, "retry_in", backoff)
			w.reconnect()
			if !sleep(ctx, backoff) {
				return false
			}
			backoff = min(2*backoff, 30*time.Second)
			continue
		}
		switch d.Outcome {
		case Apply, NoOp:
			endWait()
			result := ReasonApplied
			if d.Outcome == NoOp {
				result = d.Reason
			} else {
				w.a.m.applySeconds.WithLabelValues(string(ev.EventType)).Observe(time.Since(start).Seconds())
				w.a.m.eventLag.WithLabelValues(w.db).Observe(time.Since(ev.EventTime).Seconds())
			}
			w.a.m.events.WithLabelValues(w.db, string(ev.EventType), string(result)).Inc()
			w.a.m.lastID.WithLabelValues(w.db).Set(float64(ev.EventID))
			w.a.m.lastTime.WithLabelValues(w.db).Set(float64(ev.EventTime.Unix()))
			w.a.m.halted.DeletePartialMatch(map[string]string{"db": w.db})
			lvl := slog.LevelDebug
			if d.Detail != "" && d.Reason == ReasonSuperseded {
				lvl = slog.LevelInfo
			}
			w.log.Log(ctx, lvl, "event done", "event_id", ev.EventID, "type", ev.EventType, "result", result, "actions", len(d.Actions), "detail", d.Detail)
			w.pop(it)
			return true
		case Halt:
			w.halt(ctx, ev, d)
			return false
		case Wait:
			if d.Reason != waitReason {
				endWait()
				waitReason, waitStart = d.Reason, time.Now()
				w.log.Info("event waits", "event_id", ev.EventID, "type", ev.EventType, "reason", d.Reason, "detail", d.Detail)
			}
			v := 1.0
			if d.Reason == ReasonWaitingForFiles {
				v = float64(len(d.WaitTasks))
			}
			w.a.m.waiting.WithLabelValues(w.db, string(d.Reason)).Set(v)
			if d.Reason == ReasonSourceGone || d.Reason == ReasonCopyFailed {
				if waitingSince.IsZero() {
					waitingSince = time.Now()
				}
				if time.Since(waitingSince) >= w.a.cfg.HaltAfter {
					d.Outcome = Halt
					d.Detail += fmt.Sprintf(" (waited %s for a later event removing it)", w.a.cfg.HaltAfter)
					w.halt(ctx, ev, d)
					return false
				}
			} else {
				waitingSince = time.Time{}
			}
			changed := w.a.cfg.Completions.Changed()
			t := time.NewTimer(time.Second)
			select {
			case <-ctx.Done():
				t.Stop()
				return false
			case <-changed:
			case <-w.wake: // more events: the look-ahead may have changed
			case <-t.C:
			}
			t.Stop()
		}
	}
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
				w.halt(ctx, nil, Decision{Outcome: Halt, Reason: ReasonMetastoreRefused, Detail: err.Error()})
				return false
			}
			w.log.Warn("heartbeat check failed; retrying", "err", err, "retry_in", backoff)
			w.reconnect()
			if !sleep(ctx, backoff) {
				return false
			}
			continue
		}
		if d.Outcome == Halt {
			w.halt(ctx, nil, d)
			return false
		}
		if d.Outcome == Apply {
			w.log.Warn("heartbeat: "+d.Detail, "previous_event_id", *it.hb.PreviousEventID)
		}
		w.mu.Lock()
		if t := it.hb.CompleteAt(); t.After(w.complete) {
			w.complete = t
		}
		w.mu.Unlock()
		w.pop(it)
		return true
	}
}

// stepHeartbeat reads the DR database, plans the heartbeat and runs what
// it asks.
func (w *worker) stepHeartbeat(ctx context.Context, hb *schemas.Heartbeat) (Decision, error) {
	if err := w.connect(ctx); err != nil {
		return Decision{}, err
	}
	x := &executor{ms: w.ms, files: w.a.cfg.Files, writtenAfter: w.a.cfg.Completions.WrittenAfter, cache: w.cache}
	rep, err := x.read(ctx, Touched{Databases: []string{strings.ToLower(w.db)}})
	if err != nil {
		w.cache.reset()
		return Decision{}, err
	}
	cur := rep.Databases[strings.ToLower(w.db)]
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

// connect dials the DR metastore if the worker has no connection.
func (w *worker) connect(ctx context.Context) error {
	if w.ms != nil {
		return nil
	}
	ms, closeFn, err := w.a.cfg.Dial(ctx)
	if err != nil {
		return err
	}
	w.ms, w.closeMS = ms, closeFn
	return nil
}

// step reads the state an event needs, plans, and runs the actions.
func (w *worker) step(ctx context.Context, ev *schemas.Event) (Decision, error) {
	if err := w.connect(ctx); err != nil {
		return Decision{}, err
	}
	x := &executor{ms: w.ms, files: w.a.cfg.Files, writtenAfter: w.a.cfg.Completions.WrittenAfter, cache: w.cache}
	touched := Touches(w.db, ev)
	// Another database's worker may change this one's objects around an
	// event naming both (a cross-database rename): forget what is cached
	// once it is done, whatever happened.
	if len(touched.Databases) > 1 {
		defer w.cache.reset()
	}
	rep, err := x.read(ctx, touched)
	if err != nil {
		w.cache.reset()
		return Decision{}, err
	}
	copies := map[string]Copy{}
	for _, f := range ev.Files {
		if f.TaskID == "" {
			continue
		}
		c, ok, err := w.a.cfg.Completions.Get(f.TaskID)
		if err != nil {
			return Decision{}, err
		}
		if ok {
			copies[f.TaskID] = toCopy(c)
		}
	}
	var skip, acceptGap bool
	if db := rep.Databases[strings.ToLower(w.db)]; db != nil {
		_, skip = db.Parameters[drparam.SkipKey(ev.EventID)]
		if ev.PreviousEventID != nil {
			_, acceptGap = db.Parameters[drparam.SkipKey(*ev.PreviousEventID)]
		}
	}
	d := Plan(Input{DB: w.db, Source: w.a.cfg.Source, Event: ev, Replica: rep, Copies: copies,
		Later: w.later(), Skip: skip, AcceptGap: acceptGap, Policy: w.a.cfg.Policy})
	if d.Outcome == Halt {
		return d, nil
	}
	if skip {
		noteSkip(d.Actions, w.db, ev)
	}
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

func (w *worker) reconnect() {
	if w.closeMS != nil {
		w.closeMS()
	}
	w.ms, w.closeMS = nil, nil
}

// halt stops the database: loudly in the log, in the halted metric, and on
// the DR database (hivedr.halted) for `hivedr status`.
func (w *worker) halt(ctx context.Context, ev *schemas.Event, d Decision) {
	id, typ := int64(0), "-"
	if ev != nil {
		id, typ = ev.EventID, string(ev.EventType)
	}
	w.a.m.halted.WithLabelValues(w.db, string(d.Reason)).Set(1)
	attrs := []any{"event_id", id, "type", typ, "reason", d.Reason, "detail", d.Detail}
	if ev != nil && d.Reason != ReasonChainBroken { // a broken chain's detail names the event to skip
		attrs = append(attrs, "skip", fmt.Sprintf("--skip-event %s:%d", w.db, id))
	}
	w.log.Error("database halted: fix the cause, then restart hivedr apply (or skip the event with --skip-event)", attrs...)
	if w.ms != nil || ctx.Err() == nil {
		if err := w.recordHalt(ctx, fmt.Sprintf("event %d %s: %s: %s", id, typ, d.Reason, d.Detail)); err != nil {
			w.log.Warn("could not record the halt on the DR database", "err", err)
		}
	}
	<-ctx.Done()
}

func (w *worker) recordHalt(ctx context.Context, msg string) error {
	if err := w.connect(ctx); err != nil {
		return err
	}
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

// reportLag keeps the lag gauges current.
func (w *worker) reportLag(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		w.mu.Lock()
		n, complete := w.events, w.complete
		for _, it := range w.queue {
			if it.ev != nil {
				complete = it.ev.EventTime
				break
			}
		}
		w.mu.Unlock()
		w.a.m.lagEvents.WithLabelValues(w.db).Set(float64(n))
		if !complete.IsZero() {
			w.a.m.replicaAge.WithLabelValues(w.db).Set(max(0, time.Since(complete).Seconds()))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

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
