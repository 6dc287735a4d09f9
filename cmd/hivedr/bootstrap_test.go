package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestBootstrapFlags: what the operator gets wrong exits 2 with a line
// naming it, before anything is connected to.
func TestBootstrapFlags(t *testing.T) {
	t.Setenv("HIVEDR_CONFIG", "")
	for _, c := range []struct {
		args []string
		err  string
	}{
		{nil, "say what to bootstrap"},
		{[]string{"-db", "a", "-db", "b", "-tables", "t"}, "-tables needs exactly one -db"},
		{[]string{"-all", "-db", "a"}, "-all bootstraps every database"},
		{[]string{"-repair-chain", "-db", "a"}, "-repair-chain bootstraps every database"},
		{[]string{"-db", "x["}, `-db "x["`},
		{[]string{"-db", "a", "extra"}, "unexpected arguments"},
		{[]string{"-frobnicate"}, "flag provided but not defined"},
	} {
		var out, errb bytes.Buffer
		if code := run(append([]string{"bootstrap"}, c.args...), &out, &errb); code != exitUsage || !strings.Contains(errb.String(), c.err) {
			t.Errorf("bootstrap %q = %d, stderr %q; want %d with %q", c.args, code, errb.String(), exitUsage, c.err)
		}
	}
	var out, errb bytes.Buffer
	run([]string{"bootstrap", "-h"}, &out, &errb)
	for _, f := range []string{"-db", "-tables", "-all", "-repair-chain", "-no-wait", "-json", "Exit status", "CHAIN_BROKEN"} {
		if !strings.Contains(out.String(), f) {
			t.Errorf("usage lacks %s:\n%s", f, out.String())
		}
	}
}
