package applier

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hivedr/hivedr/schemas"
)

// burst is a database a with one partitioned table t and n ADD_PARTITION
// events on it, a file each, from event 3 on.
func burst(n int) (all, adds []*schemas.Event) {
	t := srcTable("a", "t", []string{"ds"}, "x int")
	all = []*schemas.Event{createDB(1, "a"), createTable(2, t)}
	for i := 1; i <= n; i++ {
		p := srcPart(t, fmt.Sprintf("%04d", i))
		adds = append(adds, addParts(int64(2+i), t, []schemas.Partition{p}, partFile(p, "f")))
	}
	return at(append(all, adds...)...), adds
}

// TestApplierRunsEvents: 250 ADD_PARTITION events of one table, queued
// together with a heartbeat after every tenth (the tailer's, chained to
// the event before it), are applied in runs of up to
// applier.batch_partitions (100): a handful of add_partitions calls and
// watermark writes instead of 250 of each, every partition stamped with
// its own event, and the hivedr_applier_batch_events histogram says so.
func TestApplierRunsEvents(t *testing.T) {
	f := newKFix(t, "a")
	all, adds := burst(250)
	f.complete(schemas.StatusCopied, nil, all...)
	var items []any
	for i, ev := range chained(all) {
		items = append(items, ev)
		if i%10 == 9 {
			items = append(items, &schemas.Heartbeat{Database: "a", ScannedEventID: ev.EventID, ScannedEventTime: ev.EventTime,
				Sent: time.Now(), Source: "src", PreviousEventID: id(ev.EventID)})
		}
	}
	for len(items) > 0 {
		k := min(50, len(items))
		f.publish(items[:k]...)
		items = items[k:]
	}
	r := f.start("g", t.TempDir(), func(c *Config) { c.BatchPartitions = 100 })
	f.waitMark("a", 252)
	// (The metrics follow the metastore calls.)
	waitFor(t, "252 events counted", func() (bool, string) {
		_, n := r.histogram(t, "hivedr_applier_batch_events", map[string]string{"db": "a"})
		return n == 252, fmt.Sprintf("%v counted", n)
	})
	r.stop(t)
	for i, ev := range adds {
		p := f.ms.part("a", "t", fmt.Sprintf("%04d", i+1))
		if p == nil || stamp(p.Parameters) != ev.EventID {
			t.Fatalf("partition %04d: %v, want it at event %d", i+1, p, ev.EventID)
		}
	}
	batches := f.addBatches()
	var sum int
	for _, n := range batches {
		sum += n
		if n > 100 {
			t.Errorf("an add_partitions of %d partitions, past batch_partitions 100", n)
		}
	}
	if sum != 250 || len(batches) > 10 {
		t.Errorf("add_partitions calls %v: want 250 partitions in far fewer than 250 calls", batches)
	}
	marks := f.ms.marksOf("a")
	checkMarks(t, "a", marks, idsOf("a", all), false)
	if len(marks) > 12 {
		t.Errorf("the watermark moved %d times for 252 events", len(marks))
	}
	count, sumEvents := r.histogram(t, "hivedr_applier_batch_events", map[string]string{"db": "a"})
	if sumEvents != 252 || count >= 252 {
		t.Errorf("hivedr_applier_batch_events: %v plans of %v events, want 252 events in fewer plans", count, sumEvents)
	}
	if v, _ := r.metric(t, "hivedr_applier_events_total", map[string]string{"db": "a", "type": string(schemas.EventAddPartition), "result": "applied"}); v != 250 {
		t.Errorf("%v ADD_PARTITION events counted applied, want 250", v)
	}
	t.Logf("250 events in add_partitions calls of %v, %d watermark writes", batches, len(marks))
}

