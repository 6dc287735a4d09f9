package copyd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/schemas"
)

// jsonCodec is a Codec for tests: a type letter, then JSON.
type jsonCodec struct{}

func (jsonCodec) Encode(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	switch v.(type) {
	case *schemas.CopyTask:
		return append([]byte("T"), b...), err
	case *schemas.CopyCompletion:
		return append([]byte("C"), b...), err
	}
	return nil, fmt.Errorf("cannot encode a %T", v)
}

func (jsonCodec) Decode(_ context.Context, b []byte) (any, error) {
	if len(b) == 0 {
		return nil, errors.New("empty record")
	}
	var v any
	switch b[0] {
	case 'T':
		v = &schemas.CopyTask{}
	case 'C':
		v = &schemas.CopyCompletion{}
	default:
		return nil, fmt.Errorf("unknown record type %q", b[0])
	}
	return v, json.Unmarshal(b[1:], v)
}

// fakeCopier copies nothing: each task takes the time delay says, or
// waits for its gate. It checks that no two copies of one target overlap
// and records what it was asked.
type fakeCopier struct {
	delay func(schemas.CopyTask) time.Duration

	mu        sync.Mutex
	gates     map[string]chan struct{} // task ID -> closed when it may finish
	active    map[string]string        // target -> task copying to it
	overlaps  []string
	calls     map[string]int
	cancelled map[string]int
	order     map[string][]schemas.CopyTask // target -> tasks in the order they started
}

func newFakeCopier() *fakeCopier {
	return &fakeCopier{gates: map[string]chan struct{}{}, active: map[string]string{},
		calls: map[string]int{}, cancelled: map[string]int{}, order: map[string][]schemas.CopyTask{}}
}

func (f *fakeCopier) gate(taskID string) chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := make(chan struct{})
	f.gates[taskID] = g
	return g
}

func (f *fakeCopier) Copy(ctx context.Context, task schemas.CopyTask) schemas.CopyCompletion {
	f.mu.Lock()
	f.calls[task.TaskID]++
	if other, ok := f.active[task.TargetURI]; ok {
		f.overlaps = append(f.overlaps, other+" and "+task.TaskID)
	}
	f.active[task.TargetURI] = task.TaskID
	f.order[task.TargetURI] = append(f.order[task.TargetURI], task)
	gate := f.gates[task.TaskID]
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.active, task.TargetURI)
		f.mu.Unlock()
	}()
	c := schemas.CopyCompletion{TaskID: task.TaskID, EventID: task.EventID, SourceURI: task.SourceURI,
		TargetURI: task.TargetURI, Started: time.Now()}
	var wait <-chan time.Time
	if gate == nil {
		d := time.Duration(0)
		if f.delay != nil {
			d = f.delay(task)
		}
		wait = time.After(d)
	}
	select {
	case <-gate:
	case <-wait:
	case <-ctx.Done():
		f.mu.Lock()
		f.cancelled[task.TaskID]++
		f.mu.Unlock()
		c.Status, c.Error, c.Finished = schemas.StatusFailed, "interrupted: "+ctx.Err().Error(), time.Now()
		return c
	}
	c.Status, c.Length, c.Finished = schemas.StatusCopied, 1, time.Now()
	return c
}

func (f *fakeCopier) snapshot() (calls, cancelled map[string]int, overlaps []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	calls, cancelled = map[string]int{}, map[string]int{}
	for k, v := range f.calls {
		calls[k] = v
	}
	for k, v := range f.cancelled {
		cancelled[k] = v
	}
	return calls, cancelled, append([]string(nil), f.overlaps...)
}

// kfixture is a fake Kafka cluster with a manifests topic.
type kfixture struct {
	t       *testing.T
	cluster *kfake.Cluster
	topics  kafka.Topics
	addrs   []string
	cl      *kgo.Client
	adm     *kadm.Client
	tasks   []schemas.CopyTask
	parts   map[string]int32 // task ID -> partition
}

