package applier

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	hms "github.com/beltran/gohive/hive_metastore"
)

// poolFake is a DR metastore for the pool's tests: it counts the
// connections dialled and open and the calls in progress at once (the
// most seen), and logs the calls (get_database of a name) in the order
// they were made. A call blocks while block is set, until its connection
// is closed (as a socket read does, whatever its context).
type poolFake struct {
	mu                 sync.Mutex
	dials, open        int
	inCall, maxInCall  int
	log                []string
	failDials          int         // dials left to refuse
	dialTimes          []time.Time // every dial attempt
	block, blockDial   bool
	stuck              chan struct{} // closed when a blocked call or dial starts
	stuckOnce          sync.Once
	closedConnections  int
	failedConnections  int
	failNextCallOnConn bool
}

func newPoolFake() *poolFake { return &poolFake{stuck: make(chan struct{})} }

// fakeConn is one connection of a poolFake.
type fakeConn struct {
	Metastore // (only GetDatabase is called)
	f         *poolFake
	closed    chan struct{}
	once      sync.Once
}

func (f *poolFake) dial(ctx context.Context) (Metastore, func() error, error) {
	f.mu.Lock()
	f.dialTimes = append(f.dialTimes, time.Now())
	if f.failDials > 0 {
		f.failDials--
		f.mu.Unlock()
		return nil, nil, errors.New("connection refused")
	}
	blockDial := f.blockDial
	f.mu.Unlock()
	if blockDial {
		f.stuckOnce.Do(func() { close(f.stuck) })
		select {} // a dial that ignores its context (the pool must not wait for it)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dials++
	f.open++
	c := &fakeConn{f: f, closed: make(chan struct{})}
	return c, func() error {
		c.once.Do(func() {
			close(c.closed)
			f.mu.Lock()
			f.open--
			f.closedConnections++
			f.mu.Unlock()
		})
		return nil
	}, nil
}

func (c *fakeConn) GetDatabase(_ context.Context, name string) (*hms.Database, error) {
	f := c.f
	f.mu.Lock()
	f.inCall++
	f.maxInCall = max(f.maxInCall, f.inCall)
	f.log = append(f.log, name)
	block, fail := f.block, f.failNextCallOnConn
	f.failNextCallOnConn = false
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inCall--
		f.mu.Unlock()
	}()
	if fail {
		return nil, thrift.NewTTransportException(thrift.END_OF_FILE, "the metastore closed the connection")
	}
	if block {
		f.stuckOnce.Do(func() { close(f.stuck) })
		<-c.closed
		return nil, thrift.NewTTransportException(thrift.NOT_OPEN, "connection closed")
	}
	time.Sleep(time.Millisecond) // a call takes a while, so steps overlap
	return &hms.Database{Name: name}, nil
}

func (f *poolFake) snapshot() poolFake {
	f.mu.Lock()
	defer f.mu.Unlock()
	return poolFake{dials: f.dials, open: f.open, maxInCall: f.maxInCall, log: append([]string(nil), f.log...),
		dialTimes: append([]time.Time(nil), f.dialTimes...), closedConnections: f.closedConnections}
}

func testPool(size int, f *poolFake) *pool { return newPool(size, f.dial, testLogger(), NewMetrics()) }

// step is a worker's step as worker.step takes and gives back its
// connection: one call under one checkout.
func step(ctx context.Context, p *pool, name string) error {
	c, err := p.get(ctx)
	if err != nil {
		return err
	}
	_, err = c.ms.GetDatabase(ctx, name)
	if connBroken(err) {
		p.discard(c, ctx.Err() == nil)
	} else {
		p.put(c)
	}
	return err
}

