// Package retry waits out a dependency that is away for a while: the
// daemons call Until at start for Kafka and the schema registry, which a
// restart of either (or of the whole stack) takes away for seconds or
// minutes, instead of exiting at the first refusal.
package retry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"
)

// Policy bounds the attempts of Until. The zero value is usable.
type Policy struct {
	// Initial is the first wait; it doubles per failure up to Max, half
	// of each wait random so that daemons retrying one fault do not come
	// back in step. Defaults 1s and 15s.
	Initial, Max time.Duration
	// Budget is how long Until keeps trying before it gives up. Default
	// 5 minutes.
	Budget time.Duration
	// Fatal, when set, says which errors are not worth another attempt.
	Fatal func(error) bool
}

// DefaultBudget is how long a daemon waits at start for Kafka or the
// schema registry by default.
const DefaultBudget = 5 * time.Minute

func (p *Policy) ensureDefaults() {
	if p.Initial <= 0 {
		p.Initial = time.Second
	}
	if p.Max <= 0 {
		p.Max = 15 * time.Second
	}
	if p.Budget <= 0 {
		p.Budget = DefaultBudget
	}
}

// Wait returns the wait after failure number n (1, 2, ...).
func (p Policy) Wait(n int) time.Duration {
	p.ensureDefaults()
	d := p.Initial
	for i := 1; i < n && d < p.Max; i++ {
		d *= 2
	}
	d = min(d, p.Max)
	half := d / 2
	return half + time.Duration(rand.Int64N(int64(d-half)+1))
}

// Until calls fn until it returns nil, an error p.Fatal accepts, ctx
// ends, or p.Budget has passed since the first call; it logs every failed
// attempt at warning level, naming what. It returns nil once fn
// succeeded, else fn's last error wrapped with what and the attempts.
func Until(ctx context.Context, log *slog.Logger, what string, p Policy, fn func(context.Context) error) error {
	p.ensureDefaults()
	deadline := time.Now().Add(p.Budget)
	for n := 1; ; n++ {
		err := fn(ctx)
		if err == nil {
			if n > 1 {
				log.Info(what+": succeeded", "attempts", n)
			}
			return nil
		}
		if ctx.Err() != nil {
			return errors.Join(err, ctx.Err())
		}
		if p.Fatal != nil && p.Fatal(err) {
			return err
		}
		wait := p.Wait(n)
		if time.Now().Add(wait).After(deadline) {
			return fmt.Errorf("%s: gave up after %d attempts in %s: %w", what, n, p.Budget, err)
		}
		log.Warn(what+": failed; retrying", "err", err, "attempt", n, "retry_in", wait.Round(time.Millisecond))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
	}
}
