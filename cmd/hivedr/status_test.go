package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestStatusFlags(t *testing.T) {
	for _, args := range [][]string{{"-frobnicate"}, {"-config", "/nonexistent/hivedr.yaml"}, {"extra"}, {"-timeout", "0s"}} {
		var out, errb bytes.Buffer
		if code := run(append([]string{"status"}, args...), &out, &errb); code != exitUsage {
			t.Errorf("status %q = %d, want %d (stderr %q)", args, code, exitUsage, errb.String())
		}
	}
	var out, errb bytes.Buffer
	run([]string{"status", "-h"}, &out, &errb)
	for _, f := range []string{"-config", "-json", "-db", "-tailer-wait", "-timeout", "-log-level", "Exit status"} {
		if !strings.Contains(errb.String(), f) {
			t.Errorf("usage lacks %s:\n%s", f, errb.String())
		}
	}
}

func TestSplitList(t *testing.T) {
	for in, want := range map[string]string{"": "", "finance": "finance", " Finance, sales,,finance ": "finance sales"} {
		if got := strings.Join(splitList(in), " "); got != want {
			t.Errorf("splitList(%q) = %q, want %q", in, got, want)
		}
	}
}