// TestPoolBound runs 40 databases' steps at once on a pool of 4: no more
// than 4 calls run at once, no more than 4 connections are ever open, and
// connections are reused, not dialled per step.
func TestPoolBound(t *testing.T) {
	f := newPoolFake()
	p := testPool(4, f)
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 25 {
				if err := step(context.Background(), p, fmt.Sprintf("db%d", i)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	s := f.snapshot()
	if len(s.log) != 40*25 {
		t.Fatalf("%d calls made, want %d", len(s.log), 40*25)
	}
	if s.maxInCall > 4 || s.maxInCall < 2 {
		t.Errorf("at most %d calls at once on a pool of 4, want 2..4", s.maxInCall)
	}
	if s.dials > 4 {
		t.Errorf("%d connections dialled for %d steps on a pool of 4, want at most 4", s.dials, len(s.log))
	}
	if p.peak > 4 {
		t.Errorf("peak %d connections open, want at most 4", p.peak)
	}
	p.close()
	if s := f.snapshot(); s.open != 0 {
		t.Errorf("%d connections open after close, want 0", s.open)
	}
}

// TestPoolFair: three hot databases whose steps follow each other back
// to back, a cold database that wants one step, and two more that begin
// after it, on a pool of one connection: the cold step runs once the hot
// databases that were waiting before it had theirs, before anyone who
// came after it, and before the hot databases' next steps.
func TestPoolFair(t *testing.T) {
	f := newPoolFake()
	p := testPool(1, f)
	ctx := context.Background()
	held, err := p.get(ctx) // a step in progress
	if err != nil {
		t.Fatal(err)
	}
	waiting := func(n int) {
		waitFor(t, fmt.Sprintf("%d steps waiting", n), func() (bool, string) {
			p.mu.Lock()
			defer p.mu.Unlock()
			return len(p.waiters) == n, fmt.Sprintf("%d waiting", len(p.waiters))
		})
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	loop := func(name string) {
		defer wg.Done()
		for {
			if err := step(ctx, p, name); err != nil {
				t.Error(err)
				return
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	}
	for i := range 3 {
		wg.Add(1)
		go loop(fmt.Sprintf("hot%d", i))
		waiting(i + 1)
	}
	cold := make(chan error, 1)
	go func() { cold <- step(ctx, p, "cold") }()
	waiting(4)
	for i := range 2 {
		wg.Add(1)
		go loop(fmt.Sprintf("late%d", i))
		waiting(5 + i)
	}
	p.put(held)
	if err := <-cold; err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	s := f.snapshot()
	want := []string{"hot0", "hot1", "hot2", "cold", "late0", "late1", "hot0", "hot1", "hot2"}
	if len(s.log) < len(want) || fmt.Sprint(s.log[:len(want)]) != fmt.Sprint(want) {
		t.Errorf("steps ran in the order %v, want first come, first served: %v", s.log[:min(len(s.log), 12)], want)
	}
}

// TestPoolReplacesBroken: a connection whose call failed in transit is
// closed, and the next step dials a new one, after a backoff; refused
// dials back off exponentially.
func TestPoolReplacesBroken(t *testing.T) {
	f := newPoolFake()
	p := testPool(2, f)
	ctx := context.Background()
	if err := step(ctx, p, "a"); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.failNextCallOnConn = true
	f.mu.Unlock()
	if err := step(ctx, p, "a"); !connBroken(err) {
		t.Fatalf("step on a connection the metastore closed: %v, want a transport error", err)
	}
	if s := f.snapshot(); s.closedConnections != 1 || s.open != 0 {
		t.Fatalf("after a broken connection: %d closed, %d open; want 1 closed, 0 open", s.closedConnections, s.open)
	}
	broke := time.Now()
	if err := step(ctx, p, "a"); err != nil {
		t.Fatal(err)
	}
	s := f.snapshot()
	if s.dials != 2 || s.open != 1 {
		t.Fatalf("after the broken connection: %d dialled, %d open; want 2 and 1", s.dials, s.open)
	}
	if d := s.dialTimes[1].Sub(broke); d < poolBackoff/2 {
		t.Errorf("dialled again %s after the connection broke, want a backoff of at least %s", d, poolBackoff/2)
	}

	// Three refused dials: each step fails, and the dials are spaced
	// by a growing backoff; the fourth dial succeeds and resets it.
	f2 := newPoolFake()
	f2.failDials = 3
	p2 := testPool(2, f2)
	for i := range 4 {
		err := step(ctx, p2, "b")
		if (err != nil) != (i < 3) {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	s = f2.snapshot()
	if len(s.dialTimes) != 4 {
		t.Fatalf("%d dial attempts, want 4", len(s.dialTimes))
	}
	for i := 1; i < 4; i++ {
		least := (poolBackoff << (i - 1)) / 2
		if gap := s.dialTimes[i].Sub(s.dialTimes[i-1]); gap < least {
			t.Errorf("dial %d came %s after a refused one, want at least %s", i, gap, least)
		}
	}
	p2.mu.Lock()
	failures := p2.failures
	p2.mu.Unlock()
	if failures != 0 {
		t.Errorf("%d failures counted after a healthy connection, want 0 (the backoff reset)", failures)
	}
}

// TestPoolCancel: a context ending ends a wait for a connection, a dial
// that does not return, and a call in progress (by closing its
// connection); nothing is leaked, and the pool serves the next step.
func TestPoolCancel(t *testing.T) {
	t.Run("waiting", func(t *testing.T) {
		f := newPoolFake()
		p := testPool(1, f)
		held, err := p.get(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- step(ctx, p, "waiter") }()
		waitFor(t, "the step waiting", func() (bool, string) {
			p.mu.Lock()
			defer p.mu.Unlock()
			return len(p.waiters) == 1, fmt.Sprintf("%d waiting", len(p.waiters))
		})
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("a wait cancelled: %v, want context.Canceled", err)
		}
		p.put(held)
		if err := step(context.Background(), p, "next"); err != nil {
			t.Fatal(err)
		}
		if s := f.snapshot(); s.dials != 1 || s.log[0] != "next" {
			t.Errorf("%d dials, calls %v; want 1 dial and the next step's call only", s.dials, s.log)
		}
	})
	t.Run("in a call", func(t *testing.T) {
		f := newPoolFake()
		f.block = true
		p := testPool(1, f)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- step(ctx, p, "stuck") }()
		<-f.stuck
		cancel()
		select {
		case err := <-done:
			if !connBroken(err) {
				t.Fatalf("a call cut off: %v, want a transport error", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a call blocked on its connection did not end when its context did")
		}
		f.mu.Lock()
		f.block = false
		f.mu.Unlock()
		if err := step(context.Background(), p, "next"); err != nil {
			t.Fatal(err)
		}
		if s := f.snapshot(); s.dials != 2 || s.open != 1 {
			t.Errorf("%d dialled, %d open; want the cut connection replaced (2 dialled, 1 open)", s.dials, s.open)
		}
		p.mu.Lock()
		failures := p.failures
		p.mu.Unlock()
		if failures != 0 {
			t.Errorf("a connection cut by its context counted %d failures, want 0", failures)
		}
	})
	t.Run("in a dial", func(t *testing.T) {
		f := newPoolFake()
		f.blockDial = true
		p := testPool(1, f)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- step(ctx, p, "stuck") }()
		<-f.stuck
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("a dial cut off: %v, want context.Canceled", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a dial that does not return held its caller past its context")
		}
		p.mu.Lock()
		open := p.open
		p.mu.Unlock()
		if open != 0 {
			t.Errorf("%d slots taken after the dial was given up, want 0", open)
		}
	})
}

// stuckHMS is a DR metastore that accepts connections and never answers
// get_database: the call returns only when its connection is closed, as a
// Thrift call on a socket does whatever its context.
type stuckHMS struct {
	*fakeHMS
	closed  chan struct{}
	entered chan struct{}
	once    *sync.Once
}

func (s *stuckHMS) GetDatabase(context.Context, string) (*hms.Database, error) {
	s.once.Do(func() { close(s.entered) })
	<-s.closed
	return nil, thrift.NewTTransportException(thrift.NOT_OPEN, "connection closed")
}

// TestApplierStopsWhateverItWaitsOn: an applier whose database workers
// wait on a DR metastore that does not answer (in a call, in a dial,
// backing off from a metastore that refuses, or waiting for the pool's
// one connection) stops within 10s of its context ending, as on SIGTERM.
func TestApplierStopsWhateverItWaitsOn(t *testing.T) {
	for _, tc := range []struct {
		name string
		// dial returns the metastore's dial and a channel closed once a
		// worker waits on it.
		dial func(f *kfix) (func(context.Context) (Metastore, func() error, error), <-chan struct{})
	}{
		{"in a call", func(f *kfix) (func(context.Context) (Metastore, func() error, error), <-chan struct{}) {
			entered, once := make(chan struct{}), &sync.Once{}
			return func(context.Context) (Metastore, func() error, error) {
				s := &stuckHMS{fakeHMS: f.ms, closed: make(chan struct{}), entered: entered, once: once}
				var closeOnce sync.Once
				return s, func() error { closeOnce.Do(func() { close(s.closed) }); return nil }, nil
			}, entered
		}},
		{"in a dial", func(*kfix) (func(context.Context) (Metastore, func() error, error), <-chan struct{}) {
			entered, once := make(chan struct{}), &sync.Once{}
			return func(context.Context) (Metastore, func() error, error) {
				once.Do(func() { close(entered) })
				select {} // ignores its context
			}, entered
		}},
		{"backing off", func(*kfix) (func(context.Context) (Metastore, func() error, error), <-chan struct{}) {
			entered := make(chan struct{})
			var dials atomic.Int64
			return func(context.Context) (Metastore, func() error, error) {
				if dials.Add(1) == 4 {
					close(entered) // the third backoff is over a second
				}
				return nil, nil, errors.New("connection refused")
			}, entered
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newKFix(t, "a", "b")
			f.publish(createDB(1, "a"))
			f.publish(createDB(2, "b"))
			dial, entered := tc.dial(f)
			r := f.start("g", t.TempDir(), func(c *Config) {
				c.Dial = dial
				c.DRConnections = 1 // the other database waits for the pool
			})
			select {
			case <-entered:
			case <-time.After(30 * time.Second):
				t.Fatal("no worker reached the DR metastore within 30s")
			}
			stopped := time.Now()
			r.cancel()
			select {
			case err := <-r.done:
				if err != nil {
					t.Errorf("applier: %v", err)
				}
				t.Logf("stopped in %s", time.Since(stopped))
			case <-time.After(10 * time.Second):
				t.Fatal("the applier did not stop within 10s of its context ending")
			}
			r.once.Do(func() { r.store.Close() })
		})
	}
}