func newKFixture(t *testing.T, partitions int32) *kfixture {
	t.Helper()
	return newKFixtureFor(t, partitions, kafka.Topics{Prefix: "t"})
}

// newKFixtureFor is newKFixture with the topics of a site.
func newKFixtureFor(t *testing.T, partitions int32, topics kafka.Topics) *kfixture {
	t.Helper()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topics.Manifests()), kfake.SeedTopics(3, topics.Completions()),
		kfake.GroupMinSessionTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &kfixture{t: t, cluster: cluster, topics: topics, addrs: cluster.ListenAddrs(), cl: cl, adm: kadm.NewClient(cl), parts: map[string]int32{}}
}

// publish adds a task for target to partition p (event ID ev).
func (k *kfixture) publish(p int32, ev int64, target string) schemas.CopyTask {
	k.t.Helper()
	return k.publishTask(p, schemas.CopyTask{TaskID: fmt.Sprintf("p%d-%d", p, len(k.tasks)), EventID: ev,
		SourceURI: "/src" + target, TargetURI: target})
}

// publishTask adds task to partition p.
func (k *kfixture) publishTask(p int32, task schemas.CopyTask) schemas.CopyTask {
	k.t.Helper()
	v, _ := jsonCodec{}.Encode(&task)
	rec := &kgo.Record{Topic: k.topics.Manifests(), Partition: p, Key: []byte(task.TaskID), Value: v}
	if err := k.cl.ProduceSync(context.Background(), rec).FirstErr(); err != nil {
		k.t.Fatal(err)
	}
	k.tasks = append(k.tasks, task)
	k.parts[task.TaskID] = p
	return task
}

// completions reads every committed completion, by task ID.
func (k *kfixture) completions() map[string][]*schemas.CopyCompletion {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out := map[string][]*schemas.CopyCompletion{}
	topic := k.topics.Completions()
	ends, err := k.adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		return out
	}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil || o.Offset == 0 {
			return
		}
		recs, err := kafka.ReadCommitted(ctx, []kgo.Opt{kgo.SeedBrokers(k.addrs...)}, topic, o.Partition, 0, o.Offset)
		if err != nil {
			k.t.Fatal(err)
		}
		for _, r := range recs {
			v, err := jsonCodec{}.Decode(ctx, r.Value)
			if err != nil {
				k.t.Fatal(err)
			}
			c := v.(*schemas.CopyCompletion)
			out[c.TaskID] = append(out[c.TaskID], c)
		}
	})
	return out
}

// waitFor polls cond for up to d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitAllCompleted waits until every task has a completion and returns them.
func (k *kfixture) waitAllCompleted(d time.Duration) map[string][]*schemas.CopyCompletion {
	k.t.Helper()
	var got map[string][]*schemas.CopyCompletion
	waitFor(k.t, d, fmt.Sprintf("%d completions", len(k.tasks)), func() bool {
		got = k.completions()
		for _, task := range k.tasks {
			if len(got[task.TaskID]) == 0 {
				return false
			}
		}
		return true
	})
	return got
}

// checkExactlyOnce fails unless every task has one completion, COPIED.
func (k *kfixture) checkExactlyOnce(got map[string][]*schemas.CopyCompletion) {
	k.t.Helper()
	for _, task := range k.tasks {
		cs := got[task.TaskID]
		if len(cs) != 1 {
			k.t.Errorf("task %s has %d completions", task.TaskID, len(cs))
			continue
		}
		if cs[0].Status != schemas.StatusCopied {
			k.t.Errorf("task %s: %s %s", task.TaskID, cs[0].Status, cs[0].Error)
		}
	}
	if len(got) != len(k.tasks) {
		k.t.Errorf("%d tasks have completions, want %d", len(got), len(k.tasks))
	}
}

// groupOffsets returns the group's committed offsets of the manifests topic.
func (k *kfixture) groupOffsets(group string) map[int32]int64 {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := k.adm.FetchOffsets(ctx, group)
	if err != nil {
		k.t.Fatal(err)
	}
	out := map[int32]int64{}
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Topic == k.topics.Manifests() && o.Err == nil {
			out[o.Partition] = o.At
		}
	})
	return out
}

