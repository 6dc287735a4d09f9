package e2e

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/internal/testenv"
)

// TestSecureKafkaGSSAPI runs the pipeline on the secured stack with Kafka
// authenticated by Kerberos (SASL GSSAPI over SASL_SSL) instead of SCRAM:
// each daemon logs in once, as its own principal hivedr-<role>, and that
// one identity reaches the kerberized metastores, both HDFS clusters and
// the broker, whose principal mapping makes it Kafka user <role>, under
// the same ACLs the SCRAM users have. A database with partitions and
// files converges on DR, and the operator reads the topic over GSSAPI
// (`hivedr cat`). Then the applier, started as copyd's principal, is
// refused by the broker's ACLs, saying which principal it was, and
// changes nothing; as itself it finishes the work. No process printed a
// password or a keytab key.
func TestSecureKafkaGSSAPI(t *testing.T) {
	env := testenv.RequireSecure(t)
	r := newSASLRun(t, env, "sg_sales_", kafkaGSSAPI(t, env), nil)
	r.converge(func(role string) string { return `GSSAPI principal "hivedr-` + role })
	out, code := runHivedrEnv(t, nil, "cat", "-config", r.p.conf, "-n", "1", r.topic)
	if code != 0 || !strings.Contains(out, `"type":"io.hivedr.MetastoreEvent"`) {
		t.Fatalf("hivedr cat over GSSAPI as the operator exited %d:\n%s", code, out)
	}
	r.leaveWorkForApplier()
	r.refused("copyd's principal", krbAs(env, t, testenv.CopydPrincipal, env.Keytab(t, testenv.CopydPrincipal)),
		"AUTHORIZATION_FAILED", `GSSAPI principal "`+testenv.CopydPrincipal+"@"+env.Get(t, "HIVEDR_KRB_REALM"))
	r.finish()
}

// saslRun is the scenario of the TestSecureKafka* tests: a secured
// pipeline reaching Kafka one way (opts), a database with partitions and
// files replicated, then an applier started with a wrong identity, and the
// right one finishing the work.
type saslRun struct {
	t       *testing.T
	ctx     context.Context
	env     *testenv.Env
	p       *securePipeline
	w       *wl.Source
	db      string
	topic   string
	src, dr *hms.Client
	srcFS   *fs.HDFS
	drFS    *fs.HDFS
	offsets string // the applier group's, before the refusals
	adm     *kadm.Client
}

// newSASLRun makes the pipeline for a database named prefix+uniq; setRoles
// (if any) adds to the daemons' environments once it exists.
func newSASLRun(t *testing.T, env *testenv.Env, prefix string, opt func(*pipelineConf), setRoles func(p *securePipeline)) *saslRun {
	r := &saslRun{t: t, env: env, db: prefix + uniq(t), ctx: ctxFor(t, 10*time.Minute),
		src: env.HMS(t, testenv.Source), dr: env.HMS(t, testenv.DR), adm: env.KafkaAdmin(t)}
	r.srcFS, r.drFS = pipelineFS(t, env)
	r.p = newSecurePipeline(t, env, []string{r.db}, currentEventID(t, r.ctx, r.src), opt)
	if setRoles != nil {
		setRoles(r.p)
	}
	r.w = wl.NewSource(r.src, r.srcFS, env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL"))
	r.topic = kafka.Topics{Prefix: r.p.prefix}.Events(r.db)
	return r
}

// converge starts the daemons, writes a table with two partitions and
// their files, waits for DR to equal the source and the group to be
// caught up, and checks that each daemon said who it is to Kafka (said:
// what its log names, given its role).
func (r *saslRun) converge(said func(role string) string) {
	t, ctx := r.t, r.ctx
	spec := wl.TableSpec{Columns: []string{"id bigint", "note string"}, PartitionKeys: []string{"dt"}}
	r.p.startAll()
	if err := r.w.CreateDatabase(ctx, r.db); err != nil {
		t.Fatal(err)
	}
	if err := r.w.CreateTable(ctx, r.db, "orders", spec); err != nil {
		t.Fatal(err)
	}
	if _, err := r.w.AddPartitions(ctx, r.db, "orders", [][]string{{"2026-12-01"}, {"2026-12-02"}}, 30); err != nil {
		t.Fatal(err)
	}
	r.p.converge(ctx, r.src, r.dr, r.srcFS, r.drFS, 3*time.Minute)
	eventually(t, 2*time.Minute, "applier caught up", func() bool { return r.p.caughtUp(ctx) })
	for _, pr := range []*proc{r.p.tail, r.p.copyd, r.p.apply} {
		// The daemons say whom they reach Kafka as when they start.
		want := said(roleName(pr.name))
		if out := strings.ReplaceAll(pr.out.String(), `\"`, `"`); !strings.Contains(out, want) {
			t.Errorf("hivedr %s did not say it reached Kafka as %s:\n%s", pr.name, want, tail(out, 15))
		}
	}
}

// leaveWorkForApplier stops the applier and adds a partition that the
// tailer publishes and copyd copies: what is left is the applier's.
func (r *saslRun) leaveWorkForApplier() {
	t, ctx := r.t, r.ctx
	r.p.apply.stop(t)
	before := mustEnds(t, ctx, r.adm, r.topic)
	if _, err := r.w.AddPartitions(ctx, r.db, "orders", [][]string{{"2026-12-03"}}, 40); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "the new events published", func() bool {
		r.p.checkAliveOf(r.p.tail, r.p.copyd)
		return mustEnds(t, ctx, r.adm, r.topic) > before
	})
	r.offsets = groupOffsets(t, ctx, r.adm, r.p.prefix+"-applier")
}

