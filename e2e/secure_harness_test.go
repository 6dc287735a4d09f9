package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jcmturner/gokrb5/v8/iana/etypeID"
	"github.com/jcmturner/gokrb5/v8/keytab"
	"github.com/twmb/franz-go/pkg/kadm"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/internal/testenv"
)

// The TestSecure* tests run on the secured stack (`make
// stack-secure-up`; testenv.RequireSecure), where everything hivedr
// talks to authenticates: Kafka with a SASL_SSL listener (SCRAM-SHA-512)
// and the StandardAuthorizer, one SCRAM user per role; the schema
// registry over mutual TLS with basic auth; a KDC, and Kerberos on both
// HDFS clusters (SASL data transfer, HTTPS-only WebHDFS with SPNEGO) and
// both metastores (SASL GSSAPI). Two run on the plain stack instead:
// TestSecureFileMetadataHDFS (TestSecureFileMetadataKerberos is its
// secured twin) and TestSecureFileMetadataS3 (S3 is alike on both).

// securePipeline is a pipeline on the secured stack with one
// configuration file for every process. Who a process is comes from its
// environment, as a deployment would set it per process:
//
//	${HIVEDR_KAFKA_USER}, ${HIVEDR_KAFKA_PASSWORD_FILE}  its SCRAM user
//	${HIVEDR_KAFKA_CERT}, ${HIVEDR_KAFKA_KEY}            its client certificate to Kafka, if any
//	${HIVEDR_PRINCIPAL}, ${HIVEDR_KEYTAB}                its Kerberos principal
//	${HIVEDR_REGISTRY_PASSWORD}                          the registry's basic-auth password
//
// roleEnv gives each role's. The file also gives the stack's CA to Kafka
// and the registry (and the client certificate to the registry), both
// metastores' principal, and both HDFS clusters' NameNode and HTTP
// principals, data_transfer_protection and CA. The daemons run as their
// roles (tailer, copyd, applier); the test process itself, and every
// command it runs, is the operator (status, verify, cat, bootstrap,
// replay, failover, drill). Each role's Kafka user gets the ACLs `hivedr
// acls` lists for the pipeline's names, granted by `hivedr acls -apply`
// as the stack's admin, and nothing else.
type securePipeline struct {
	*pipeline
	// secrets are every password and keytab key the stack holds, to
	// look for in outputs (noSecretIn).
	secrets map[string]string
	// aclConf is the file `hivedr acls -apply` runs on as the stack's
	// admin (SCRAM): the pipeline's own, unless it reaches Kafka otherwise.
	aclConf string
}

// Roles of the secured stack: each is a Kafka SCRAM user and the Kerberos
// principal hivedr-<role>.
const (
	roleTailer   = "tailer"
	roleCopyd    = "copyd"
	roleApplier  = "applier"
	roleOperator = "operator"
)

// kafkaAs is the environment that makes the pipeline's file speak to
// Kafka as SCRAM user user (admin, tailer, copyd, applier, operator) with
// its password file, without a client certificate.
func kafkaAs(env *testenv.Env, t *testing.T, user string) []string {
	return []string{"HIVEDR_KAFKA_USER=" + user,
		"HIVEDR_KAFKA_PASSWORD_FILE=" + env.Get(t, "HIVEDR_KAFKA_PASSWORD_FILE_"+strings.ToUpper(user)),
		"HIVEDR_KAFKA_CERT=", "HIVEDR_KAFKA_KEY="}
}

// krbAs is the environment that makes the pipeline's file log in as
// principal (without realm) with keytab.
func krbAs(env *testenv.Env, t *testing.T, principal, keytab string) []string {
	return []string{"HIVEDR_PRINCIPAL=" + principal + "@" + env.Get(t, "HIVEDR_KRB_REALM"), "HIVEDR_KEYTAB=" + keytab}
}

