package config

import (
	"strings"
	"testing"
	"time"
)

// TestPruneDelay: applier.prune_delay defaults to 0 (at once) and takes
// 0 up to MaxPruneDelay; a negative or longer one is refused, naming the
// key.
func TestPruneDelay(t *testing.T) {
	a := defaultApplier()
	a.Instance, a.Metastore = "i", "dr-hms:9083"
	if a.PruneDelay.Duration != DefaultPruneDelay {
		t.Errorf("default %s, want %s", a.PruneDelay.Duration, DefaultPruneDelay)
	}
	for _, tt := range []struct {
		d  time.Duration
		ok bool
	}{{0, true}, {10 * time.Minute, true}, {MaxPruneDelay, true}, {-time.Second, false}, {MaxPruneDelay + time.Second, false}} {
		a.PruneDelay = Duration{tt.d}
		err := a.Validate()
		if ok := err == nil; ok != tt.ok || !ok && !strings.Contains(err.Error(), "applier.prune_delay") {
			t.Errorf("prune_delay %s: %v, want ok=%v naming the key", tt.d, err, tt.ok)
		}
	}
}