// refused starts the applier as itself with change added to its
// environment, and checks that it exits 1 saying each of want, prints no
// secret, and leaves the group's offsets where they were.
func (r *saslRun) refused(name string, change []string, want ...string) {
	r.t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
		pr := startHivedrEnv(t, "apply", append(roleEnv(r.env, t, roleApplier), change...),
			"apply", "-config", r.p.conf, "-state-dir", filepath.Join(t.TempDir(), "apply"))
		if code := pr.wait(t, 2*time.Minute); code != 1 {
			t.Fatalf("hivedr apply with %s exited %d, want 1:\n%s", name, code, tail(pr.out.String(), 30))
		}
		out := strings.ReplaceAll(pr.out.String(), `\"`, `"`)
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("hivedr apply with %s does not say %q:\n%s", name, w, tail(out, 15))
			}
		}
		r.p.noSecretIn("hivedr apply with "+name, pr.out.String())
		if got := groupOffsets(t, r.ctx, r.adm, r.p.prefix+"-applier"); got != r.offsets {
			t.Errorf("the refused applier moved the group's offsets: %s -> %s", r.offsets, got)
		}
	})
}

// finish starts the applier as itself: it applies what was left, and no
// daemon printed a secret.
func (r *saslRun) finish() {
	r.p.startApply()
	r.p.converge(r.ctx, r.src, r.dr, r.srcFS, r.drFS, 3*time.Minute)
	eventually(r.t, 2*time.Minute, "applier caught up", func() bool { return r.p.caughtUp(r.ctx) })
	r.p.daemonsPrintedNoSecret()
}

// roleName is the secured stack's role of a daemon's command.
func roleName(cmd string) string {
	switch cmd {
	case "tail":
		return roleTailer
	case "apply":
		return roleApplier
	}
	return cmd
}