// roleEnv is role's whole identity: its SCRAM user, its principal
// hivedr-<role> with its keytab, and for copyd the stack's client
// certificate too (mutual TLS on top of SASL: the broker verifies it
// against its CA). Later entries of an environment win, so a test appends
// what it changes.
func roleEnv(env *testenv.Env, t *testing.T, role string) []string {
	e := append(kafkaAs(env, t, role), krbAs(env, t, "hivedr-"+role, env.Keytab(t, "hivedr-"+role))...)
	if role == roleCopyd {
		e = append(e, "HIVEDR_KAFKA_CERT="+env.Get(t, "HIVEDR_TLS_CLIENT_CERT"), "HIVEDR_KAFKA_KEY="+env.Get(t, "HIVEDR_TLS_CLIENT_KEY"))
	}
	return e
}

// secureConf sets the secured stack's settings of a pipeline's file.
func secureConf(t *testing.T, env *testenv.Env) func(*pipelineConf) {
	ca := env.Get(t, "HIVEDR_TLS_CA")
	hdfsEntry := func(site testenv.Site) string {
		c := env.HDFSConfig(t, site, nil)
		return fmt.Sprintf("{namenodes: [%s], webhdfs: %s, namenode_principal: %s, http_principal: %s, data_transfer_protection: %s, ca_file: %s}",
			c.NameNodes[0], c.WebHDFS, c.NameNodePrincipal, c.HTTPPrincipal, c.DataTransferProtection, c.CAFile)
	}
	return func(c *pipelineConf) {
		c.srcFilesystem, c.filesystem = hdfsEntry(testenv.Source), hdfsEntry(testenv.DR)
		c.metastorePrincipal = env.Get(t, "HIVEDR_HMS_PRINCIPAL")
		c.kafkaSecurity = fmt.Sprintf(`  sasl: {mechanism: %s, user: "${HIVEDR_KAFKA_USER}", password_file: "${HIVEDR_KAFKA_PASSWORD_FILE}"}
  tls: {ca_file: %q, cert_file: "${HIVEDR_KAFKA_CERT}", key_file: "${HIVEDR_KAFKA_KEY}"}`,
			env.Get(t, "HIVEDR_KAFKA_SASL_MECHANISM"), ca)
		c.registry = fmt.Sprintf(`{url: %q, user: %s, password: "${HIVEDR_REGISTRY_PASSWORD}", tls: {ca_file: %q, cert_file: %q, key_file: %q}}`,
			env.Get(t, "HIVEDR_SCHEMA_REGISTRY"), env.Get(t, "HIVEDR_SCHEMA_REGISTRY_USER"), ca,
			env.Get(t, "HIVEDR_TLS_CLIENT_CERT"), env.Get(t, "HIVEDR_TLS_CLIENT_KEY"))
		c.kerberos = fmt.Sprintf("kerberos:\n  principal: \"${HIVEDR_PRINCIPAL}\"\n  keytab: \"${HIVEDR_KEYTAB}\"\n  krb5_conf: %s\n",
			env.Get(t, "HIVEDR_KRB5_CONF"))
	}
}

// newSecurePipeline makes a pipeline on the secured stack: secureConf,
// then opts (which may change what it set).
// kafkaGSSAPI makes a secured pipeline's file speak to Kafka with SASL
// GSSAPI (Kerberos) instead of SCRAM: each process as its principal
// ${HIVEDR_PRINCIPAL} with ${HIVEDR_KEYTAB}, the identity it uses for
// HDFS and the metastores too. The secured broker maps hivedr-<role>@realm
// to Kafka user <role>, so the roles' ACLs are the same.
func kafkaGSSAPI(t *testing.T, env *testenv.Env) func(*pipelineConf) {
	return func(c *pipelineConf) {
		c.kafkaSecurity = fmt.Sprintf(`  sasl: {mechanism: GSSAPI, kerberos: {principal: "${HIVEDR_PRINCIPAL}", keytab: "${HIVEDR_KEYTAB}", krb5_conf: %q}}
  tls: {ca_file: %q}`, env.Get(t, "HIVEDR_KRB5_CONF"), env.Get(t, "HIVEDR_TLS_CA"))
	}
}