// TestApplierRunKilledMidRun: the applier dies after a run's
// add_partitions succeeded and before its watermark was written (the
// call never returns): its offsets are not committed, and the next
// applier plans the run again over partitions stamped past the DR
// database's stale watermark: every one a no-op (a strict metastore
// would refuse adding one twice), no halt, and the rest applies.
func TestApplierRunKilledMidRun(t *testing.T) {
	f := newKFix(t, "a")
	all, adds := burst(60)
	f.complete(schemas.StatusCopied, nil, all...)
	f.publishAll(60, all)
	stuck := make(chan struct{})
	var once sync.Once
	f.ms.setHook(func(ctx context.Context, op string) error {
		if op == "AlterDatabase" && len(f.addBatches()) == 1 {
			once.Do(func() { close(stuck) })
			<-ctx.Done() // the process dies here
			return ctx.Err()
		}
		return nil
	})
	r1 := f.start("g", t.TempDir(), func(c *Config) { c.BatchPartitions = 20 })
	<-stuck
	r1.stop(t)
	f.ms.setHook(nil)
	first := f.addBatches()
	if len(first) != 1 || f.ms.mark("a") >= adds[first[0]-1].EventID {
		t.Fatalf("at the kill: add_partitions %v, DR database at %d", first, f.ms.mark("a"))
	}

	r2 := f.start("g", t.TempDir(), func(c *Config) { c.BatchPartitions = 20 })
	f.waitMark("a", 62)
	r2.stop(t)
	if got := f.addBatches(); got[0] != first[0] || slices.Contains(got[1:], 0) {
		t.Errorf("add_partitions of %v over both runs", got)
	}
	var sum int
	for _, n := range f.addBatches() {
		sum += n
	}
	if sum != 60 {
		t.Errorf("%d partitions added over both runs, want 60 (each once)", sum)
	}
	if v, _ := r2.metric(t, "hivedr_applier_events_total", map[string]string{"db": "a", "type": string(schemas.EventAddPartition), "result": string(ReasonAlreadyApplied)}); v != float64(first[0]) {
		t.Errorf("the second applier found %v events applied, want the %d of the killed run", v, first[0])
	}
	if v := r2.sum(t, "hivedr_applier_halted", nil); v != 0 {
		t.Errorf("halted: %v", v)
	}
	for i, ev := range adds {
		if p := f.ms.part("a", "t", fmt.Sprintf("%04d", i+1)); p == nil || stamp(p.Parameters) != ev.EventID {
			t.Errorf("partition %04d: %v", i+1, p)
		}
	}
}

// histogram returns a histogram's sample count and sum for the series
// with exactly labels.
func (r *running) histogram(t *testing.T, name string, labels map[string]string) (count uint64, sum float64) {
	t.Helper()
	h := r.series(t, name, labels).GetHistogram()
	return h.GetSampleCount(), h.GetSampleSum()
}

// TestApplierLookAheadBytes: a database whose head waits for its files
// reads ahead only as far as applier.look_ahead_bytes allows (past it,
// after the poll that crossed it: a poll brings up to 1000 records), then
// pauses its topic; once the files are copied everything applies, the
// topic fetched again as the queue drains.
func TestApplierLookAheadBytes(t *testing.T) {
	f := newKFix(t, "a")
	all, adds := burst(3000)
	f.complete(schemas.StatusCopied, nil, all[:2]...)
	recs := f.publishRecs(500, all)
	var size int64
	for _, r := range recs {
		size += int64(len(r.Key) + len(r.Value))
	}
	limit := size / 8
	r := f.start("g", t.TempDir(), func(c *Config) { c.LookAheadBytes = limit; c.BatchPartitions = 50 })
	f.waitWaiting(r, "a", 2)
	waitFor(t, "the queue paused", func() (bool, string) {
		n, _ := r.metric(t, "hivedr_applier_lag_events", map[string]string{"db": "a"})
		return n > 0, fmt.Sprintf("%v queued", n)
	})
	// Whatever arrives after the pause is at most one poll's records.
	for range 5 {
		n, _ := r.metric(t, "hivedr_applier_lag_events", map[string]string{"db": "a"})
		if max := 1500.0; n > max {
			t.Fatalf("%v events queued with look_ahead_bytes %d (1/8 of the topic's %d bytes), want at most %v", n, limit, size, max)
		}
		time.Sleep(100 * time.Millisecond)
	}
	f.complete(schemas.StatusCopied, nil, adds...)
	f.waitMark("a", 3002)
}