// TestSecureKafkaOAuthBearer runs the pipeline on the secured stack with
// Kafka authenticated by OAUTHBEARER: each daemon reads a JWT from its
// token file (kafka.sasl.token_file, read at every authentication), minted
// for its role as an identity provider would (RS256 with the stack's
// signing key, the broker validating it against its JWKS; the subject is
// the Kafka user, so the roles' ACLs hold). A database with partitions and
// files converges on DR; then the applier is refused with an expired
// token, with a token another key signed, and with the operator's token
// (the ACLs), each naming what it was and changing nothing, and finishes
// the work with its own.
func TestSecureKafkaOAuthBearer(t *testing.T) {
	env := testenv.RequireSecure(t)
	idp := newTokenIssuer(t, env)
	tokens := t.TempDir()
	tokenFor := func(name, sub string, ttl time.Duration, key *rsa.PrivateKey) string {
		p := filepath.Join(tokens, name)
		if err := os.WriteFile(p, []byte(idp.mint(t, sub, ttl, key)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Setenv("HIVEDR_KAFKA_TOKEN_FILE", tokenFor("operator", roleOperator, time.Hour, nil))
	r := newSASLRun(t, env, "so_sales_", func(c *pipelineConf) {
		c.kafkaSecurity = fmt.Sprintf(`  sasl: {mechanism: OAUTHBEARER, token_file: "${HIVEDR_KAFKA_TOKEN_FILE}"}
  tls: {ca_file: %q}`, env.Get(t, "HIVEDR_TLS_CA"))
	}, func(p *securePipeline) {
		for cmd, role := range map[string]string{"tail": roleTailer, "copyd": roleCopyd, "apply": roleApplier} {
			f := tokenFor(role, role, time.Hour, nil)
			p.roleEnv[cmd] = append(p.roleEnv[cmd], "HIVEDR_KAFKA_TOKEN_FILE="+f)
			p.secrets[role+"'s token"] = readSecret(t, f)
		}
	})
	r.converge(func(role string) string { return `OAUTHBEARER token of subject "` + role + `"` })
	r.leaveWorkForApplier()
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, token string
		want        []string
	}{
		{"an expired token", tokenFor("expired", roleApplier, -time.Minute, nil), []string{"SASL_AUTHENTICATION_FAILED", `subject "applier"`}},
		{"a token of another key", tokenFor("forged", roleApplier, time.Hour, other), []string{"SASL_AUTHENTICATION_FAILED", `subject "applier"`}},
		{"the operator's token", tokenFor("operator-as-applier", roleOperator, time.Hour, nil), []string{"AUTHORIZATION_FAILED", `subject "operator"`}},
	} {
		r.p.secrets[c.name] = readSecret(t, c.token)
		r.refused(c.name, []string{"HIVEDR_KAFKA_TOKEN_FILE=" + c.token}, c.want...)
	}
	r.finish()
}

// tokenIssuer mints JWTs as the secured stack's identity provider: RS256
// with its signing key (HIVEDR_KAFKA_OAUTH_KEY), its key ID, issuer and
// audience.
type tokenIssuer struct {
	key                *rsa.PrivateKey
	kid, issuer, audie string
}

func newTokenIssuer(t *testing.T, env *testenv.Env) *tokenIssuer {
	t.Helper()
	b, err := os.ReadFile(env.Get(t, "HIVEDR_KAFKA_OAUTH_KEY"))
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatalf("%s holds no PEM block", env.Get(t, "HIVEDR_KAFKA_OAUTH_KEY"))
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		t.Fatalf("the stack's OAUTHBEARER key is a %T, want RSA", k)
	}
	return &tokenIssuer{key: rk, kid: env.Get(t, "HIVEDR_KAFKA_OAUTH_KID"),
		issuer: env.Get(t, "HIVEDR_KAFKA_OAUTH_ISSUER"), audie: env.Get(t, "HIVEDR_KAFKA_OAUTH_AUDIENCE")}
}

// mint returns a token for sub that expires ttl from now (in the past
// when ttl is negative), signed with key (nil: the issuer's).
func (i *tokenIssuer) mint(t *testing.T, sub string, ttl time.Duration, key *rsa.PrivateKey) string {
	t.Helper()
	if key == nil {
		key = i.key
	}
	now := time.Now()
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	iat := now.Add(-time.Minute)
	if ttl < 0 {
		iat = now.Add(2 * ttl)
	}
	signed := enc(map[string]string{"alg": "RS256", "typ": "JWT", "kid": i.kid}) + "." +
		enc(map[string]any{"sub": sub, "iss": i.issuer, "aud": i.audie, "iat": iat.Unix(), "exp": now.Add(ttl).Unix(), "scope": "kafka"})
	sum := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig)
}
