package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/failover"
	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/internal/location"
	"github.com/hivedr/hivedr/internal/testenv"
)

// TestSecurePipeline runs the pipeline scenario (tables, partitions and
// inserts with files, renames, drops) through tail, copyd and apply on
// the secured stack, each daemon as its own role: its SCRAM user over
// SASL_SSL with only its ACLs (copyd with a client certificate too) and
// its own Kerberos principal (hivedr-tailer reads the kerberized source
// metastore over SASL GSSAPI; hivedr-copyd copies between the kerberized
// clusters, SASL data transfer with the block tokens on both, each copy's
// COMPOSITE-CRC checked through SPNEGO WebHDFS and the DataNodes'
// SASL-protected OP_BLOCK_CHECKSUM; hivedr-applier writes the kerberized
// DR metastore), the registry over mutual TLS with basic auth. The DR
// metastore and files converge with the source's, and with
// copyd.preserve on over a restricted warehouse (restrictedFS: owners,
// groups and modes of their own on every file and directory, mtimes with
// milliseconds), every DR file keeps its source file's owner, group
// (mapped), mode and mtime, and every directory above it its source
// directory's owner, group and mode (checkDRMetadata). Keeping owners
// needs the DR cluster's superuser, which copyd's own principal is not
// (TestSecureFileMetadataKerberos checks that it is refused), so copyd
// logs in here as hivedr-test, the stack's principal in the HDFS
// superuser group; its Kafka identity stays copyd's. Then, as the operator
// (SCRAM user operator, principal hivedr-operator): `hivedr status` and
// `hivedr verify` report it caught up and clean; `hivedr bootstrap`
// (followed to its end), `hivedr replay -coordinate`, `hivedr cat`,
// `hivedr failover -dry-run` and `hivedr drill -dry-run` work; `hivedr
// config check` masks the registry password. No process printed a
// password or a keytab key.
//
// Ticket lifetime: the role principals' tickets last
// HIVEDR_KRB_ROLE_MAXLIFE (90 s) and are not renewable. Once copyd has
// run longer than that, a second round of changes must replicate too,
// which copyd can only copy with fresh tickets (every WebHDFS request
// needs a valid HTTP service ticket).
func TestSecurePipeline(t *testing.T) {
	env := testenv.RequireSecure(t)
	u := uniq(t)
	db1, db2 := "sp_sales_"+u, "sp_archive_"+u
	ctx := ctxFor(t, 15*time.Minute)
	src, dr := env.HMS(t, testenv.Source), env.HMS(t, testenv.DR)
	srcFS, drFS := pipelineFS(t, env)
	p := newSecurePipeline(t, env, []string{db1, db2}, currentEventID(t, ctx, src),
		func(c *pipelineConf) { c.copydExtra = preserveConf })
	p.roleEnv["copyd"] = append(p.roleEnv["copyd"], krbAs(env, t, testenv.TestPrincipal, env.Keytab(t, testenv.TestPrincipal))...)
	started := time.Now()
	p.startAll()
	root := location.MustParse(env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL"))
	w := wl.NewSource(src, restrictedFS{HDFS: srcFS, root: root}, root.String())
	srcAdmin, drAdmin := env.HDFS(t, testenv.Source), env.HDFS(t, testenv.DR)
	metadataKept := func(when string) {
		t.Helper()
		files, dirs := checkDRMetadata(t, srcAdmin, drAdmin, root.Path, []string{db1, db2})
		if files == 0 || dirs == 0 {
			t.Fatalf("%s: compared the metadata of %d DR files and %d directories; want some of each", when, files, dirs)
		}
		t.Logf("%s: %d DR files and %d directories keep their source's owner, group, mode (and files' mtime)", when, files, dirs)
	}
	p.scenarioConverges(ctx, w, dr, db1, db2, srcFS, drFS, started)
	metadataKept("after the scenario")

	// The operator's tools, as the operator.
	out := waitStatus(t, p.pipeline, 2*time.Minute, 0, "-config", p.conf, "-db", db1+","+db2)
	if !strings.Contains(out, db1) || !strings.Contains(out, db2) {
		t.Errorf("hivedr status names neither %s nor %s:\n%s", db1, db2, out)
	}
	p.noSecretIn("hivedr status", out)
	v := p.runVerify("-sample", "1")
	if v.code != 0 || len(v.findings) != 0 || v.summary.Diverged != 0 || v.summary.Tables == 0 {
		t.Fatalf("hivedr verify as the operator exited %d, summary %+v, findings %v:\n%s", v.code, v.summary, v.findings, v.raw)
	}
	p.noSecretIn("hivedr verify", v.raw)
	// A bootstrap of db2 (the operator writes the request, the tailer
	// reads it and publishes the snapshot, copyd and the applier take it
	// up), followed to its end; a seek request to the running applier;
	// cat of a topic; the failover and drill checks that change nothing.
	out, code := runHivedrEnv(t, nil, "bootstrap", "-config", p.conf, "-db", db2, "-json")
	if code != 0 || !regexp.MustCompile(`"outcome":\s*"done"`).MatchString(out) {
		t.Fatalf("hivedr bootstrap -db %s as the operator exited %d:\n%s", db2, code, tail(out, 30))
	}
	p.noSecretIn("hivedr bootstrap", out)
	p.converge(ctx, src, dr, srcFS, drFS, 2*time.Minute)
	out, code = runHivedrEnv(t, nil, "replay", "-config", p.conf, "-db", db1, "-to-latest", "-coordinate")
	if code != 0 || !strings.Contains(out, "asked the running applier") {
		t.Fatalf("hivedr replay -to-latest -coordinate as the operator exited %d:\n%s", code, out)
	}
	out, code = runHivedrEnv(t, nil, "cat", "-config", p.conf, "-n", "1", kafka.Topics{Prefix: p.prefix}.Events(db1))
	if code != 0 || !strings.Contains(out, `"type":"io.hivedr.MetastoreEvent"`) {
		t.Fatalf("hivedr cat as the operator exited %d:\n%s", code, out)
	}
	fo, errOut, code := runFailover(t, p.conf, "-db", db1+","+db2, "-dry-run")
	if code != 0 || !fo.DryRun || len(fo.Databases) != 2 || fo.SourceHead <= p.start {
		t.Fatalf("hivedr failover -dry-run as the operator exited %d (%+v):\n%s", code, fo, errOut)
	}
	p.noSecretIn("hivedr failover -dry-run", errOut)
	before, err := dr.GetDatabase(ctx, db1)
	if err != nil {
		t.Fatal(err)
	}
	text, errOut, code := runTool(t, 2*time.Minute, "drill", "-config", p.conf, "-dry-run", "-db", db1)
	if code != 0 || !strings.Contains(text, "PASSED") {
		t.Fatalf("hivedr drill -dry-run -db %s as the operator exited %d:\n%s\n%s", db1, code, text, errOut)
	}
	p.noSecretIn("hivedr drill -dry-run", text+errOut)
	if after, err := dr.GetDatabase(ctx, db1); err != nil || fmt.Sprint(before.Parameters) != fmt.Sprint(after.Parameters) {
		t.Errorf("the dry runs changed the DR database: %v -> %v (%v)", before.Parameters, after.Parameters, err)
	}
	// The configuration as `config check` prints it: the registry's
	// password (from the environment) masked, the files' paths shown.
	out, code = runHivedrEnv(t, nil, "config", "check", "-config", p.conf)
	if code != 0 || !strings.Contains(out, "password_file: "+env.Get(t, "HIVEDR_KAFKA_PASSWORD_FILE_OPERATOR")) ||
		!strings.Contains(out, `password: '***'`) || !strings.Contains(out, "keytab: "+env.Keytab(t, testenv.OperatorPrincipal)) {
		t.Errorf("hivedr config check exited %d; want the password masked and the password file and keytab shown:\n%s", code, out)
	}
	p.noSecretIn("hivedr config check", out)

	// Past the role tickets' lifetime, copyd must get new ones.
	maxLife, err := time.ParseDuration(env.Get(t, "HIVEDR_KRB_ROLE_MAXLIFE"))
	if err != nil {
		t.Fatal(err)
	}
	poll(t, maxLife+time.Minute, time.Second, "copyd outlived its first tickets", func() bool {
		p.checkAlive()
		return time.Since(started) > maxLife+5*time.Second
	})
	more := wl.TableSpec{Columns: []string{"id bigint", "note string"}, PartitionKeys: []string{"dt"}}
	if err := w.CreateTable(ctx, db2, "after_expiry", more); err != nil {
		t.Fatal(err)
	}
	if _, err := w.AddPartitions(ctx, db2, "after_expiry", [][]string{{"2026-12-06"}, {"2026-12-07"}}, 30); err != nil {
		t.Fatal(err)
	}
	p.converge(ctx, src, dr, srcFS, drFS, 3*time.Minute)
	t.Logf("converged again %s after the daemons started (role tickets last %s)", time.Since(started).Round(time.Second), maxLife)
	metadataKept("after the tickets' lifetime")

	p.daemonsPrintedNoSecret()
	if !strings.Contains(p.tail.out.String(), "resuming") && !strings.Contains(p.tail.out.String(), "no checkpoint") {
		t.Errorf("tailer log shows no start:\n%s", tail(p.tail.out.String(), 20))
	}
}

// TestSecureRefusals: with a pipeline stopped mid-way (events published
// and files copied but not applied), each daemon started with an identity
// the stack refuses stops at once with an error naming who it was and what
// was refused, and changes nothing. Kafka refuses: a wrong SCRAM password;
// the applier as copyd's user (outside its group and topics); copyd as
// the applier's user (no transactional ID of its own); the tailer as the
// operator (may not create topics); those exit 1. Kerberos refuses, at
// start, before any topic, metastore or file is touched (exit 2): an
// applier whose keytab belongs to another principal; one whose keytab
// holds a stale key; a copyd whose principal the KDC does not know; none
// prints key material. The kerberized DR metastore refuses an applier
// whose file has no kerberos section and no metastore principal (HDFS as
// a plain user): the applier keeps retrying, as it does while a metastore
// is away, and its log says that the metastore requires Kerberos and
// which keys to set, where it used to say only EOF; the test stops it once
// it has said so. The applier and copyd groups' offsets, the topics'
// ends and the DR metastore and files are as before each; then the three
// daemons as their own roles finish the work and the DR converges:
// nothing was lost.
func TestSecureRefusals(t *testing.T) {
	env := testenv.RequireSecure(t)
	u := uniq(t)
	db := "sr_sales_" + u
	ctx := ctxFor(t, 12*time.Minute)
	src, dr := env.HMS(t, testenv.Source), env.HMS(t, testenv.DR)
	srcFS, drFS := pipelineFS(t, env)
	p := newSecurePipeline(t, env, []string{db}, currentEventID(t, ctx, src))
	realm := env.Get(t, "HIVEDR_KRB_REALM")
	w := wl.NewSource(src, srcFS, env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL"))
	spec := wl.TableSpec{Columns: []string{"id bigint", "note string"}, PartitionKeys: []string{"dt"}}
	steps := []workloadStep{
		{"create database and table", func(ctx context.Context, s *wl.Source) error {
			if err := s.CreateDatabase(ctx, db); err != nil {
				return err
			}
			return s.CreateTable(ctx, db, "orders", spec)
		}},
		{"add partitions with files", func(ctx context.Context, s *wl.Source) error {
			_, err := s.AddPartitions(ctx, db, "orders", [][]string{{"2026-12-01"}, {"2026-12-02"}}, 30)
			return err
		}},
	}
	p.startAll()
	for _, st := range steps {
		if err := st.run(ctx, w); err != nil {
			t.Fatalf("workload step %q: %v", st.name, err)
		}
	}
	p.converge(ctx, src, dr, srcFS, drFS, 3*time.Minute)
	eventually(t, 2*time.Minute, "applier caught up", func() bool { return p.caughtUp(ctx) })

	// Stop the applier, publish and copy more, then stop the tailer and
	// copyd: the work that is left is the applier's.
	p.apply.stop(t)
	adm := env.KafkaAdmin(t)
	topic := kafka.Topics{Prefix: p.prefix}.Events(db)
	before := mustEnds(t, ctx, adm, topic)
	if _, err := w.AddPartitions(ctx, db, "orders", [][]string{{"2026-12-03"}, {"2026-12-04"}}, 40); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Insert(ctx, db, "orders", []string{"2026-12-01"}, 20); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "the new events published", func() bool {
		p.checkAliveOf(p.tail, p.copyd)
		return mustEnds(t, ctx, adm, topic) > before
	})
	p.tail.stop(t)
	p.copyd.stop(t)
	copydGroup, applierGroup := p.prefix+"-copyd", p.prefix+"-applier"
	kafkaState := func() string {
		t.Helper()
		return fmt.Sprintf("applier offsets [%s]; copyd offsets [%s]; events end %d; checkpoints end %d",
			groupOffsets(t, ctx, adm, applierGroup), groupOffsets(t, ctx, adm, copydGroup),
			mustEnds(t, ctx, adm, topic), mustEnds(t, ctx, adm, kafka.Topics{Prefix: p.prefix}.Checkpoints()))
	}
	drState := func() *wl.Snapshot {
		t.Helper()
		snap, err := wl.Capture(ctx, dr, drFS, []string{db})
		if err != nil {
			t.Fatal(err)
		}
		return snap
	}
	if p.caughtUp(ctx) {
		t.Fatal("the applier group is caught up already: nothing left to refuse")
	}
	initial, initialDR := kafkaState(), drState()
	t.Logf("left for the applier: %s", initial)

	wrong := filepath.Join(t.TempDir(), "wrong-password")
	if err := os.WriteFile(wrong, []byte("not-the-password\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	applierP, tailerP := testenv.ApplierPrincipal+"@"+realm, testenv.TailerPrincipal+"@"+realm
	staleKeytab := writeKeytab(t, "stale.keytab", testenv.ApplierPrincipal, realm)
	unknownKeytab := writeKeytab(t, "unknown.keytab", "hivedr-nobody", realm)
	for i, k := range keytabSecrets(t, staleKeytab) {
		p.secrets[fmt.Sprintf("key %d of the stale keytab", i)] = k
	}
	as := func(role string, change ...string) []string { return append(roleEnv(env, t, role), change...) }
	noKrb := noKerberosConf(t, p.conf)
	for _, c := range []struct {
		name, daemon string
		env          []string
		code         int
		want         []string // in the output, all of them
		conf         string   // default p.conf
		runs         bool     // it retries: stopped once its output says all of want
	}{
		{"wrong SCRAM password", "apply", as(roleApplier, "HIVEDR_KAFKA_PASSWORD_FILE="+wrong), 1,
			[]string{"SASL_AUTHENTICATION_FAILED", `SCRAM-SHA-512 user "applier"`}, "", false},
		{"applier as copyd's user", "apply", as(roleApplier, kafkaAs(env, t, roleCopyd)...), 1,
			[]string{"AUTHORIZATION_FAILED", `user "copyd"`}, "", false},
		{"copyd as the applier's user", "copyd", as(roleCopyd, kafkaAs(env, t, roleApplier)...), 1,
			[]string{"TRANSACTIONAL_ID_AUTHORIZATION_FAILED", kafka.Topics{Prefix: p.prefix}.CopydTransactionalID(p.prefix), `user "applier"`}, "", false},
		{"tailer as the operator", "tail", as(roleTailer, kafkaAs(env, t, roleOperator)...), 1,
			[]string{"TOPIC_AUTHORIZATION_FAILED", `user "operator"`}, "", false},
		{"applier with the tailer's keytab", "apply", as(roleApplier, "HIVEDR_KEYTAB="+env.Keytab(t, testenv.TailerPrincipal)), 2,
			[]string{applierP, "has no key for it", tailerP}, "", false},
		{"applier with a stale keytab", "apply", as(roleApplier, "HIVEDR_KEYTAB="+staleKeytab), 2,
			[]string{applierP, staleKeytab, "keytab incorrect"}, "", false},
		{"copyd as an unknown principal", "copyd", as(roleCopyd, krbAs(env, t, "hivedr-nobody", unknownKeytab)...), 2,
			[]string{"hivedr-nobody@" + realm, "PRINCIPAL_UNKNOWN"}, "", false},
		{"applier without kerberos", "apply", as(roleApplier), 0,
			[]string{"hive metastore " + env.Get(t, "HIVEDR_HMS_DR"), "Kerberos (metastore.sasl.enabled)",
				"set applier.metastore_principal", "kerberos section"}, noKrb, true},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			conf := p.conf
			if c.conf != "" {
				conf = c.conf
			}
			args := []string{c.daemon, "-config", conf}
			if c.daemon != "tail" {
				args = append(args, "-state-dir", filepath.Join(t.TempDir(), c.daemon))
			}
			start := time.Now()
			pr := startHivedrEnv(t, c.daemon, c.env, args...)
			// slog's text quotes the error, escaping its quotes.
			output := func() string { return strings.ReplaceAll(pr.out.String(), `\"`, `"`) }
			if c.runs {
				poll(t, 2*time.Minute, 200*time.Millisecond, "hivedr "+c.daemon+" to say why it is refused", func() bool {
					if pr.exited() {
						t.Fatalf("hivedr %s exited:\n%s", c.daemon, tail(pr.out.String(), 30))
					}
					for _, w := range c.want {
						if !strings.Contains(output(), w) {
							return false
						}
					}
					return true
				})
				pr.stop(t)
				for _, line := range strings.Split(output(), "\n") {
					if strings.Contains(line, c.want[0]) {
						t.Logf("hivedr %s said: %s", c.daemon, line)
						break
					}
				}
			} else if code := pr.wait(t, 2*time.Minute); code != c.code {
				t.Fatalf("hivedr %s exited %d, want %d:\n%s", c.daemon, code, c.code, tail(pr.out.String(), 30))
			}
			out := output()
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("hivedr %s's error does not say %q:\n%s", c.daemon, w, tail(out, 15))
				}
			}
			p.noSecretIn("hivedr "+c.daemon, pr.out.String())
			if got := kafkaState(); got != initial {
				t.Errorf("hivedr %s refused changed Kafka:\nbefore %s\nafter  %s", c.daemon, initial, got)
			}
			if diffs := wl.DiffSnapshots(initialDR, drState(), func(s string) (string, error) { return s, nil }); len(diffs) > 0 {
				t.Errorf("hivedr %s refused changed the DR metastore or files: %v", c.daemon, diffs)
			}
			t.Logf("refused after %s", time.Since(start).Round(100*time.Millisecond))
		})
	}

	// The right identities finish the work: nothing was lost.
	p.startAll()
	p.converge(ctx, src, dr, srcFS, drFS, 3*time.Minute)
	eventually(t, 2*time.Minute, "applier caught up", func() bool { return p.caughtUp(ctx) })
	p.daemonsPrintedNoSecret()
}

