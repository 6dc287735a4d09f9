package failover

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/hivedr/hivedr/internal/config"
)

// TestAgainThroughAnOutage: a step after the marks that fails for an
// outage is run again until it succeeds; one that fails for good
// (ErrNotFenced, errFinal) ends at once; one that keeps failing ends
// after its limit, with the last error.
func TestAgainThroughAnOutage(t *testing.T) {
	conf := &config.Config{}
	conf.Applier.Metastore = "127.0.0.1:1" // nothing listens: the DR client is kept
	r := &run{conf: conf, opts: Options{Poll: time.Millisecond}, log: slog.New(slog.DiscardHandler)}
	outage := errors.New("connect: connection refused")
	for _, c := range []struct {
		name      string
		fails     int   // how many times the step fails first
		err       error // with what
		limit     time.Duration
		wantCalls int
		wantErr   error
	}{
		{"an outage, then back", 3, outage, time.Minute, 4, nil},
		{"not fenced: at once", 1, ErrNotFenced, time.Minute, 1, ErrNotFenced},
		{"changed under the failover: at once", 1, fmt.Errorf("%w: DR database x is gone", errFinal), time.Minute, 1, errFinal},
		{"an outage that lasts", 1 << 30, outage, 20 * time.Millisecond, -1, outage},
	} {
		t.Run(c.name, func(t *testing.T) {
			calls := 0
			err := r.again(context.Background(), "step", c.limit, func() error {
				calls++
				if calls <= c.fails {
					return c.err
				}
				return nil
			})
			if !errors.Is(err, c.wantErr) || (c.wantErr == nil) != (err == nil) {
				t.Fatalf("again: %v, want %v", err, c.wantErr)
			}
			if c.wantCalls >= 0 && calls != c.wantCalls {
				t.Errorf("%d calls, want %d", calls, c.wantCalls)
			}
			if c.wantCalls < 0 && calls < 2 {
				t.Errorf("%d calls: a lasting outage was not tried again", calls)
			}
		})
	}
}