// TestApplierHeartbeatsFromCache: heartbeats that find the chain
// unbroken are planned from the worker's copy of its DR database while it
// is younger than heartbeatFresh, not with a get_database each: a quiet
// database costs the DR metastore one read per heartbeatFresh, not one per
// tailer.heartbeat_interval. Every heartbeat is still handled (the
// group's offset reaches the topic's end).
func TestApplierHeartbeatsFromCache(t *testing.T) {
	f := newKFix(t, "a")
	evs := chained(at(createDB(1, "a"), createTable(2, srcTable("a", "t", nil, "x int"))))
	f.publish(evs[0], evs[1])
	r := f.start("g", t.TempDir(), nil)
	f.waitMark("a", 2)
	before, start := f.ms.callsOf("GetDatabase"), time.Now()
	// Each heartbeat once the copy is older than dbFresh, as on a quiet
	// database (the tailer sends one every few seconds).
	const beats = 3
	for i := range beats {
		time.Sleep(dbFresh + 100*time.Millisecond)
		f.publish(&schemas.Heartbeat{Database: "a", ScannedEventID: int64(3 + i), ScannedEventTime: time.Now(), Sent: time.Now(),
			Source: "src", PreviousEventID: id(2)})
		waitFor(t, fmt.Sprintf("heartbeat %d handled", i+1), func() (bool, string) {
			c, e := f.committed("g", "a")
			return c["a"] == e["a"], fmt.Sprintf("committed %v, end %v", c, e)
		})
	}
	r.stop(t)
	// One fresh read per heartbeatFresh at most, whatever the machine's pace.
	allowed := 1 + int(time.Since(start)/heartbeatFresh)
	if n := f.ms.callsOf("GetDatabase") - before; n > allowed {
		t.Errorf("%d heartbeats read the DR database %d times in %s, want at most %d", beats, n, time.Since(start).Round(time.Millisecond), allowed)
	}
	if v, _ := r.metric(t, "hivedr_applier_halted", map[string]string{"db": "a", "reason": string(ReasonChainBroken)}); v != 0 {
		t.Errorf("halted chain_broken")
	}
}

