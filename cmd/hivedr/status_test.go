package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hivedr/hivedr/internal/cli"
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
		if !strings.Contains(out.String(), f) {
			t.Errorf("usage lacks %s:\n%s", f, out.String())
		}
	}
}

// TestDBNames: -db of a command that takes names gives them lower-cased,
// each once, and refuses a glob naming the command.
func TestDBNames(t *testing.T) {
	var l cli.List
	for _, v := range []string{" Finance, sales,,finance ", "HR"} {
		if err := l.Set(v); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := dbNames("status", l); err != nil || strings.Join(got, " ") != "finance sales hr" {
		t.Errorf("dbNames(%q) = %q, %v; want finance sales hr", l, got, err)
	}
	if _, err := dbNames("failover", cli.List{"sales_*"}); err == nil || !strings.Contains(err.Error(), "hivedr failover takes database names, not globs") {
		t.Errorf("dbNames of a glob: %v", err)
	}
	if _, err := oneDB("replay", "moves the topic of", cli.List{"a", "b"}); err == nil || !strings.Contains(err.Error(), "one database") {
		t.Errorf("oneDB of two: %v", err)
	}
}
