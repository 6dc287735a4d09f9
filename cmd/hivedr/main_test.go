package main

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hivedr/hivedr/internal/config"
)

func TestRun(t *testing.T) {
	tests := []struct {
		args       []string
		code       int
		out, inErr string
	}{
		{args: nil, code: 0, out: "Commands:"},
		{args: []string{"version"}, code: 0, out: "hivedr "},
		{args: []string{"help"}, code: 0, out: "config     check a configuration file"},
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

// fullConfig gives every section a command may need; sections[s] is the
// text that gives section s, to leave out.
var sections = map[config.Section]string{
	config.SectionSource:         "source: {name: prod, kind: thrift, metastore: \"hms.prod:9083\"}\n",
	config.SectionKafka:          "kafka: {brokers: [\"k1.prod:9092\"]}\n",
	config.SectionSchemaRegistry: "schema_registry: \"https://sr.prod:8081\"\n",
	config.SectionDRMetastore:    "applier: {metastore: \"hms.dr:9083\"}\n",
	config.SectionReplication: "replication:\n  source_roots: [\"hdfs://prod/warehouse\"]\n" +
		"  path_mappings: [{source: \"hdfs://prod/\", target: \"hdfs://dr/\"}]\n",
	config.SectionFilesystems: "filesystems:\n  hdfs:\n    - {namenodes: [\"nn.prod:8020\"], webhdfs: \"nn.prod:9870\", user: hive}\n" +
		"  s3:\n    - {endpoint: \"https://s3.prod\", access_key: AKIAPROD, secret_key: \"s3cr3t-ABC\"}\n",
}

// configWithout writes a configuration file with every section but those
// in leave.
func configWithout(t *testing.T, leave ...config.Section) string {
	t.Helper()
	var b strings.Builder
	for _, s := range slices.Sorted(maps.Keys(sections)) {
		if !slices.Contains(leave, s) {
			b.WriteString(sections[s])
		}
	}
	p := filepath.Join(t.TempDir(), "prod.yaml")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCommandNeeds: each command refuses, at start and with exit 2, a
// file that lacks a section it reads, naming the section and itself, and
// takes one that lacks only sections it does not read.
func TestCommandNeeds(t *testing.T) {
	src, kafka, reg, repl, fsys, dr := config.SectionSource, config.SectionKafka, config.SectionSchemaRegistry,
		config.SectionReplication, config.SectionFilesystems, config.SectionDRMetastore
	want := map[string][]config.Section{
		"tail":   {src, kafka, reg, repl, fsys},
		"copyd":  {kafka, reg, repl, fsys},
		"apply":  {kafka, reg, dr, repl, fsys},
		"status": {src, kafka, reg, dr},
		"cat":    {kafka, reg},
		"copy":   {fsys},
	}
	for _, c := range commands() {
		if w, ok := want[c.name]; !slices.Equal(c.needs, w) && (ok || len(c.needs) > 0) {
			t.Errorf("hivedr %s needs %v, want %v", c.name, c.needs, w)
		}
	}
	for name, needs := range want {
		for s := range sections {
			p := configWithout(t, s)
			var errb bytes.Buffer
			fl, cf := newFlagSet(name, "", &errb)
			_, _, ok := setup(fl, cf, []string{"-config", p}, &errb)
			if needed := slices.Contains(needs, s); ok == needed {
				t.Errorf("hivedr %s with no %s: setup ok = %v, want %v (stderr %q)", name, s, ok, !needed, errb.String())
				continue
			}
			if ok {
				if errb.Len() > 0 {
					t.Errorf("hivedr %s with a file printed %q", name, errb.String())
				}
				continue
			}
			wantErr := fmt.Sprintf("hivedr %s: config %s: %s: required (hivedr %s needs it; only with no config file do the local stack's defaults apply)\n",
				name, p, s, name)
			if errb.String() != wantErr {
				t.Errorf("hivedr %s with no %s: stderr %q, want %q", name, s, errb.String(), wantErr)
			}
		}
		// Through run: exit 2 before connecting anywhere.
		var out, errb bytes.Buffer
		if code := run([]string{name, "-config", configWithout(t, needs[0])}, &out, &errb); code != exitUsage ||
			!strings.Contains(errb.String(), string(needs[0])+": required (hivedr "+name+" needs it") {
			t.Errorf("hivedr %s without %s exited %d, stderr %q", name, needs[0], code, errb.String())
		}
	}
}

// TestNoConfigFileSaysSo: with neither -config nor $HIVEDR_CONFIG every
// command says once that it runs on the local stack's defaults: a log line
// for a daemon, a stderr line for a tool; with a file, nothing.
func TestNoConfigFileSaysSo(t *testing.T) {
	t.Setenv("HIVEDR_CONFIG", "")
	for _, c := range commands() {
		if c.needs == nil {
			continue
		}
		var errb bytes.Buffer
		fl, cf := newFlagSet(c.name, "", &errb)
		conf, _, ok := setup(fl, cf, nil, &errb)
		if !ok || conf.File() != "" {
			t.Fatalf("hivedr %s with no file: %q", c.name, errb.String())
		}
		lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
		want := "hivedr " + c.name + ": no config file (-config, $HIVEDR_CONFIG): using the local stack's defaults (Kafka 127.0.0.1:19092"
		if c.daemon {
			want = `level=INFO msg="no config file (-config, $HIVEDR_CONFIG): using the local stack's defaults (Kafka 127.0.0.1:19092`
		}
		if len(lines) != 1 || !strings.Contains(lines[0], want) {
			t.Errorf("hivedr %s with no file said %q, want one line with %q", c.name, errb.String(), want)
		}
	}
	t.Setenv("HIVEDR_CONFIG", configWithout(t))
	var errb bytes.Buffer
	fl, cf := newFlagSet("tail", "", &errb)
	if conf, _, ok := setup(fl, cf, nil, &errb); !ok || conf.File() == "" || errb.Len() > 0 {
		t.Errorf("tail with $HIVEDR_CONFIG: ok %v, stderr %q", ok, errb.String())
	}
}

// TestBadFilesystemsExit2: a bad filesystems section is a configuration
// error like any other, exit 2 at start with its key path.
func TestBadFilesystemsExit2(t *testing.T) {
	p := configWithout(t)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(b), "  s3:\n", "    - {namenodes: [\"nn.dr:8020\"], webhdfs: \"nn.dr:9870\"}\n  s3:\n", 1)
	if err := os.WriteFile(p, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"copyd", "tail", "apply", "copy"} {
		var out, errb bytes.Buffer
		code := run([]string{name, "-config", p}, &out, &errb)
		if code != exitUsage || !strings.Contains(errb.String(), "filesystems.hdfs[1].user: required") {
			t.Errorf("hivedr %s with a bad filesystems section exited %d, stderr %q", name, code, errb.String())
		}
	}
}

func TestConfigCheck(t *testing.T) {
	check := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(append([]string{"config", "check"}, args...), &out, &errb)
		return code, out.String(), errb.String()
	}
	// A valid file: exit 0, every key with its value in effect, secrets
	// masked.
	p := configWithout(t)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	withDSN := strings.Replace(string(b), `kind: thrift, metastore: "hms.prod:9083"`,
		`kind: postgres, postgres_dsn: "postgres://hive:pgpass-DEF@db.prod/metastore"`, 1)
	if err := os.WriteFile(p, []byte(withDSN), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errb := check("-config", p, "-for", "tail,copyd,apply,status,cat,copy")
	if code != exitOK || errb != "" {
		t.Fatalf("config check of a valid file = %d, stderr %q", code, errb)
	}
	for _, secret := range []string{"s3cr3t-ABC", "pgpass-DEF"} {
		if strings.Contains(out, secret) {
			t.Errorf("the secret %s is in the output:\n%s", secret, out)
		}
	}
	for _, want := range []string{"# " + p + ": valid", "secret_key: '***'", "postgres://hive:***@db.prod/metastore",
		"replication_factor: 3", "batch_size: 1000", "split_size: 134217728", "look_ahead: 10000", "transactional_id: hivedr-tailer-prod"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// The output is itself a valid configuration that prints the same.
	again := filepath.Join(t.TempDir(), "again.yaml")
	if err := os.WriteFile(again, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out2, errb := check("-config", again); code != exitOK || strings.SplitN(out2, "\n", 2)[1] != strings.SplitN(out, "\n", 2)[1] {
		t.Errorf("config check of its own output = %d (stderr %q):\n%s\nwant:\n%s", code, errb, out2, out)
	}

	// Invalid: exit 2, the error on stderr, nothing on stdout.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("copyd:\n  workers: eight\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		err  string
	}{
		{[]string{"-config", bad}, `config ` + bad + `: copyd.workers: "eight" is not an integer (line 2)`},
		{[]string{"-config", configWithout(t, config.SectionSchemaRegistry), "-for", "copyd"}, "schema_registry: required (hivedr copyd needs it"},
		{[]string{"-config", p, "-for", "tail,frob"}, `-for: "frob" is not a hivedr command`},
		{[]string{"-config", p, "extra"}, "unexpected arguments"},
		{[]string{"-config", "/nonexistent/hivedr.yaml"}, "no such file"},
	} {
		code, out, errb := check(tt.args...)
		if code != exitUsage || out != "" || !strings.Contains(errb, tt.err) {
			t.Errorf("config check %q = %d, stdout %q, stderr %q; want 2 and %q", tt.args, code, out, errb, tt.err)
		}
	}
	for _, args := range [][]string{{"config"}, {"config", "frob"}} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), "want the subcommand check") {
			t.Errorf("%q = %d, stderr %q", args, code, errb.String())
		}
	}

	// No file: the local stack's defaults, said once on stderr.
	t.Setenv("HIVEDR_CONFIG", "")
	code, out, errb = check()
	if code != exitOK || !strings.Contains(out, "- 127.0.0.1:19092") || strings.Contains(out, "hivedr-secret-key") ||
		strings.Count(errb, "\n") != 1 || !strings.Contains(errb, "no config file") {
		t.Errorf("config check with no file = %d, stderr %q:\n%s", code, errb, out)
	}
}
