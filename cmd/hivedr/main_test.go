package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	tests := []struct {
		args       []string
		code       int
		out, inErr string
	}{
		{args: nil, code: 0, out: "Commands:"},
		{args: []string{"version"}, code: 0, out: "hivedr "},
		{args: []string{"frobnicate"}, code: 2, inErr: `unknown command "frobnicate"`},
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		if code := run(tt.args, &out, &errb); code != tt.code {
			t.Errorf("run(%q) = %d, want %d (stderr %q)", tt.args, code, tt.code, errb.String())
		}
		if !strings.Contains(out.String(), tt.out) || !strings.Contains(errb.String(), tt.inErr) {
			t.Errorf("run(%q): stdout %q stderr %q; want %q / %q", tt.args, out.String(), errb.String(), tt.out, tt.inErr)
		}
	}
}