// TestSecureDrill runs a whole drill on the secured stack as the
// operator, with the forward pipeline and the reverse one (the roles
// swapped, its ACLs granted for its own names) running as their roles: a
// scratch database created on the kerberized source with files, replicated
// and verified, failed over (planned), written on DR, failed back through
// the reverse pipeline (the reverse configuration logged in with its own
// kerberos section) and verified on the old primary, then dropped on both
// sites. It must pass as TestDrill's does (runDrill: every step ok, RPO
// 0, the one table written on DR moved back, every file checksummed),
// leave no scratch database, and no process may print a secret.
func TestSecureDrill(t *testing.T) {
	env := testenv.RequireSecure(t)
	u := uniq(t)
	prefix := failover.DrillPrefix + u + "_"
	ctx := ctxFor(t, 15*time.Minute)
	src, dr := env.HMS(t, testenv.Source), env.HMS(t, testenv.DR)
	p := newSecurePipeline(t, env, []string{prefix + "*"}, currentEventID(t, ctx, src))
	p.startAll()
	rev := p.reverseOf(currentEventID(t, ctx, dr), prefix+"*")
	rev.startAll()

	_, out := runDrill(t, p.conf, rev.pipeline, prefix)
	for _, c := range []struct {
		site string
		ms   *hms.Client
	}{{"source", src}, {"DR", dr}} {
		if left, err := c.ms.GetDatabases(ctx, prefix+"*"); err != nil || len(left) > 0 {
			t.Errorf("the drill left %v on the %s metastore (%v)", left, c.site, err)
		}
	}
	p.noSecretIn("hivedr drill", out)
	p.daemonsPrintedNoSecret()
	rev.daemonsPrintedNoSecret()
}

