package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
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
		"tail":      {src, kafka, reg, repl, fsys},
		"copyd":     {kafka, reg, repl, fsys},
		"apply":     {kafka, reg, dr, repl, fsys},
		"status":    {src, kafka, reg, dr},
		"bootstrap": {src, kafka, reg, dr, repl},
		"failover":  {src, kafka, reg, dr, repl},
		"failback":  {src, kafka, reg, dr, repl},
		"drill":     {src, kafka, reg, dr, repl, fsys},
		"cat":       {kafka, reg},
		"copy":      {fsys},
		"verify":    {src, kafka, reg, dr, repl, fsys},
		"replay":    {kafka, dr},
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
			fl, cf := newFlagSet(name, "", io.Discard, &errb)
			_, _, err := setup(fl, cf, []string{"-config", p})
			ok := err == nil
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
		fl, cf := newFlagSet(c.name, "", io.Discard, &errb)
		conf, _, err := setup(fl, cf, nil)
		if err != nil || conf.File() != "" {
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
	fl, cf := newFlagSet("tail", "", io.Discard, &errb)
	if conf, _, err := setup(fl, cf, nil); err != nil || conf.File() == "" || errb.Len() > 0 {
		t.Errorf("tail with $HIVEDR_CONFIG: %v, stderr %q", err, errb.String())
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

// TestLogFormat: every command takes -log-format; json writes one JSON
// object per line (a daemon's no-config-file line here), and a format
// that is neither is a usage error naming the value.
func TestLogFormat(t *testing.T) {
	t.Setenv("HIVEDR_CONFIG", "")
	for _, c := range commands() {
		if c.needs == nil {
			continue
		}
		var errb bytes.Buffer
		fl, cf := newFlagSet(c.name, "", io.Discard, &errb)
		if _, _, err := setup(fl, cf, []string{"-log-format", "json"}); err != nil {
			t.Fatalf("hivedr %s -log-format json: %q", c.name, errb.String())
		}
		if c.daemon {
			var line struct{ Level, Msg string }
			if err := json.Unmarshal(errb.Bytes(), &line); err != nil || line.Level != "INFO" || !strings.HasPrefix(line.Msg, "no config file") {
				t.Errorf("hivedr %s -log-format json logged %q (%v), want a JSON line", c.name, errb.String(), err)
			}
		}
		errb.Reset()
		fl, cf = newFlagSet(c.name, "", io.Discard, &errb)
		if _, _, err := setup(fl, cf, []string{"-log-format", "xml"}); err == nil || !strings.Contains(errb.String(), `-log-format: "xml" is not text or json`) {
			t.Errorf("hivedr %s -log-format xml: %v, stderr %q", c.name, err, errb.String())
		}
	}
}

// TestDocsConfigTable: docs/configuration.md's table of what a
// configuration file must give each command has a row for every command
// that needs a section, and the row's first part (before any "; ...")
// names exactly the sections the command requires.
func TestDocsConfigTable(t *testing.T) {
	b, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "| command | what a file must give it |")
	if !ok {
		t.Fatal("docs/configuration.md has no table of what each command needs from a file")
	}
	table, _, _ = strings.Cut(table, "\n\n")
	rows := map[string]string{}
	for _, l := range strings.Split(table, "\n") {
		cells := strings.Split(l, "|")
		if len(cells) < 3 {
			continue
		}
		name := strings.Trim(strings.TrimSpace(cells[1]), "`")
		rows[strings.TrimPrefix(name, "hivedr ")] = strings.Join(cells[2:], "|")
	}
	for _, c := range commands() {
		if len(c.needs) == 0 {
			continue
		}
		row, ok := rows[c.name]
		if !ok {
			t.Errorf("docs/configuration.md's table has no row for hivedr %s (needs %v)", c.name, c.needs)
			continue
		}
		first, _, _ := strings.Cut(row, "; ")
		var named []string
		for _, s := range []config.Section{config.SectionSource, config.SectionKafka, config.SectionSchemaRegistry,
			config.SectionDRMetastore, config.SectionReplication, config.SectionFilesystems} {
			if strings.Contains(first, "`"+string(s)+"`") {
				named = append(named, string(s))
			}
		}
		var want []string
		for _, s := range c.needs {
			want = append(want, string(s))
		}
		slices.Sort(named)
		slices.Sort(want)
		if !slices.Equal(named, want) {
			t.Errorf("docs/configuration.md's row of hivedr %s names %v, the command needs %v", c.name, named, want)
		}
	}
}

// TestACLs: hivedr acls lists each role's ACLs under the file's names, for
// the principals given; -apply needs the kafka section; bad roles and
// principals are usage errors.
func TestACLs(t *testing.T) {
	p := filepath.Join(t.TempDir(), "acls.yaml")
	if err := os.WriteFile(p, []byte("source: {name: prod}\nkafka: {topic_prefix: dr1}\ncopyd: {group: dr1-copyd}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	acls := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(append([]string{"acls", "-config", p}, args...), &out, &errb)
		return code, out.String(), errb.String()
	}
	code, out, errb := acls()
	if code != exitOK {
		t.Fatalf("hivedr acls = %d: %s", code, errb)
	}
	for _, want := range []string{"ROLE", "User:tailer", "User:copyd", "User:applier", "User:operator", "User:viewer", "dr1.events.", "dr1.manifests",
		"hivedr-tailer-prod", "dr1-copyd", "dr1-copyd-", "hivedr-applier", "CREATE,WRITE,READ"} {
		if !strings.Contains(out, want) {
			t.Errorf("hivedr acls lacks %q:\n%s", want, out)
		}
	}
	// The tailer reads the completions (READ implies DESCRIBE) to release
	// its bootstraps' HDFS snapshots.
	if !regexp.MustCompile(`(?m)^tailer\s+User:tailer\s+TOPIC\s+LITERAL\s+dr1\.completions\s+CREATE,READ\s`).MatchString(out) {
		t.Errorf("hivedr acls does not let the tailer read dr1.completions:\n%s", out)
	}
	// copyd's transactional IDs follow the topic prefix, not a shared one.
	if strings.Contains(out, "hivedr-copyd-") {
		t.Errorf("hivedr acls grants the default prefix's copyd transactional IDs under prefix dr1:\n%s", out)
	}
	// The viewer reads the topics and describes the groups, nothing more.
	if !regexp.MustCompile(`(?m)^viewer\s+User:viewer\s+GROUP\s+LITERAL\s+hivedr-applier\s+DESCRIBE\s`).MatchString(out) ||
		regexp.MustCompile(`(?m)^viewer\s.*(WRITE|CREATE|TRANSACTIONAL_ID)`).MatchString(out) {
		t.Errorf("hivedr acls: the viewer does not describe the applier's group alone, or may write:\n%s", out)
	}
	code, out, _ = acls("-role", "copyd", "-principal", "copyd=User:cp1")
	if code != exitOK || strings.Contains(out, "tailer") || strings.Count(out, "User:cp1") != 4 {
		t.Errorf("hivedr acls -role copyd -principal copyd=User:cp1 = %d:\n%s", code, out)
	}
	for _, tt := range []struct {
		args []string
		err  string
	}{
		{[]string{"-role", "admin"}, `-role: "admin" is not tailer, copyd, applier, operator or viewer`},
		{[]string{"-principal", "copyd"}, `"copyd" is not ROLE=User:NAME`},
		{[]string{"-principal", "boss=User:x"}, `-principal: "boss" is not tailer`},
		{[]string{"-apply"}, "kafka.brokers: required (hivedr acls -apply needs it"},
	} {
		if code, _, errb := acls(tt.args...); code != exitUsage || !strings.Contains(errb, tt.err) {
			t.Errorf("hivedr acls %q = %d, stderr %q; want 2 and %q", tt.args, code, errb, tt.err)
		}
	}
}

// TestConfigCheckKerberos: config check validates a kerberos section
// without logging in or reading the keytab (the KDC here does not exist),
// prints the principal and the keytab's path, and never the keytab's
// content; a command that does log in fails at start naming the principal
// and the keytab, exit 2.
func TestConfigCheckKerberos(t *testing.T) {
	dir := t.TempDir()
	kt := filepath.Join(dir, "copyd.keytab")
	secret := "KEYTAB-CONTENT-4711"
	if err := os.WriteFile(kt, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	krb5 := filepath.Join(dir, "krb5.conf")
	if err := os.WriteFile(krb5, []byte("[libdefaults]\n  default_realm = EXAMPLE.COM\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(configWithout(t))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "krb.yaml")
	y := string(b) + "kerberos: {principal: hivedr-copyd@EXAMPLE.COM, keytab: " + kt + ", krb5_conf: " + krb5 + "}\n"
	if err := os.WriteFile(p, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"config", "check", "-config", p}, &out, &errb); code != exitOK {
		t.Fatalf("config check = %d, stderr %q", code, errb.String())
	}
	for _, want := range []string{"principal: hivedr-copyd@EXAMPLE.COM", "keytab: " + kt} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("config check output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String()+errb.String(), secret) {
		t.Error("config check printed the keytab's content")
	}
	out.Reset()
	errb.Reset()
	code := run([]string{"copy", "-config", p, "hdfs://nn.prod:8020/a", "hdfs://nn.prod:8020/b"}, &out, &errb)
	if code != exitUsage || !strings.Contains(errb.String(), "hivedr-copyd@EXAMPLE.COM") || !strings.Contains(errb.String(), kt) {
		t.Errorf("copy with an unreadable keytab = %d, stderr %q; want exit 2 naming the principal and keytab", code, errb.String())
	}
	if strings.Contains(out.String()+errb.String(), secret) {
		t.Error("a failed login printed the keytab's content")
	}
}

// A further site's daemons keep their default state directories apart
// from the top-level site's.
func TestStateNamePerSite(t *testing.T) {
	conf := config.Default()
	conf.Sites = []config.Site{config.NewSite("west")}
	if err := conf.Validate(); err != nil {
		t.Fatal(err)
	}
	west, err := conf.ForSite("west")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ got, want string }{
		{stateName(conf, "applier"), "applier"},
		{stateName(west, "applier"), "applier-site-west"},
		{stateName(west, "copyd-h1"), "copyd-h1-site-west"},
	} {
		if c.got != c.want {
			t.Errorf("state name %q, want %q", c.got, c.want)
		}
	}
}
