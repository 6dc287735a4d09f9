package drparam

import "testing"

func TestSkipKey(t *testing.T) {
	for _, id := range []int64{1, 42, 1 << 40} {
		k := SkipKey(id)
		if got, ok := SkippedEvent(k); !ok || got != id {
			t.Errorf("SkippedEvent(%q) = %d, %v; want %d", k, got, ok, id)
		}
	}
	for _, k := range []string{LastID, Target, Halted, SkippedPrefix, SkippedPrefix + "x", "hivedr.skipped"} {
		if id, ok := SkippedEvent(k); ok {
			t.Errorf("SkippedEvent(%q) = %d, true; want not a skip key", k, id)
		}
	}
	if SkipKey(7) != "hivedr.skipped.7" || TargetMark("primary") != "hivedr:primary" {
		t.Errorf("the keys on DR metastores changed: %q, %q", SkipKey(7), TargetMark("primary"))
	}
}
