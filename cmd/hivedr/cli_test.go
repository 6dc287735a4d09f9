package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hivedr/hivedr/internal/cli"
)

// runArgs runs hivedr with args and returns its exit code, stdout and
// stderr.
func runArgs(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestCLIHelpExitsZero: -h, -help and --help, before or after other
// arguments, print the command's help on stdout (its usage line and its
// flags) and exit 0, with nothing on stderr.
func TestCLIHelpExitsZero(t *testing.T) {
	sets := commandFlags()
	for _, c := range commands() {
		for _, args := range [][]string{{"-h"}, {"--help"}, {"-help"}, {"x", "--help"}} {
			code, out, errb := runArgs(append([]string{c.name}, args...)...)
			if code != exitOK || errb != "" || !strings.HasPrefix(out, "Usage: hivedr "+c.name) {
				t.Errorf("hivedr %s %q = %d, stderr %q, stdout %q; want 0 and its usage on stdout", c.name, args, code, errb, out)
				continue
			}
			sets[c.name].VisitAll(func(f *flag.Flag) {
				if !strings.Contains(out, "  -"+f.Name+" ") && !strings.Contains(out, "  -"+f.Name+"\n") && !strings.Contains(out, "  -"+f.Name+"\t") {
					t.Errorf("hivedr %s %q does not show -%s:\n%s", c.name, args, f.Name, out)
				}
			})
		}
	}
	for _, name := range []string{"status", "copy", "apply", "verify", "config", "version"} {
		if sets[name] == nil {
			t.Errorf("commandFlags has no flag set of %s", name)
		}
	}
	n := 0
	sets["status"].VisitAll(func(*flag.Flag) { n++ })
	if n < 5 {
		t.Errorf("status has %d flags, want its own and the common ones", n)
	}
}

// TestCLIHelpCommand: hivedr help CMD prints what CMD -h prints (its
// flags, not the list of commands); an unknown command is exit 2 naming
// it.
func TestCLIHelpCommand(t *testing.T) {
	for _, c := range commands() {
		code, out, errb := runArgs("help", c.name)
		_, want, _ := runArgs(c.name, "-h")
		if code != exitOK || errb != "" || out != want || strings.Contains(out, "Commands:") {
			t.Errorf("hivedr help %s = %d, stderr %q:\n%s\nwant what -h prints:\n%s", c.name, code, errb, out, want)
		}
	}
	code, out, _ := runArgs("help", "status")
	for _, f := range []string{"-db", "-tailer-wait", "-timeout", "-json"} {
		if code != exitOK || !strings.Contains(out, f) {
			t.Errorf("hivedr help status lacks %s:\n%s", f, out)
		}
	}
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}, nil} {
		if code, out, _ := runArgs(args...); code != exitOK || !strings.Contains(out, "Commands:") {
			t.Errorf("hivedr %q = %d, want 0 and the commands:\n%s", args, code, out)
		}
	}
	for _, tt := range []struct {
		args []string
		err  string
	}{
		{[]string{"help", "frob"}, `hivedr help: unknown command "frob"`},
		{[]string{"help", "status", "copy"}, "want one command"},
	} {
		if code, out, errb := runArgs(tt.args...); code != exitUsage || out != "" || !strings.Contains(errb, tt.err) {
			t.Errorf("hivedr %q = %d, stdout %q, stderr %q; want 2 and %q", tt.args, code, out, errb, tt.err)
		}
	}
}

// TestCLIVersionFlag: -version and --version are hivedr version.
func TestCLIVersionFlag(t *testing.T) {
	_, want, _ := runArgs("version")
	if !strings.HasPrefix(want, "hivedr ") {
		t.Fatalf("hivedr version printed %q", want)
	}
	for _, v := range []string{"-version", "--version"} {
		if code, out, errb := runArgs(v); code != exitOK || out != want || errb != "" {
			t.Errorf("hivedr %s = %d, stdout %q, stderr %q; want 0 and %q", v, code, out, errb, want)
		}
	}
	if code, _, errb := runArgs("version", "extra"); code != exitUsage || !strings.Contains(errb, "unexpected arguments") {
		t.Errorf("hivedr version extra = %d, stderr %q", code, errb)
	}
}