// scenarioConverges runs the pipeline scenario on db1 and db2 through w
// and waits until DR equals the source and the applier group committed
// every event, logging how long that took since the daemons started.
func (p *securePipeline) scenarioConverges(ctx context.Context, w *wl.Source, dr *hms.Client, db1, db2 string, srcFS, drFS *fs.HDFS, started time.Time) {
	t := p.t
	t.Helper()
	for _, st := range scenario(db1, db2) {
		if err := st.run(ctx, w); err != nil {
			t.Fatalf("workload step %q: %v", st.name, err)
		}
	}
	p.converge(ctx, w.HMS, dr, srcFS, drFS, 4*time.Minute)
	eventually(t, 2*time.Minute, "applier group committed to the end of the event topics", func() bool { return p.caughtUp(ctx) })
	t.Logf("converged %s after the daemons started", time.Since(started).Round(time.Second))
}

func newSecurePipeline(t *testing.T, env *testenv.Env, dbs []string, start int64, opts ...func(*pipelineConf)) *securePipeline {
	t.Helper()
	regPassword := readSecret(t, env.Get(t, "HIVEDR_SCHEMA_REGISTRY_PASSWORD_FILE"))
	// The test process (and the tools it runs) is the operator.
	for _, kv := range append(roleEnv(env, t, roleOperator), "HIVEDR_REGISTRY_PASSWORD="+regPassword) {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	// The ACLs are granted as the stack's admin, a SCRAM user: with opts
	// that change how the roles reach Kafka, from a copy of the file that
	// reaches it as secureConf does.
	var scram, final string
	all := append([]func(*pipelineConf){secureConf(t, env), func(c *pipelineConf) { scram = c.kafkaSecurity }}, opts...)
	p := newPipeline(t, env, dbs, start, append(all, func(c *pipelineConf) { final = c.kafkaSecurity })...)
	sp := &securePipeline{pipeline: p, secrets: map[string]string{"registry password": regPassword}, aclConf: p.conf}
	if final != scram {
		y, err := os.ReadFile(p.conf)
		if err != nil || !strings.Contains(string(y), final) {
			t.Fatalf("the pipeline's file %s does not hold its kafka keys (%v)", p.conf, err)
		}
		sp.aclConf = writeFile(t, "acls.yaml", strings.Replace(string(y), final, scram, 1))
	}
	sp.setRoles()
	for _, u := range []string{"admin", roleTailer, roleCopyd, roleApplier, roleOperator} {
		sp.secrets["kafka "+u+" password"] = readSecret(t, env.Get(t, "HIVEDR_KAFKA_PASSWORD_FILE_"+strings.ToUpper(u)))
	}
	keytabs, err := filepath.Glob(filepath.Join(env.Get(t, "HIVEDR_KRB_KEYTABS"), "*.keytab"))
	if err != nil || len(keytabs) == 0 {
		t.Fatalf("no keytabs in %s: %v", env.Get(t, "HIVEDR_KRB_KEYTABS"), err)
	}
	for _, kt := range keytabs {
		for i, k := range keytabSecrets(t, kt) {
			sp.secrets[fmt.Sprintf("key %d of %s", i, filepath.Base(kt))] = k
		}
	}
	sp.grantACLs()
	return sp
}

// setRoles makes the pipeline's daemons run as their roles.
func (p *securePipeline) setRoles() {
	p.roleEnv = map[string][]string{
		"tail":  roleEnv(p.env, p.t, roleTailer),
		"copyd": roleEnv(p.env, p.t, roleCopyd),
		"apply": roleEnv(p.env, p.t, roleApplier),
	}
}

// reverseOf is the reverse pipeline of p for dbs (reverseOf), secured
// alike: its roles, and the ACLs for its own names.
func (p *securePipeline) reverseOf(start int64, dbs ...string) *securePipeline {
	p.t.Helper()
	r := &securePipeline{pipeline: reverseOf(p.t, p.pipeline, start, dbs...), secrets: p.secrets}
	r.aclConf = r.conf
	r.setRoles()
	r.grantACLs()
	return r
}

// grantACLs runs `hivedr acls -apply` on the pipeline's file as the
// stack's admin, and removes the ACLs it made when the test ends.
func (p *securePipeline) grantACLs() {
	t := p.t
	out, code := runHivedrEnv(t, kafkaAs(p.env, t, "admin"), "acls", "-config", p.aclConf, "-apply")
	if code != 0 {
		t.Fatalf("hivedr acls -apply exited %d:\n%s", code, out)
	}
	for _, want := range []string{"User:tailer", "User:copyd", "User:applier", "User:operator", p.prefix + ".events.", "ACL entries in place"} {
		if !strings.Contains(out, want) {
			t.Fatalf("hivedr acls -apply printed no %q:\n%s", want, out)
		}
	}
	// A client of its own, closed after this cleanup (cleanups run last
	// first), not the test's shared one, closed before.
	adm := kadm.NewClient(p.env.Kafka(t))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, r := range kafka.Roles {
			for _, a := range kafka.RoleACLs(r, p.aclNames()) {
				b := kadm.NewACLs().Allow("User:" + string(r)).AllowHosts("*").Operations(a.Operations...)
				switch a.Resource {
				case kafka.ResourceTopic:
					b.Topics(a.Name)
				case kafka.ResourceGroup:
					b.Groups(a.Name)
				case kafka.ResourceTransactionalID:
					if a.Name == (kafka.Topics{Prefix: "hivedr"}).CopydTransactionalIDPrefix() {
						continue // the stack's own grant for the default names
					}
					b.TransactionalIDs(a.Name)
				}
				if a.Pattern == kafka.Prefixed {
					b.ResourcePatternType(kadm.ACLPatternPrefixed)
				}
				if _, err := adm.DeleteACLs(ctx, b); err != nil {
					t.Logf("delete the test's ACLs: %v", err)
				}
			}
		}
	})
}

