package drill

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestReportVerdicts(t *testing.T) {
	ok := func() (string, error) { return "fine", nil }
	r := &Report{Database: "hivedr_drill_x", RPOEvents: 0}
	r.Run("create", ok)
	r.Run("failover", ok)
	r.Finish(time.Now())
	if r.Verdict != Passed || !r.OK {
		t.Fatalf("every step passed: %s", r.Verdict)
	}

	r.Skip("failback", "no -reverse-config")
	r.Finish(time.Now())
	if r.Verdict != Incomplete || r.OK {
		t.Fatalf("failback skipped: %s, ok %v; want INCOMPLETE, not ok", r.Verdict, r.OK)
	}
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"INCOMPLETE: NOT a full rehearsal, not run: failback (no -reverse-config)", "failback not run"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "PASSED") {
		t.Errorf("an incomplete drill says PASSED:\n%s", b.String())
	}
}

func TestReportStepsAfterAFailure(t *testing.T) {
	r := &Report{Database: "hivedr_drill_x", RPOEvents: -1}
	r.Skip("failback", "no -reverse-config")
	if err := r.Run("failover", func() (string, error) { return "", errors.New("timed out") }); err == nil {
		t.Fatal("a failing step returned no error")
	}
	ran := false
	if err := r.Run("verify", func() (string, error) { ran = true; return "", nil }); err == nil || ran {
		t.Fatal("a step after a failed one ran")
	}
	cleaned := false
	if err := r.Always("clean up", func() (string, error) { cleaned = true; return "dropped", nil }); err != nil || !cleaned {
		t.Fatal("the clean-up did not run after a failed step")
	}
	r.Finish(time.Now())
	if r.Verdict != Failed || r.OK || len(r.Steps) != 4 || r.Steps[2].Outcome != skippedEarly || r.Steps[3].Outcome != "ok" {
		t.Fatalf("report %+v", r)
	}
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"FAILED", "failed: timed out", "RPO unknown events", "skipped: an earlier step failed"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
}

func TestName(t *testing.T) {
	at := time.Date(2026, 12, 3, 13, 51, 7, 0, time.UTC)
	for _, c := range []struct {
		prefix, want, refused string
	}{
		{"", "hivedr_drill_20261203t135107_", ""},
		{"hivedr_drill_ci_", "hivedr_drill_ci_20261203t135107_", ""},
		{"drill_", "", "beginning with hivedr_drill_"},
		{"hivedr_drill_X", "", "lower case"},
		{"hivedr_drill_*", "", "no glob"},
	} {
		got, err := Name(c.prefix, at)
		if c.refused != "" {
			if err == nil || !strings.Contains(err.Error(), c.refused) {
				t.Errorf("Name(%q) = %q, %v; want refused with %q", c.prefix, got, err, c.refused)
			}
			continue
		}
		if err != nil || !strings.HasPrefix(got, c.want) || len(got) != len(c.want)+4 {
			t.Errorf("Name(%q) = %q, %v; want %s and 4 hex digits", c.prefix, got, err, c.want)
		}
	}
}