// TestCLIFlagsAfterArgs: flags after positional arguments parse; an
// unknown one is an error naming it, then the usage, exit 2.
func TestCLIFlagsAfterArgs(t *testing.T) {
	fl := commandFlags()["copy"]
	if err := cli.Parse(fl, []string{"a", "b", "-workers", "3"}); err != nil {
		t.Fatal(err)
	}
	if w := fl.Lookup("workers").Value.String(); w != "3" || !slices.Equal(fl.Args(), []string{"a", "b"}) {
		t.Errorf("copy a b -workers 3: workers %s, arguments %q", w, fl.Args())
	}

	// Through run: a copy between two local directories, its flags last.
	dir := t.TempDir()
	conf := filepath.Join(dir, "local.yaml")
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	if err := os.WriteFile(conf, []byte("filesystems: {local: true}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "f"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errb := runArgs("copy", src, dst, "-workers", "3", "-config", conf); code != exitOK || !strings.Contains(out, "copied 1 files") {
		t.Errorf("copy SRC DST -workers 3 -config FILE = %d, stdout %q, stderr %q", code, out, errb)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "f")); err != nil || string(b) != "data" {
		t.Errorf("the copy: %q, %v", b, err)
	}

	for _, tt := range []struct {
		args []string
		err  string
	}{
		{[]string{"copy", "a", "b", "-workers", "3", "-frob"}, "hivedr copy: flag provided but not defined: -frob\n\nUsage: hivedr copy"},
		{[]string{"copy", "a", "b", "-workers"}, "hivedr copy: flag needs an argument: -workers\n\nUsage: hivedr copy"},
		{[]string{"status", "-json", "--frob=1"}, "hivedr status: flag provided but not defined: -frob\n\nUsage: hivedr status"},
		{[]string{"copy", "-config", conf, "--", src, dst, "-workers"}, `hivedr copy: want SOURCE_DIR and TARGET_DIR, got ["`},
		{[]string{"verify", "-tables", "t.*"}, `-tables "t.*": table names are names, not patterns (a regular expression is -tables-regex)`},
		{[]string{"verify", "-tables", "t", "-tables-regex", "t.*"}, "not both"},
		{[]string{"verify", "-tables-regex", "("}, "-tables-regex: error parsing regexp"},
		{[]string{"failover", "-db", "sales_*"}, `-db "sales_*": hivedr failover takes database names, not globs`},
		{[]string{"replay", "-db", "a,b", "-to-latest"}, `-db: hivedr replay moves the topic of one database, got ["a" "b"]`},
		{[]string{"drill", "-dry-run", "-db", "a", "-db", "b"}, `-db: hivedr drill -dry-run checks one database`},
	} {
		if code, _, errb := runArgs(tt.args...); code != exitUsage || !strings.Contains(errb, tt.err) {
			t.Errorf("hivedr %q = %d, stderr %q; want 2 and %q", tt.args, code, errb, tt.err)
		}
	}
}

// TestCLIFlagMeaningsAgree: a flag that two or more commands take has the
// same type, usage text and default on each (a usage ending in ownDefault
// says the default is per command), as the commands define them.
func TestCLIFlagMeaningsAgree(t *testing.T) {
	type use struct {
		cmd string
		f   *flag.Flag
	}
	byName := map[string][]use{}
	for cmd, fl := range commandFlags() {
		fl.VisitAll(func(f *flag.Flag) { byName[f.Name] = append(byName[f.Name], use{cmd, f}) })
	}
	shared := 0
	for name, uses := range byName {
		if len(uses) < 2 {
			continue
		}
		shared++
		first := uses[0]
		for _, u := range uses[1:] {
			if tf, tu := reflect.TypeOf(first.f.Value), reflect.TypeOf(u.f.Value); tf != tu {
				t.Errorf("-%s is a %v on %s and a %v on %s", name, tf, first.cmd, tu, u.cmd)
			}
			if first.f.Usage != u.f.Usage {
				t.Errorf("-%s means on %s: %q\nand on %s: %q", name, first.cmd, first.f.Usage, u.cmd, u.f.Usage)
			}
			if first.f.DefValue != u.f.DefValue && !strings.HasSuffix(u.f.Usage, ownDefault) {
				t.Errorf("-%s defaults to %q on %s and %q on %s", name, first.f.DefValue, first.cmd, u.f.DefValue, u.cmd)
			}
		}
	}
	// What the issue asked for: -db on every command that takes it, and
	// -tables, the same list type; the common flags everywhere.
	for name, min := range map[string]int{"db": 7, "tables": 2, "config": len(commands()) - 2, "timeout": 5} {
		if n := len(byName[name]); n < min {
			t.Errorf("-%s is taken by %d commands, want at least %d", name, n, min)
		}
	}
	for _, u := range append(byName["db"], byName["tables"]...) {
		if _, ok := u.f.Value.(*cli.List); !ok {
			t.Errorf("-%s on %s is a %T, not a cli.List", u.f.Name, u.cmd, u.f.Value)
		}
	}
	if shared < 10 {
		t.Errorf("%d flags shared by several commands, want the common ones and -db, -tables, -json, -timeout, ...", shared)
	}
}

// TestCommandsDocumented: README's table of commands has a row for every
// command, "| `hivedr NAME ...` | ... |".
func TestCommandsDocumented(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range commands() {
		prefix := "| `hivedr " + c.name
		if !slices.ContainsFunc(strings.Split(string(b), "\n"), func(l string) bool {
			rest, ok := strings.CutPrefix(l, prefix)
			return ok && (strings.HasPrefix(rest, "`") || strings.HasPrefix(rest, " "))
		}) {
			t.Errorf("README has no table row for hivedr %s (a line starting %q)", c.name, prefix+"`")
		}
	}
}