func (p *securePipeline) aclNames() kafka.Names {
	return kafka.Names{Topics: kafka.Topics{Prefix: p.prefix}, TailerTransactionalID: p.cfg.Tailer.TransactionalID,
		CopydGroup: p.cfg.Copyd.Group, ApplierGroup: p.cfg.Applier.Group}
}

// noSecretIn fails the test if out holds any of the stack's passwords or
// keytab keys.
func (p *securePipeline) noSecretIn(what, out string) {
	p.t.Helper()
	for name, s := range p.secrets {
		if strings.Contains(out, s) {
			p.t.Errorf("%s printed the %s", what, name)
		}
	}
}

// daemonsPrintedNoSecret checks the outputs of the pipeline's daemons.
func (p *securePipeline) daemonsPrintedNoSecret() {
	p.t.Helper()
	for _, pr := range []*proc{p.tail, p.copyd, p.apply} {
		if pr != nil {
			p.noSecretIn("hivedr "+pr.name, pr.out.String())
		}
	}
}

// readSecret is a secret file's content without its line break.
func readSecret(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// runHivedrEnv runs `hivedr args...` to its end with env added, and
// returns its output and exit code.
func runHivedrEnv(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(hivedrBin(t), args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	case err != nil:
		t.Fatalf("hivedr %s: %v\n%s", args[0], err, out)
	}
	return string(out), 0
}

// writeKeytab writes a keytab for principal@realm whose keys come from a
// random password: the KDC knows other keys (or no such principal).
func writeKeytab(t *testing.T, name, principal, realm string) string {
	t.Helper()
	kt := keytab.New()
	pw := rand.Text()
	for _, et := range []int32{etypeID.AES256_CTS_HMAC_SHA1_96, etypeID.AES128_CTS_HMAC_SHA1_96} {
		if err := kt.AddEntry(principal, realm, pw, time.Now(), 1, et); err != nil {
			t.Fatal(err)
		}
	}
	b, err := kt.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// keytabSecrets returns the keys of the keytab at p in the spellings a
// leak would take (hex, base64).
func keytabSecrets(t *testing.T, p string) []string {
	t.Helper()
	kt, err := keytab.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range kt.Entries {
		out = append(out, hex.EncodeToString(e.Key.KeyValue), base64.StdEncoding.EncodeToString(e.Key.KeyValue))
	}
	return out
}
