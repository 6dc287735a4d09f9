package copyd

import (
	"context"
	"io"
	"sync"
	"time"
)

// throttle is a token bucket shared by every copy of an Engine: together
// they move at most rate bytes per second, averaged over any interval
// longer than the bucket's depth (a tenth of a second of traffic).
//
// Waiters reserve before they sleep: each wait takes its bytes from the
// bucket at once, letting the level go negative, and sleeps until the
// level would be back at zero. Concurrent copies therefore queue behind
// one another and never jointly exceed the rate, however many there are.
type throttle struct {
	rate  float64 // bytes per second; 0: unlimited
	burst float64 // bucket depth, bytes
	now   func() time.Time
	sleep func(context.Context, time.Duration) error
	// waited is told every wait's duration (the throttle wait metric).
	waited func(time.Duration)

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

// newThrottle returns a throttle for bytesPerSecond (0: unlimited). The
// bucket starts full.
func newThrottle(bytesPerSecond int64, now func() time.Time, sleep func(context.Context, time.Duration) error, waited func(time.Duration)) *throttle {
	t := &throttle{rate: float64(bytesPerSecond), now: now, sleep: sleep, waited: waited}
	if bytesPerSecond > 0 {
		t.burst = max(t.rate/10, 1)
		t.tokens = t.burst
		t.last = now()
	}
	return t
}

// wait blocks until n more bytes may move, or ctx ends.
func (t *throttle) wait(ctx context.Context, n int) error {
	if t.rate <= 0 || n <= 0 {
		return nil
	}
	t.mu.Lock()
	now := t.now()
	if el := now.Sub(t.last).Seconds(); el > 0 {
		t.tokens = min(t.burst, t.tokens+el*t.rate)
		t.last = now
	}
	t.tokens -= float64(n)
	var d time.Duration
	if t.tokens < 0 {
		d = time.Duration(-t.tokens / t.rate * float64(time.Second))
	}
	t.mu.Unlock()
	if d <= 0 {
		return nil
	}
	err := t.sleep(ctx, d)
	if err != nil {
		// Give back what was not used; the debt of others stays.
		t.mu.Lock()
		t.tokens += float64(n)
		t.mu.Unlock()
		return err
	}
	if t.waited != nil {
		t.waited(d)
	}
	return nil
}

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tm.C:
		return nil
	}
}

// meteredReader reads through the throttle and counts what it read. It
// also stops at once when ctx ends, whatever the store's reader does.
type meteredReader struct {
	ctx   context.Context
	r     io.Reader
	t     *throttle
	n     int64
	count func(int) // bytes moved, as they move (the metric)
}

// maxThrottledRead bounds one read, so that waits stay short and smooth.
const maxThrottledRead = 256 << 10

func (m *meteredReader) Read(p []byte) (int, error) {
	if err := m.ctx.Err(); err != nil {
		return 0, err
	}
	if m.t.rate > 0 && len(p) > maxThrottledRead {
		p = p[:maxThrottledRead]
	}
	n, err := m.r.Read(p)
	if n > 0 {
		m.n += int64(n)
		if m.count != nil {
			m.count(n)
		}
		if werr := m.t.wait(m.ctx, n); werr != nil && err == nil {
			err = werr
		}
	}
	return n, err
}
