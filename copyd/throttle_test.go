package copyd

import (
	"bytes"
	"context"
	"io"
	"sync"
	"testing"
	"time"
)

// TestThrottleFakeClock checks the rate and the burst on a fake clock.
func TestThrottleFakeClock(t *testing.T) {
	clock := &fakeClock{t: time.Unix(0, 0)}
	var waited time.Duration
	const rate = 1 << 20
	th := newThrottle(rate, clock.Now, clock.Sleep, func(d time.Duration) { waited += d })
	ctx := context.Background()
	// The first tenth of a second of traffic passes at once.
	if err := th.wait(ctx, rate/10); err != nil || clock.slept != 0 {
		t.Fatalf("burst waited %v (%v)", clock.slept, err)
	}
	// Then 10 MiB in 32 KiB reads take 10 s, within 10%.
	for range 10 * 32 {
		if err := th.wait(ctx, 32<<10); err != nil {
			t.Fatal(err)
		}
	}
	if got := clock.slept.Seconds(); got < 9 || got > 11 {
		t.Fatalf("10 MiB at 1 MiB/s took %.2f s", got)
	}
	if waited != clock.slept {
		t.Errorf("wait metric %v, slept %v", waited, clock.slept)
	}
	// Idle time refills the bucket only up to its depth.
	clock.Sleep(ctx, time.Hour)
	before := clock.slept
	th.wait(ctx, rate/10)
	th.wait(ctx, rate/10)
	if d := clock.slept - before; d < 90*time.Millisecond || d > 110*time.Millisecond {
		t.Errorf("after idling, two bursts waited %v; want 100ms", d)
	}
	// Unlimited never waits.
	u := newThrottle(0, clock.Now, func(context.Context, time.Duration) error { t.Fatal("slept"); return nil }, nil)
	if err := u.wait(ctx, 1<<30); err != nil {
		t.Fatal(err)
	}
}

// TestThrottleShared runs four concurrent readers through one throttle on
// the real clock: together they hold the rate within 10%.
func TestThrottleShared(t *testing.T) {
	const rate = 4 << 20
	const each = 512 << 10 // 2 MiB in all: about 0.5 s
	th := newThrottle(rate, time.Now, sleepCtx, nil)
	start := time.Now()
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &meteredReader{ctx: context.Background(), r: bytes.NewReader(make([]byte, each)), t: th}
			if _, err := io.Copy(io.Discard, r); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	got := float64(4*each) / secs
	t.Logf("4 readers: %d bytes in %.3f s = %.2f MiB/s (limit %d MiB/s)", 4*each, secs, got/(1<<20), rate>>20)
	// Bytes of the first burst pass at once: the expected time is
	// (total - burst) / rate.
	want := float64(4*each-rate/10) / rate
	if secs < want*0.9 || secs > want*1.1+0.05 {
		t.Fatalf("took %.3f s, want %.3f s within 10%%", secs, want)
	}
}

func TestThrottleCancel(t *testing.T) {
	th := newThrottle(1, time.Now, sleepCtx, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := th.wait(ctx, 1000); err == nil {
		t.Fatal("wait outlived its context")
	}
	if time.Since(start) > time.Second {
		t.Fatal("cancel was not prompt")
	}
	r := &meteredReader{ctx: ctx, r: bytes.NewReader([]byte("abc")), t: th}
	if _, err := r.Read(make([]byte, 3)); err == nil {
		t.Fatal("read after the context ended")
	}
}
