package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/hdfscrc"
	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/krb"
	"github.com/hivedr/hivedr/internal/location"
	"github.com/hivedr/hivedr/internal/testenv"
)

// The TestPrivacy* tests run on the privacy variant of the secured stack
// (`make stack-privacy-up`: HIVEDR_STACK_SECURE=1 HIVEDR_STACK_PRIVACY=1,
// state in .stack-privacy), where wire privacy is on everywhere it can be
// asked for: hadoop.rpc.protection=privacy on both HDFS clusters,
// dfs.encrypt.data.transfer with AES/CTR, and SASL QOP auth-conf on both
// metastores, on top of everything the secured stack does.

// requirePrivacy returns the privacy stack's environment: the env file in
// HIVEDR_PRIVACY_STACK_DIR, default .stack-privacy at the repository root.
func requirePrivacy(t *testing.T) *testenv.Env {
	t.Helper()
	dir := os.Getenv("HIVEDR_PRIVACY_STACK_DIR")
	if dir == "" {
		root, err := filepath.Abs("..")
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(root, ".stack-privacy")
	}
	t.Setenv("HIVEDR_SECURE_STACK_ENV", filepath.Join(dir, "env"))
	env := testenv.RequireSecure(t)
	if env.Get(t, "HIVEDR_STACK_PRIVACY") != "1" {
		t.Fatalf("%s is not the privacy stack's env file (no HIVEDR_STACK_PRIVACY=1); start it with make stack-privacy-up", env.Path)
	}
	return env
}

// TestPrivacyChecksums writes files of several sizes (empty, within a
// block, across blocks of either cluster) through hivedr's HDFS store to
// both clusters of the privacy stack, where every DataNode connection is
// encrypted (dfs.encrypt.data.transfer, AES/CTR, keyed by the NameNode's
// data encryption key) and every NameNode call too (RPC privacy). Each
// write's own verification (the staging file's COMPOSITE-CRC32C before
// the rename), each read back and each Checksum must match Go's CRC-32C
// of the bytes, so the source's and the DR's checksums of the same bytes
// are equal though their block sizes differ (1 MiB, 4 MiB).
func TestPrivacyChecksums(t *testing.T) {
	env := requirePrivacy(t)
	ctx := ctxFor(t, 4*time.Minute)
	kc := env.Krb(t, testenv.TestPrincipal)
	table := crc32.MakeTable(crc32.Castagnoli)
	dir := "/privacycrc/" + uniq(t)
	sizes := []int{0, 1000, 1<<20 + 4321, 5<<20 + 17}
	sums := map[testenv.Site][]uint32{}
	for _, site := range []testenv.Site{testenv.Source, testenv.DR} {
		conf := env.HDFSConfig(t, site, kc)
		if conf.DataTransferProtection != "privacy" {
			t.Fatalf("%s: data_transfer_protection %q on the privacy stack", site, conf.DataTransferProtection)
		}
		h, err := fs.NewHDFS(conf)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		nn := env.HDFS(t, site)
		t.Cleanup(func() { nn.RemoveAll(dir) })
		for _, n := range sizes {
			data := make([]byte, n)
			for i := range data {
				data[i] = byte(i*13 + n)
			}
			want := crc32.Checksum(data, table)
			loc := fmt.Sprintf("hdfs://%s%s/f%d", conf.NameNodes[0], dir, n)
			w, err := h.Create(ctx, loc, int64(n))
			if err != nil {
				t.Fatalf("%s: create %s: %v", site, loc, err)
			}
			if _, err := w.Write(data); err != nil {
				t.Fatalf("%s: write %s: %v", site, loc, err)
			}
			if err := w.Commit(ctx, want); err != nil {
				t.Fatalf("%s: commit %s (%d bytes): %v", site, loc, n, err)
			}
			if v, ok := w.Verified(); !ok || v.CRC32C != want {
				t.Errorf("%s %s: the write verified CRC %08x (checked %t), want %08x", site, loc, v.CRC32C, ok, want)
			}
			r, err := h.Open(ctx, loc, 0, -1)
			if err != nil {
				t.Fatalf("%s: open %s: %v", site, loc, err)
			}
			back, err := io.ReadAll(r)
			r.Close()
			if err != nil || !bytes.Equal(back, data) {
				t.Fatalf("%s %s: read back %d bytes (%v), want the %d written", site, loc, len(back), err, n)
			}
			sum, ok, err := h.Checksum(ctx, loc)
			if err != nil || !ok {
				t.Fatalf("%s: checksum %s: %v", site, loc, err)
			}
			if sum.CRC32C != want {
				t.Errorf("%s %s: COMPOSITE-CRC32C %08x, want %08x", site, loc, sum.CRC32C, want)
			}
			sums[site] = append(sums[site], sum.CRC32C)
		}
	}
	if fmt.Sprint(sums[testenv.Source]) != fmt.Sprint(sums[testenv.DR]) {
		t.Errorf("checksums of the same bytes: source %08x, DR %08x", sums[testenv.Source], sums[testenv.DR])
	}

	// The DataNodes encrypt and take the NameNode's data encryption key
	// only: a client with block tokens as credentials, and one asking for
	// authentication only, are refused.
	p := fmt.Sprintf("%s/f%d", dir, 1000)
	crc := env.HDFSCRC(t, testenv.Source) // no EncryptionKey: block tokens
	if _, _, err := crc.FileCRC32C(ctx, p); err == nil {
		t.Error("an encrypting DataNode took a block token as credentials")
	}
	crc.DataTransferProtection = hdfscrc.ProtectionAuthentication
	if _, _, err := crc.FileCRC32C(ctx, p); err == nil || !strings.Contains(err.Error(), "offers QOP auth-conf, not auth") {
		t.Errorf("authentication against an encrypting DataNode: err = %v, want a QOP mismatch", err)
	}
}