// runningDaemon is a Daemon running on its own goroutine.
type runningDaemon struct {
	d    *Daemon
	stop func() error
}

func (k *kfixture) start(name string, cp Copier, tune func(*DaemonConfig)) *runningDaemon {
	k.t.Helper()
	cfg := DaemonConfig{
		Brokers: k.addrs, Topics: k.topics, Group: "copyd", TransactionalID: "copyd-" + name,
		Workers: 4, MaxBatch: 16, CommitInterval: 20 * time.Millisecond, CompletionPartitions: 3,
		Copier: cp, Codec: jsonCodec{},
		Logger:    slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: testLogLevel})).With("daemon", name),
		KafkaOpts: []kgo.Opt{kgo.HeartbeatInterval(100 * time.Millisecond), kgo.SessionTimeout(3 * time.Second)},
	}
	if tune != nil {
		tune(&cfg)
	}
	d, err := NewDaemon(cfg)
	if err != nil {
		k.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var once sync.Once
	var err2 error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case err2 = <-done:
			case <-time.After(30 * time.Second):
				err2 = errors.New("daemon did not stop within 30s")
			}
		})
		return err2
	}
	k.t.Cleanup(func() { stop() })
	return &runningDaemon{d: d, stop: stop}
}

// peak is the most tasks one partition held; call it after stop.
func (r *runningDaemon) peak() int {
	r.d.win.mu.Lock()
	defer r.d.win.mu.Unlock()
	return r.d.win.peak
}

// Every task gets exactly one completion, across a clean stop and a
// restart, and the group's offsets end at the end of every partition.
func TestDaemonExactlyOnce(t *testing.T) {
	k := newKFixture(t, 3)
	for i := range 150 {
		k.publish(int32(i%3), int64(i), fmt.Sprintf("/t/f%d", i))
	}
	cp := newFakeCopier()
	cp.delay = func(schemas.CopyTask) time.Duration { return time.Duration(rand.IntN(8)) * time.Millisecond }
	d := k.start("a", cp, nil)
	waitFor(t, 30*time.Second, "some completions", func() bool { return len(k.completions()) >= 40 })
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
	if p := d.peak(); p > 16 {
		t.Errorf("a partition held %d tasks; the bound is 16", p)
	}
	d = k.start("a", cp, nil)
	got := k.waitAllCompleted(30 * time.Second)
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
	k.checkExactlyOnce(got)
	_, _, overlaps := cp.snapshot()
	if len(overlaps) > 0 {
		t.Errorf("copies of one target overlapped: %v", overlaps)
	}
	offs := k.groupOffsets("copyd")
	for p := range int32(3) {
		if offs[p] != 50 {
			t.Errorf("partition %d committed at %d, want 50", p, offs[p])
		}
	}
}

// A slow task holds back its own partition's commits only: completions of
// the other partitions commit meanwhile; its partition's later tasks run,
// finish, wait in memory, and commit together once it is done.
func TestDaemonSlowTaskHoldsOnlyItsPartition(t *testing.T) {
	k := newKFixture(t, 3)
	cp := newFakeCopier()
	slow := k.publish(0, 1, "/t/slow")
	release := cp.gate(slow.TaskID)
	for i := range 4 {
		k.publish(0, int64(2+i), fmt.Sprintf("/t/a%d", i))
		k.publish(1, int64(2+i), fmt.Sprintf("/t/b%d", i))
		k.publish(2, int64(2+i), fmt.Sprintf("/t/c%d", i))
	}
	d := k.start("a", cp, nil)
	waitFor(t, 30*time.Second, "partitions 1 and 2 to commit", func() bool {
		got := k.completions()
		n := 0
		for id := range got {
			if k.parts[id] != 0 {
				n++
			}
		}
		return n == 8
	})
	waitFor(t, 10*time.Second, "partition 0's later tasks to run", func() bool {
		calls, _, _ := cp.snapshot()
		n := 0
		for id, c := range calls {
			if k.parts[id] == 0 {
				n += c
			}
		}
		return n == 5
	})
	time.Sleep(200 * time.Millisecond) // a few commit intervals
	for id := range k.completions() {
		if k.parts[id] == 0 {
			t.Errorf("task %s of partition 0 committed while the slow task before it runs", id)
		}
	}
	if off, ok := k.groupOffsets("copyd")[0]; ok && off > 0 {
		t.Errorf("partition 0 committed at %d past its unfinished first task", off)
	}
	close(release)
	got := k.waitAllCompleted(30 * time.Second)
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
	k.checkExactlyOnce(got)
	if off := k.groupOffsets("copyd")[0]; off != 5 {
		t.Errorf("partition 0 committed at %d, want 5", off)
	}
}