// checkAliveOf fails the test if one of procs exited.
func (p *pipeline) checkAliveOf(procs ...*proc) {
	p.t.Helper()
	for _, pr := range procs {
		if pr.exited() {
			p.t.Fatalf("%s exited early:\n%s", pr.name, tail(pr.out.String(), 60))
		}
	}
}

// mustEnds is the last stable offset of partition 0 of topic.
func mustEnds(t *testing.T, ctx context.Context, adm *kadm.Client, topic string) int64 {
	t.Helper()
	ends, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := ends.Lookup(topic, 0)
	if !ok || o.Err != nil {
		t.Fatalf("end offset of %s: %v", topic, o.Err)
	}
	return o.Offset
}

// groupOffsets are group's committed offsets, as text.
func groupOffsets(t *testing.T, ctx context.Context, adm *kadm.Client, group string) string {
	t.Helper()
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("offsets of group %s: %v", group, err)
	}
	var parts []string
	offs.Each(func(o kadm.OffsetResponse) {
		parts = append(parts, fmt.Sprintf("%s/%d=%d", o.Topic, o.Partition, o.At))
	})
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

// noKerberosConf writes a copy of the secured pipeline's file conf with
// no Kerberos at all: no kerberos section, no metastore principals, and
// both HDFS clusters as the plain user hivedr (a file written for an
// unsecured cluster).
func noKerberosConf(t *testing.T, conf string) string {
	t.Helper()
	b, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	y := regexp.MustCompile(`(?m)^kerberos:\n(?:  .*\n?)*`).ReplaceAllString(string(b), "")
	y = regexp.MustCompile(`(?m)^ *metastore_principal: .*\n`).ReplaceAllString(y, "")
	y = regexp.MustCompile(`namenode_principal: [^,]+, http_principal: [^,]+,`).ReplaceAllString(y, "user: hivedr,")
	for _, gone := range []string{"kerberos:", "metastore_principal", "namenode_principal", "${HIVEDR_PRINCIPAL}"} {
		if strings.Contains(y, gone) {
			t.Fatalf("the file without Kerberos still says %q:\n%s", gone, y)
		}
	}
	return writeFile(t, "no-kerberos.yaml", y)
}