// TestPrivacyPipeline runs the whole pipeline on the privacy stack, each
// daemon as its own role: the tailer reads the source metastore over SASL
// QOP auth-conf, copyd copies over encrypted data transfer with RPC
// privacy on both clusters and verifies each copy's COMPOSITE-CRC32C over
// encrypted connections too, the applier writes the DR metastore over
// auth-conf. The scenario's workload must converge, the applier's group
// catch up to the ends of the event topics, and hivedr verify (as the
// operator) find nothing. The test's own metastore connections must have
// negotiated auth-conf, and one insisting on auth is refused: the
// metastores offer nothing weaker.
func TestPrivacyPipeline(t *testing.T) {
	env := requirePrivacy(t)
	u := uniq(t)
	db1, db2 := "pp_sales_"+u, "pp_archive_"+u
	ctx := ctxFor(t, 15*time.Minute)
	src, dr := env.HMS(t, testenv.Source), env.HMS(t, testenv.DR)
	for site, c := range map[testenv.Site]*hms.Client{testenv.Source: src, testenv.DR: dr} {
		if c.QOP() != krb.QOPAuthConf {
			t.Fatalf("%s metastore: SASL QOP %q negotiated, want auth-conf", site, c.QOP())
		}
	}
	// The metastores offer nothing weaker: a client insisting on auth
	// is refused before any Thrift call.
	weak := env.HMSOptions(t)
	weak.QOP = krb.QOPAuth
	if c, err := hms.Dial(ctx, env.Get(t, "HIVEDR_HMS_SRC"), weak); !errors.Is(err, krb.ErrSecurityLayer) {
		if err == nil {
			c.Close()
		}
		t.Fatalf("a client insisting on QOP auth: err = %v, want no security layer in common", err)
	}
	srcFS, drFS := pipelineFS(t, env)
	p := newSecurePipeline(t, env, []string{db1, db2}, currentEventID(t, ctx, src))
	started := time.Now()
	p.startAll()
	root := location.MustParse(env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL"))
	w := wl.NewSource(src, restrictedFS{HDFS: srcFS, root: root}, root.String())
	p.scenarioConverges(ctx, w, dr, db1, db2, srcFS, drFS, started)
	v := p.runVerify("-sample", "1")
	if v.code != 0 || len(v.findings) != 0 || v.summary.Diverged != 0 || v.summary.Tables == 0 {
		t.Fatalf("hivedr verify as the operator exited %d, summary %+v, findings %v:\n%s", v.code, v.summary, v.findings, v.raw)
	}
	p.noSecretIn("hivedr verify", v.raw)
	p.daemonsPrintedNoSecret()
}

// TestPrivacyMetastoreTLS: hivedr reaches a metastore that serves TLS
// (metastore.use.SSL=true) and requires Kerberos, as a configuration with
// source.metastore_tls and source.metastore_principal says. The stack's
// metastores keep SASL auth-conf (TestPrivacyPipeline checks it), which a
// metastore under TLS no longer offers, so the test starts one of its own
// from the stack's Hive distribution: on an embedded Derby database, with
// the stack's server certificate (tls/server.p12) and Hive's keytab. The
// connection is TLS, then SASL at QOP auth (Hive overrides
// hadoop.rpc.protection=privacy under TLS); a client insisting on
// auth-conf is refused; without TLS, with or without Kerberos, the error
// says the metastore serves TLS and names the key to set; a server_name
// the certificate does not carry fails the handshake, naming it.
func TestPrivacyMetastoreTLS(t *testing.T) {
	env := requirePrivacy(t)
	ctx := ctxFor(t, 10*time.Minute)
	addr := startTLSMetastore(t, env)

	conf := func(tls string) *config.Config {
		t.Helper()
		k := env.KrbConfig(t, testenv.TestPrincipal)
		p := filepath.Join(t.TempDir(), "hivedr.yaml")
		y := fmt.Sprintf("source:\n  metastore: %s\n  metastore_principal: %s\n  metastore_tls: %s\n"+
			"kerberos: {principal: %s, keytab: %s, krb5_conf: %s}\n",
			addr, env.Get(t, "HIVEDR_HMS_PRINCIPAL"), tls, k.Principal, k.Keytab, k.Krb5Conf)
		if err := os.WriteFile(p, []byte(y), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := config.Load(p)
		if err != nil {
			t.Fatal(err)
		}
		c.SetKerberos(env.Krb(t, testenv.TestPrincipal))
		return c
	}
	ca := env.Get(t, "HIVEDR_TLS_CA")
	opts := conf(`{ca_file: "` + ca + `"}`).SourceMetastoreOptions()
	if opts.TLS == nil || opts.Kerberos == nil {
		t.Fatalf("source options from the configuration: TLS %v, Kerberos %v; want both", opts.TLS, opts.Kerberos)
	}
	c, err := hms.Dial(ctx, addr, opts)
	if err != nil {
		t.Fatal(err)
	}
	db, err := c.GetDatabase(ctx, "default")
	c.Close()
	if err != nil || db.Name != "default" {
		t.Fatalf("get_database over TLS and SASL: %+v, %v", db, err)
	}
	if c.QOP() != krb.QOPAuth {
		t.Errorf("SASL QOP %q under TLS, want auth (Hive's override)", c.QOP())
	}
	t.Logf("get_database over TLS, SASL QOP %s: %s at %s", c.QOP(), db.Name, db.LocationUri)

	strict := opts
	strict.QOP = krb.QOPAuthConf
	if c, err := hms.Dial(ctx, addr, strict); !errors.Is(err, krb.ErrSecurityLayer) {
		if err == nil {
			c.Close()
		}
		t.Errorf("a client insisting on auth-conf: err = %v, want no security layer in common", err)
	}

	noTLS := opts
	noTLS.TLS = nil
	_, err = hms.Dial(ctx, addr, noTLS)
	if err == nil || !strings.Contains(err.Error(), "it serves TLS") || !strings.Contains(err.Error(), "set source.metastore_tls") {
		t.Errorf("SASL without TLS: err = %v, want it to say the metastore serves TLS and name source.metastore_tls", err)
	}

	plain, err := hms.Dial(ctx, addr, hms.Options{TLSKey: "source.metastore_tls"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = plain.GetDatabase(ctx, "default")
	plain.Close()
	t.Logf("plain Thrift: %v", err)
	var tr *hms.TLSRequiredError
	if !errors.As(err, &tr) || !strings.Contains(err.Error(), "set source.metastore_tls") {
		t.Errorf("plain Thrift: err = %v, want a TLSRequiredError naming source.metastore_tls", err)
	}

	other := conf(`{ca_file: "` + ca + `", server_name: hms.prod}`).SourceMetastoreOptions()
	if _, err := hms.Dial(ctx, addr, other); err == nil || !strings.Contains(err.Error(), "not for the name hms.prod") ||
		!strings.Contains(err.Error(), "source.metastore_tls.server_name") {
		t.Errorf("server_name hms.prod: err = %v, want the handshake refused, naming the name and the key", err)
	}
}

// startTLSMetastore starts a Hive Metastore of the stack's distribution
// with metastore.use.SSL and metastore.sasl.enabled on a free port, its
// database an embedded Derby one in a temporary directory, and returns
// its address once it listens. It is killed when the test ends.
func startTLSMetastore(t *testing.T, env *testenv.Env) string {
	t.Helper()
	stack := env.Get(t, "HIVEDR_STACK_DIR")
	dir := t.TempDir()
	port := freePort(t)
	pw, err := os.ReadFile(filepath.Join(stack, "secrets", "keystore"))
	if err != nil {
		t.Fatal(err)
	}
	// Hadoop's side (core-site.xml) too: Kerberos, and the privacy that
	// TLS overrides.
	hadoop := [][2]string{{"hadoop.security.authentication", "kerberos"}, {"hadoop.rpc.protection", "privacy"}}
	props := [][2]string{
		{"javax.jdo.option.ConnectionURL", "jdbc:derby:;databaseName=" + filepath.Join(dir, "db") + ";create=true"},
		{"javax.jdo.option.ConnectionDriverName", "org.apache.derby.jdbc.EmbeddedDriver"},
		{"metastore.schema.verification", "false"},
		{"metastore.thrift.bind.host", "127.0.0.1"},
		{"metastore.warehouse.dir", "file://" + filepath.Join(dir, "warehouse")},
		{"metastore.metadata.transformer.class", " "},
		{"metastore.compactor.initiator.on", "false"},
		{"metastore.compactor.cleaner.on", "false"},
		{"metastore.compactor.worker.threads", "0"},
		{"metastore.metrics.enabled", "false"},
		{"metastore.task.threads.always", "org.apache.hadoop.hive.metastore.events.EventCleanerTask"},
		{"metastore.task.threads.remote", "org.apache.hadoop.hive.metastore.txn.service.AcidHouseKeeperService"},
		{"metastore.sasl.enabled", "true"},
		{"metastore.kerberos.principal", env.Get(t, "HIVEDR_HMS_PRINCIPAL")},
		{"metastore.kerberos.keytab.file", env.Keytab(t, "hive")},
		{"metastore.use.SSL", "true"},
		{"metastore.keystore.path", filepath.Join(stack, "tls", "server.p12")},
		{"metastore.keystore.password", strings.TrimSpace(string(pw))},
		{"metastore.keystore.type", "PKCS12"},
	}
	props = append(props, hadoop...)
	siteXML := func(props [][2]string) []byte {
		var b strings.Builder
		b.WriteString("<?xml version=\"1.0\"?>\n<configuration>\n")
		for _, p := range props {
			fmt.Fprintf(&b, "  <property><name>%s</name><value>%s</value></property>\n", p[0], p[1])
		}
		b.WriteString("</configuration>\n")
		return []byte(b.String())
	}
	confDir := filepath.Join(dir, "conf")
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string][]byte{"metastore-site.xml": siteXML(props), "core-site.xml": siteXML(hadoop)} {
		if err := os.WriteFile(filepath.Join(confDir, name), body, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	deps, err := os.ReadFile(filepath.Join(stack, "hms", "classpath.txt"))
	if err != nil {
		t.Fatal(err)
	}
	dist := filepath.Join(stack, "hms", "dist")
	java := []string{"-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.net.preferIPv4Stack=true",
		"-Djava.security.krb5.conf=" + env.Get(t, "HIVEDR_KRB5_CONF"), "-Dderby.stream.error.file=" + filepath.Join(dir, "derby.log")}
	java = append(java, hmsJVMOpens(t)...)
	java = append(java, "-cp", confDir+":"+filepath.Join(dist, "lib", "*")+":"+strings.TrimSpace(string(deps)))
	logPath := filepath.Join(dir, "hms.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logFile.Close() })
	logTail := func() string {
		b, _ := os.ReadFile(logPath)
		return string(b[max(0, len(b)-4000):])
	}
	command := func(args ...string) *exec.Cmd {
		cmd := exec.Command("java", append(append([]string{}, java...), args...)...)
		cmd.Env = append(os.Environ(), "METASTORE_HOME="+dist)
		cmd.Dir = dir // what else it writes stays there
		cmd.Stdout, cmd.Stderr = logFile, logFile
		return cmd
	}
	if err := command("org.apache.hadoop.hive.metastore.tools.schematool.MetastoreSchemaTool", "-dbType", "derby", "-initSchema",
		"-url", "jdbc:derby:;databaseName="+filepath.Join(dir, "db")+";create=true", "-driver", "org.apache.derby.jdbc.EmbeddedDriver",
		"-userName", "APP", "-passWord", "mine").Run(); err != nil {
		t.Fatalf("metastore schema tool: %v\n%s", err, logTail())
	}
	srv := command("org.apache.hadoop.hive.metastore.HiveMetaStore", "-p", strconv.Itoa(port))
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { srv.Wait(); close(exited) }()
	t.Cleanup(func() {
		srv.Process.Kill()
		<-exited
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	eventually(t, 3*time.Minute, "the TLS metastore to listen on "+addr, func() bool {
		select {
		case <-exited:
			t.Fatalf("the TLS metastore exited:\n%s", logTail())
		default:
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
	return addr
}

// hmsJVMOpens returns the --add-opens flags the stack gives its
// metastores (HMS_JVM_OPENS in stack/services/hms.sh).
func hmsJVMOpens(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("stack", "services", "hms.sh"))
	if err != nil {
		t.Fatal(err)
	}
	var opens []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "--add-opens=") {
			opens = append(opens, l)
		}
	}
	if len(opens) == 0 {
		t.Fatal("stack/services/hms.sh has no --add-opens flags")
	}
	return opens
}