// A partition holds at most MaxBatch tasks: behind a slow task it stops
// taking more until that one finishes, while the other partitions go on.
func TestDaemonWindowBound(t *testing.T) {
	k := newKFixture(t, 2)
	cp := newFakeCopier()
	slow := k.publish(0, 1, "/t/slow")
	release := cp.gate(slow.TaskID)
	for i := range 30 {
		k.publish(0, int64(2+i), fmt.Sprintf("/t/a%d", i))
	}
	d := k.start("a", cp, func(c *DaemonConfig) { c.Workers, c.MaxBatch = 2, 6 })
	waitFor(t, 30*time.Second, "partition 0's window to fill", func() bool {
		calls, _, _ := cp.snapshot()
		return len(calls) == 6
	})
	// Partition 0 is full; partition 1 must not starve behind it.
	for i := range 30 {
		k.publish(1, int64(100+i), fmt.Sprintf("/t/b%d", i))
	}
	waitFor(t, 30*time.Second, "partition 1 to commit", func() bool {
		n := 0
		for id := range k.completions() {
			if k.parts[id] == 1 {
				n++
			}
		}
		return n == 30
	})
	calls, _, _ := cp.snapshot()
	n := 0
	for id := range calls {
		if k.parts[id] == 0 {
			n++
		}
	}
	if n != 6 {
		t.Errorf("%d tasks of partition 0 started behind the slow one; its window bound is 6", n)
	}
	close(release)
	got := k.waitAllCompleted(30 * time.Second)
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
	k.checkExactlyOnce(got)
	if p := d.peak(); p > 6 {
		t.Errorf("a partition held %d tasks; the bound is 6", p)
	}
}

// Tasks with the same target never copy at once, and in one partition they
// copy in offset order.
func TestDaemonSameTargetSerialised(t *testing.T) {
	k := newKFixture(t, 3)
	cp := newFakeCopier()
	cp.delay = func(schemas.CopyTask) time.Duration { return time.Duration(1+rand.IntN(5)) * time.Millisecond }
	for i := range 90 {
		k.publish(int32(i%3), int64(i), fmt.Sprintf("/t/000000_%d", i%4))
	}
	d := k.start("a", cp, func(c *DaemonConfig) { c.Workers = 8 })
	got := k.waitAllCompleted(30 * time.Second)
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
	k.checkExactlyOnce(got)
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if len(cp.overlaps) > 0 {
		t.Errorf("copies of one target overlapped: %v", cp.overlaps)
	}
	for target, tasks := range cp.order {
		last := map[int32]int64{}
		for _, task := range tasks {
			p := k.parts[task.TaskID]
			if prev, ok := last[p]; ok && task.EventID < prev {
				t.Errorf("%s: event %d copied after event %d of the same partition", target, task.EventID, prev)
			}
			last[p] = task.EventID
		}
	}
}

