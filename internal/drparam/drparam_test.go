package drparam

import (
	"strings"
	"testing"
)

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

func TestProgress(t *testing.T) {
	p := Progress{Seq: 12, Tables: 3, Partitions: 2000, Files: 4100}
	s := FormatProgress(p)
	if s != "seq=12 tables=3 partitions=2000 files=4100" {
		t.Errorf("FormatProgress = %q", s)
	}
	if got, err := ParseProgress(s); err != nil || got != p {
		t.Errorf("ParseProgress(%q) = %+v, %v", s, got, err)
	}
	if got, err := ParseProgress(""); err != nil || got != (Progress{}) {
		t.Errorf("ParseProgress(\"\") = %+v, %v", got, err)
	}
	for _, bad := range []string{"seq=x", "seq=-1", "rows=3", "seq"} {
		if _, err := ParseProgress(bad); err == nil || !strings.Contains(err.Error(), BootstrapApplied) {
			t.Errorf("ParseProgress(%q): %v, want an error naming %s", bad, err, BootstrapApplied)
		}
	}
	if BootstrapID != "hivedr.bootstrap.id" || SnapshotState(40) != "snapshot 40" || BootstrapDone != "hivedr.bootstrap.done" {
		t.Errorf("the bootstrap keys on DR metastores changed: %q %q %q", BootstrapID, SnapshotState(40), BootstrapDone)
	}
}

func TestHaltReason(t *testing.T) {
	for _, c := range []struct{ v, want string }{
		{FormatHalt(42, "ADD_PARTITION", "missing_object", "table t: not on DR: a b"), "missing_object"},
		{FormatHalt(0, "-", "chain_broken", ""), "chain_broken"},
		{"event 7 X: needs_bootstrap", "needs_bootstrap"},
		{"garbage", ""},
	} {
		if got := HaltReason(c.v); got != c.want {
			t.Errorf("HaltReason(%q) = %q, want %q", c.v, got, c.want)
		}
	}
}

func TestReplTxnAgent(t *testing.T) {
	if got := ReplTxnAgent("Sales"); got != "hivedr-apply:sales" {
		t.Errorf("ReplTxnAgent(Sales) = %q", got)
	}
	long := strings.Repeat("d", 128)
	a, b := ReplTxnAgent(long), ReplTxnAgent(long+"x")
	if len(a) != 128 || len(b) != 128 || a == b || !strings.HasPrefix(a, ReplTxnAgentPrefix+"ddd") {
		t.Errorf("long names: %q (%d), %q (%d)", a, len(a), b, len(b))
	}
}
