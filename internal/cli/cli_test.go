package cli

import (
	"errors"
	"flag"
	"io"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func newSet() (*flag.FlagSet, *int, *bool, *List) {
	fl := flag.NewFlagSet("t", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	n := fl.Int("workers", 1, "")
	b := fl.Bool("json", false, "")
	var l List
	fl.Var(&l, "db", "")
	return fl, n, b, &l
}

// TestParse: flags parse wherever they are among the arguments, "--"
// ends them, and the positional arguments keep their order.
func TestParse(t *testing.T) {
	for _, tt := range []struct {
		args    []string
		workers int
		json    bool
		db      string
		pos     []string
	}{
		{args: []string{"a", "b", "-workers", "3"}, workers: 3, pos: []string{"a", "b"}},
		{args: []string{"-workers=4", "a", "-json", "b"}, workers: 4, json: true, pos: []string{"a", "b"}},
		{args: []string{"a", "--workers", "5", "--json=false", "b"}, workers: 5, pos: []string{"a", "b"}},
		{args: []string{"-db", "x", "a", "-db", "y,z", "--", "-workers", "9", "--"}, workers: 1, db: "x,y,z", pos: []string{"a", "-workers", "9", "--"}},
		{args: []string{"-", "a"}, workers: 1, pos: []string{"-", "a"}},
		{args: nil, workers: 1, pos: []string{}},
	} {
		fl, n, b, l := newSet()
		if err := Parse(fl, tt.args); err != nil {
			t.Errorf("Parse(%q): %v", tt.args, err)
			continue
		}
		if *n != tt.workers || *b != tt.json || l.String() != tt.db || !slices.Equal(fl.Args(), tt.pos) {
			t.Errorf("Parse(%q): workers %d json %v db %q args %q; want %d %v %q %q",
				tt.args, *n, *b, l, fl.Args(), tt.workers, tt.json, tt.db, tt.pos)
		}
	}
}

// TestParseErrors: a bad flag after arguments is an error naming it;
// -h, -help and --help are flag.ErrHelp wherever they are.
func TestParseErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		err  string
	}{
		{[]string{"a", "b", "-frob"}, "flag provided but not defined: -frob"},
		{[]string{"a", "--frob=1"}, "flag provided but not defined: -frob"},
		{[]string{"a", "-workers"}, "flag needs an argument: -workers"},
		{[]string{"a", "-workers", "x"}, `invalid value "x" for flag -workers`},
	} {
		fl, _, _, _ := newSet()
		if err := Parse(fl, tt.args); err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("Parse(%q) = %v, want %q", tt.args, err, tt.err)
		}
	}
	for _, h := range []string{"-h", "-help", "--help"} {
		fl, _, _, _ := newSet()
		if err := Parse(fl, []string{"a", h}); !errors.Is(err, flag.ErrHelp) || !IsHelp(h) {
			t.Errorf("Parse(a %s) = %v, want flag.ErrHelp", h, err)
		}
	}
	if IsHelp("-hh") || IsHelp("help") {
		t.Error("IsHelp of -hh or help")
	}
}

// TestList: repeatable and comma-separated, trimmed, without blanks or
// repeats; its zero value prints empty (no "(default ...)" in help).
func TestList(t *testing.T) {
	var l List
	for _, v := range []string{"a, b", "", " c ,,a", "b"} {
		if err := l.Set(v); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(l, List{"a", "b", "c"}) || l.String() != "a,b,c" {
		t.Errorf("List = %q (%s), want a b c", []string(l), l.String())
	}
	if (*List)(nil).String() != "" || new(List).String() != "" {
		t.Error("a zero List prints something")
	}
}

// TestBashCompletion: the script is valid bash, and completes commands,
// a command's flags, and commands after help.
func TestBashCompletion(t *testing.T) {
	script := BashCompletion("hivedr", map[string][]string{"copy": {"workers", "config"}, "status": {"db", "json"}}, "help")
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatalf("bash: %v", err)
	}
	complete := func(words ...string) string {
		// COMP_WORDS is the command line, the last word the one completed.
		q := make([]string, len(words))
		for i, w := range words {
			q[i] = "'" + w + "'"
		}
		prog := script + "\nCOMP_WORDS=(" + strings.Join(q, " ") + "); COMP_CWORD=" + strconv.Itoa(len(words)-1) + "; _hivedr; echo \"${COMPREPLY[*]}\"\n"
		out, err := exec.Command(bash, "--norc", "-c", prog).CombinedOutput()
		if err != nil {
			t.Fatalf("bash: %v: %s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	for _, tt := range []struct {
		words []string
		want  string
	}{
		{[]string{"hivedr", ""}, "copy status help"},
		{[]string{"hivedr", "st"}, "status"},
		{[]string{"hivedr", "copy", "a", "-w"}, "-workers"},
		{[]string{"hivedr", "status", "-"}, "-db -json"},
		{[]string{"hivedr", "status", "fi"}, ""},
		{[]string{"hivedr", "help", "c"}, "copy"},
	} {
		if got := complete(tt.words...); got != tt.want {
			t.Errorf("completing %q = %q, want %q", tt.words, got, tt.want)
		}
	}
}
