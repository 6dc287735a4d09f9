package retry

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestUntil(t *testing.T) {
	errAway := errors.New("connection refused")
	errBad := errors.New("bad config")
	fast := Policy{Initial: time.Millisecond, Max: 2 * time.Millisecond, Budget: time.Second}
	for _, c := range []struct {
		name      string
		fails     int   // attempts that fail before one succeeds (-1: all)
		failWith  error // the error they fail with
		policy    Policy
		wantCalls int    // -1: several (the waits are random)
		wantErr   string // "" for nil
		wantLog   string
	}{
		{"succeeds at once", 0, errAway, fast, 1, "", ""},
		{"succeeds after three refusals", 3, errAway, fast, 4, "", "connect: failed; retrying"},
		{"fatal error: one attempt", -1, errBad, Policy{Initial: time.Millisecond, Budget: time.Second, Fatal: func(err error) bool { return errors.Is(err, errBad) }}, 1, "bad config", ""},
		{"gives up after the budget", -1, errAway, Policy{Initial: 20 * time.Millisecond, Max: 20 * time.Millisecond, Budget: 50 * time.Millisecond}, -1, "connect: gave up after", "attempt=2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			log := slog.New(slog.NewTextHandler(&buf, nil))
			calls := 0
			err := Until(context.Background(), log, "connect", c.policy, func(context.Context) error {
				calls++
				if c.fails < 0 || calls <= c.fails {
					return c.failWith
				}
				return nil
			})
			if (err == nil) != (c.wantErr == "") || (err != nil && !strings.Contains(err.Error(), c.wantErr)) {
				t.Fatalf("err = %v, want %q", err, c.wantErr)
			}
			if calls != c.wantCalls && (c.wantCalls >= 0 || calls < 3) {
				t.Errorf("%d calls, want %d", calls, c.wantCalls)
			}
			if !strings.Contains(buf.String(), c.wantLog) {
				t.Errorf("log %q lacks %q", buf.String(), c.wantLog)
			}
		})
	}
}

func TestUntilStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	err := Until(ctx, slog.New(slog.DiscardHandler), "connect", Policy{Initial: time.Hour}, func(context.Context) error {
		calls++
		cancel()
		return errors.New("refused")
	})
	if !errors.Is(err, context.Canceled) || calls != 1 {
		t.Fatalf("err %v after %d calls: want context.Canceled after 1", err, calls)
	}
}

func TestWaitGrowsToMax(t *testing.T) {
	p := Policy{Initial: 100 * time.Millisecond, Max: 400 * time.Millisecond}
	for n, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 3: 400 * time.Millisecond, 9: 400 * time.Millisecond} {
		if w := p.Wait(n); w < want/2 || w > want {
			t.Errorf("Wait(%d) = %s, want in [%s, %s]", n, w, want/2, want)
		}
	}
}