// TestApplierLookAheadManyDatabases: twenty databases, each with a backlog
// whose head waits for its files, hold about applier.look_ahead_bytes
// together (twice it and a fetch at most), not a share of their own each;
// once the files are copied every database applies to its end.
func TestApplierLookAheadManyDatabases(t *testing.T) {
	const (
		dbs     = 20
		events  = 400
		budget  = 128 << 10
		fetch   = 32 << 10 // the most one fetch brings, over all topics
		partMax = 8 << 10  // and of one topic (past it, one whole batch)
	)
	var names []string
	for i := range dbs {
		names = append(names, fmt.Sprintf("d%02d", i))
	}
	f := newKFix(t, names...)
	var backlog int64
	heads := map[string][]*schemas.Event{}
	for _, db := range names {
		evs := partitionBacklog(db, events)
		heads[db] = evs
		f.complete(schemas.StatusCopied, nil, evs[:2]...)
		for _, r := range f.publishRecs(5, evs) {
			backlog += int64(len(r.Key) + len(r.Value))
		}
	}
	// The fair shares add up to the budget, the workers over theirs stop
	// once all hold more than it, the client may hold a fetch in hand and
	// one buffered, and each topic's first fetch comes in whole before its
	// worker can pause it (partMax and past it: kfake counts it loosely).
	bound := float64(2*budget + 2*fetch + dbs*4*partMax)
	if float64(backlog) < 2*bound {
		t.Fatalf("the backlog is %d bytes: too small to tell a bound of %v", backlog, bound)
	}
	r := f.start("g", t.TempDir(), func(c *Config) {
		c.LookAhead = 10000
		c.LookAheadBytes = budget
		c.KafkaOpts = append(c.KafkaOpts, kgo.FetchMaxBytes(fetch), kgo.FetchMaxPartitionBytes(partMax))
	})
	for _, db := range names {
		f.waitWaiting(r, db, 2)
	}
	// Every head waits, so the queues only grow, and they pass the budget
	// before every topic is paused (each backlog is past its fair share).
	// The bound holds at every look (the gauge is set each second).
	waitFor(t, "the look-ahead past the budget", func() (bool, string) {
		v, _ := r.metric(t, "hivedr_applier_look_ahead_bytes", nil)
		if v > bound {
			t.Fatalf("%d databases hold %v bytes ahead with look_ahead_bytes %d, want at most %v (of a backlog of %d)", dbs, v, budget, bound, backlog)
		}
		return v > budget, fmt.Sprintf("%v bytes held", v)
	})
	for range 20 {
		if v, _ := r.metric(t, "hivedr_applier_look_ahead_bytes", nil); v > bound {
			t.Fatalf("%d databases hold %v bytes ahead with look_ahead_bytes %d, want at most %v (of a backlog of %d)", dbs, v, budget, bound, backlog)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, db := range names {
		f.complete(schemas.StatusCopied, nil, heads[db][2:]...)
	}
	for _, db := range names {
		f.waitMark(db, 2+events)
	}
	// (The gauge follows the queues within a second.)
	waitFor(t, "nothing held ahead once every event is applied", func() (bool, string) {
		v, _ := r.metric(t, "hivedr_applier_look_ahead_bytes", nil)
		return v == 0, fmt.Sprintf("%v bytes held", v)
	})
}

// TestLookAheadShare: the workers share applier.look_ahead_bytes: a
// worker over its fair share pauses only while all of them together hold
// more than the budget, and one alone never holds more than the budget.
func TestLookAheadShare(t *testing.T) {
	const budget = 16 << 20
	a := &Applier{cfg: Config{LookAheadBytes: budget}}
	for _, c := range []struct {
		running       int64
		total, queued int64 // all the queues' bytes, this worker's
		over, under   bool
	}{
		{running: 0, total: 0, queued: 0, over: false, under: true},
		{running: 1, total: budget, queued: budget, over: false, under: false},
		{running: 1, total: budget + 1, queued: budget + 1, over: true, under: false},
		{running: 1, total: budget / 2, queued: budget / 2, over: false, under: true},
		// Over its fair share (8 MiB), the others idle: it may use the rest.
		{running: 2, total: 12 << 20, queued: 12 << 20, over: false, under: false},
		{running: 2, total: budget + 1, queued: 12 << 20, over: true, under: false},
		// Under its fair share: never paused by the bytes.
		{running: 2, total: budget + 1, queued: 8 << 20, over: false, under: false},
		{running: 2, total: budget + 1, queued: 4 << 20, over: false, under: true},
		// Two thousand workers: a share of 8 KiB; at 100 KiB a worker
		// pauses once the total passes the budget, not before.
		{running: 2000, total: budget, queued: 100 << 10, over: false, under: false},
		{running: 2000, total: budget + 1, queued: 100 << 10, over: true, under: false},
		{running: 2000, total: budget / 2, queued: 100 << 10, over: false, under: true},
		{running: 2000, total: budget + 1, queued: 4 << 10, over: false, under: true},
	} {
		a.running.Store(c.running)
		a.buffered.Store(c.total)
		if got := a.overShare(c.queued); got != c.over {
			t.Errorf("%d workers, %d bytes in all, %d queued: overShare %v, want %v", c.running, c.total, c.queued, got, c.over)
		}
		if got := a.underShare(c.queued); got != c.under {
			t.Errorf("%d workers, %d bytes in all, %d queued: underShare %v, want %v", c.running, c.total, c.queued, got, c.under)
		}
	}
}

// TestApplierFetchGate: many databases behind on their topics while the
// DR metastore holds every call (workers applying, not waiting). Each
// topic's first fetch comes in whole before its worker can pause it, so
// without the fetch gate the queues together reach a fetch per database
// (dbs*partMax and more); with it they stay within the budget and the
// fetches in flight, however many databases there are, and so do the
// databases whose topics appear after it shut (assigned then). Released,
// every event is applied: nothing held back is lost, no topic is left
// paused.
func TestApplierFetchGate(t *testing.T) {
	const (
		dbs     = 60
		events  = 120
		budget  = 32 << 10
		fetch   = 16 << 10
		partMax = 8 << 10
	)
	var names []string
	for i := range dbs {
		names = append(names, fmt.Sprintf("g%02d", i))
	}
	early, late := names[:dbs/2], names[dbs/2:]
	f := newKFix(t, early...)
	var backlog int64
	publish := func(dbs []string) {
		for _, db := range dbs {
			evs := partitionBacklog(db, events)
			f.complete(schemas.StatusCopied, nil, evs...)
			for _, r := range f.publishRecs(5, evs) {
				backlog += int64(len(r.Key) + len(r.Value))
			}
		}
	}
	publish(early)
	// The budget, a fetch in hand and one buffered (kfake counts a
	// fetch's bytes loosely: twice), and a shut gate's lag of one push.
	bound := int64(2*budget + 4*fetch)
	if firsts := int64(dbs * partMax); firsts < 2*bound || backlog < 2*firsts {
		t.Fatalf("first fetches of %d bytes, a backlog of %d: too small to tell a bound of %d", firsts, backlog, bound)
	}
	hold := make(chan struct{})
	var held atomic.Int64
	f.ms.setHook(func(ctx context.Context, op string) error {
		held.Add(1)
		select {
		case <-hold:
		case <-ctx.Done():
		}
		return nil
	})
	r := f.start("g", t.TempDir(), func(c *Config) {
		c.LookAhead = 10000
		c.LookAheadBytes = budget
		// (New topics found soon: there are no checkpoints to watch.)
		c.KafkaOpts = append(c.KafkaOpts, kgo.FetchMaxBytes(fetch), kgo.FetchMaxPartitionBytes(partMax),
			kgo.MetadataMinAge(100*time.Millisecond), kgo.MetadataMaxAge(200*time.Millisecond))
	})
	// Every DR connection holds a call; the queues grow until the gate
	// shuts. The bound holds at every look.
	var peak int64
	look := func() int64 {
		v := r.a.buffered.Load()
		if v > bound {
			t.Fatalf("%d databases hold %d bytes ahead with look_ahead_bytes %d, want at most %d (first fetches %d, backlog %d)",
				dbs, v, budget, bound, dbs*partMax, backlog)
		}
		peak = max(peak, v)
		return v
	}
	waitFor(t, "the fetch gate shut", func() (bool, string) {
		v := look()
		gated, _ := r.metric(t, "hivedr_applier_fetch_held", nil)
		return gated == 1 && held.Load() > 0, fmt.Sprintf("%d bytes ahead, gauge %v, %d calls held", v, gated, held.Load())
	})
	// The other databases appear, and are assigned, while it is shut.
	var lateTopics []string
	for _, db := range late {
		lateTopics = append(lateTopics, f.topics.Events(db))
	}
	if _, err := f.adm.CreateTopics(context.Background(), 1, 1, nil, lateTopics...); err != nil {
		t.Fatal(err)
	}
	publish(late)
	if firsts := int64(dbs / 2 * partMax); firsts < bound {
		t.Fatalf("the late databases' first fetches, %d bytes, cannot pass the bound %d", firsts, bound)
	}
	waitFor(t, "every database's topic assigned", func() (bool, string) {
		look()
		r.a.mu.Lock()
		n := len(r.a.owned)
		r.a.mu.Unlock()
		return n == dbs, fmt.Sprintf("%d of %d assigned", n, dbs)
	})
	for range 20 {
		look()
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("peak look-ahead %d bytes (budget %d, bound %d; first fetches would be %d)", peak, budget, bound, dbs*partMax)
	close(hold)
	for _, db := range names {
		f.waitMark(db, 2+events)
	}
	waitFor(t, "the gate open and nothing held ahead once every event is applied", func() (bool, string) {
		gated, _ := r.metric(t, "hivedr_applier_fetch_held", nil)
		v := r.a.buffered.Load()
		return gated == 0 && v == 0, fmt.Sprintf("%d bytes held, gauge %v", v, gated)
	})
}

// partitionBacklog is a database's events: its creation, a table's, and
// n partitions added one an event, each with a file.
func partitionBacklog(db string, n int) []*schemas.Event {
	tb := srcTable(db, "t", []string{"ds"}, "x int")
	evs := []*schemas.Event{createDB(1, db), createTable(2, tb)}
	for i := 1; i <= n; i++ {
		p := srcPart(tb, fmt.Sprintf("%04d", i))
		evs = append(evs, addParts(int64(2+i), tb, []schemas.Partition{p}, partFile(p, "f")))
	}
	return at(evs...)
}