// When a second daemon joins, the first one's revoked partitions have
// their copies cancelled and their completions dropped; the new owner
// redoes them, and every task still gets exactly one completion.
func TestDaemonRevokeCancelsCopies(t *testing.T) {
	k := newKFixture(t, 4)
	cp := newFakeCopier()
	var gates []chan struct{}
	var first []string
	for i := range 40 {
		task := k.publish(int32(i%4), int64(i), fmt.Sprintf("/t/f%d", i))
		if i < 4 {
			// The first task of each partition blocks.
			gates = append(gates, cp.gate(task.TaskID))
			first = append(first, task.TaskID)
		}
	}
	a := k.start("a", cp, nil)
	waitFor(t, 30*time.Second, "the first daemon to copy in every partition", func() bool {
		calls, _, _ := cp.snapshot()
		for _, id := range first {
			if calls[id] == 0 {
				return false
			}
		}
		return true
	})
	b := k.start("b", cp, nil)
	waitFor(t, 30*time.Second, "a revoke to cancel copies", func() bool {
		_, cancelled, _ := cp.snapshot()
		return len(cancelled) > 0
	})
	for _, g := range gates {
		close(g)
	}
	got := k.waitAllCompleted(30 * time.Second)
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	if err := b.stop(); err != nil {
		t.Fatal(err)
	}
	k.checkExactlyOnce(got)
	calls, cancelled, overlaps := cp.snapshot()
	t.Logf("%d copies cancelled by the rebalance; %d copies in all for %d tasks", len(cancelled), sumCalls(calls), len(k.tasks))
	if len(overlaps) > 0 {
		t.Logf("overlapping copies of one target across the two daemons (allowed): %v", overlaps)
	}
}

func sumCalls(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

var testLogLevel = slog.LevelWarn

// TestDaemonRidesOutFailedEndTxn: the broker goes away as copyd ends its
// transactions (the connection drops on EndTxn, over and over, as in a
// broker restart), so End fails with the outcome unknown. copyd replaces
// its Kafka session instead of exiting (the soak found it exiting), and
// every task still gets exactly one completion.
func TestDaemonRidesOutFailedEndTxn(t *testing.T) {
	k := newKFixture(t, 3)
	for i := range 60 {
		k.publish(int32(i%3), int64(i), fmt.Sprintf("/t/f%d", i))
	}
	const drops = 6
	var dropped atomic.Int32
	k.cluster.ControlKey(int16(kmsg.EndTxn), func(kmsg.Request) (kmsg.Response, error, bool) {
		if dropped.Add(1) > drops {
			return nil, nil, false
		}
		k.cluster.KeepControl()
		return nil, errors.New("broker restarting"), true
	})
	cp := newFakeCopier()
	d := k.start("a", cp, func(c *DaemonConfig) {
		// Few retries, so that the dropped connections reach End.
		c.KafkaOpts = append(c.KafkaOpts, kgo.RequestRetries(1), kgo.RetryBackoffFn(func(int) time.Duration { return 10 * time.Millisecond }))
	})
	got := k.waitAllCompleted(60 * time.Second)
	if err := d.stop(); err != nil {
		t.Fatalf("copyd stopped with %v", err)
	}
	k.checkExactlyOnce(got)
	if n := dropped.Load(); n < drops {
		t.Fatalf("only %d EndTxn requests were made; want the %d dropped ones and more", n, drops)
	}
	if n := testutil.ToFloat64(d.d.m.sessions); n < 1 {
		t.Errorf("%v session restarts counted; want at least 1 (End failed)", n)
	}
}

// TestDaemonLoopGauge: the main loop marks
// hivedr_copyd_loop_timestamp_seconds on every round, idle ones too (no
// tasks), so /healthz sees it alive.
func TestDaemonLoopGauge(t *testing.T) {
	k := newKFixture(t, 1)
	d := k.start("a", newFakeCopier(), nil)
	loop := d.d.m.loop.Collector()
	waitFor(t, 10*time.Second, "a first round", func() bool { return testutil.ToFloat64(loop) > 0 })
	first := testutil.ToFloat64(loop)
	if now := float64(time.Now().UnixNano()) / 1e9; now-first > 60 || first > now {
		t.Errorf("loop gauge %f, want about now (%f)", first, now)
	}
	waitFor(t, 10*time.Second, "the idle loop to go round again", func() bool { return testutil.ToFloat64(loop) > first })
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
}
