package e2e

import (
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

	wl "github.com/hivedr/hivedr/e2e/workload"
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
	u := uniq(t)
	db := "sg_sales_" + u
	ctx := ctxFor(t, 10*time.Minute)
	src, dr := env.HMS(t, testenv.Source), env.HMS(t, testenv.DR)
	srcFS, drFS := pipelineFS(t, env)
	p := newSecurePipeline(t, env, []string{db}, currentEventID(t, ctx, src), kafkaGSSAPI(t, env))
	w := wl.NewSource(src, srcFS, env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL"))
	spec := wl.TableSpec{Columns: []string{"id bigint", "note string"}, PartitionKeys: []string{"dt"}}
	p.startAll()
	if err := w.CreateDatabase(ctx, db); err != nil {
		t.Fatal(err)
	}
	if err := w.CreateTable(ctx, db, "orders", spec); err != nil {
		t.Fatal(err)
	}
	if _, err := w.AddPartitions(ctx, db, "orders", [][]string{{"2026-12-01"}, {"2026-12-02"}}, 30); err != nil {
		t.Fatal(err)
	}
	p.converge(ctx, src, dr, srcFS, drFS, 3*time.Minute)
	eventually(t, 2*time.Minute, "applier caught up", func() bool { return p.caughtUp(ctx) })
	for _, pr := range []*proc{p.tail, p.copyd, p.apply} {
		// The daemons say whom they reach Kafka as when they start.
		if out := strings.ReplaceAll(pr.out.String(), `\"`, `"`); !strings.Contains(out, `GSSAPI principal "hivedr-`+roleName(pr.name)) {
			t.Errorf("hivedr %s did not say it reached Kafka with GSSAPI as hivedr-%s:\n%s", pr.name, roleName(pr.name), tail(out, 15))
		}
	}
	topic := kafka.Topics{Prefix: p.prefix}.Events(db)
	out, code := runHivedrEnv(t, nil, "cat", "-config", p.conf, "-n", "1", topic)
	if code != 0 || !strings.Contains(out, `"type":"io.hivedr.MetastoreEvent"`) {
		t.Fatalf("hivedr cat over GSSAPI as the operator exited %d:\n%s", code, out)
	}

	// Work left for the applier, then the applier as copyd's principal.
	p.apply.stop(t)
	adm := env.KafkaAdmin(t)
	before := mustEnds(t, ctx, adm, topic)
	if _, err := w.AddPartitions(ctx, db, "orders", [][]string{{"2026-12-03"}}, 40); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "the new events published", func() bool {
		p.checkAliveOf(p.tail, p.copyd)
		return mustEnds(t, ctx, adm, topic) > before
	})
	applierGroup := p.prefix + "-applier"
	offsets := groupOffsets(t, ctx, adm, applierGroup)
	pr := startHivedrEnv(t, "apply", append(roleEnv(env, t, roleApplier),
		krbAs(env, t, testenv.CopydPrincipal, env.Keytab(t, testenv.CopydPrincipal))...),
		"apply", "-config", p.conf, "-state-dir", filepath.Join(t.TempDir(), "apply"))
	if code := pr.wait(t, 2*time.Minute); code != 1 {
		t.Fatalf("hivedr apply as copyd's principal exited %d, want 1:\n%s", code, tail(pr.out.String(), 30))
	}
	refused := strings.ReplaceAll(pr.out.String(), `\"`, `"`)
	for _, want := range []string{"AUTHORIZATION_FAILED", `GSSAPI principal "` + testenv.CopydPrincipal + "@" + env.Get(t, "HIVEDR_KRB_REALM")} {
		if !strings.Contains(refused, want) {
			t.Errorf("the refused applier's error does not say %q:\n%s", want, tail(refused, 15))
		}
	}
	p.noSecretIn("hivedr apply as copyd", pr.out.String())
	if got := groupOffsets(t, ctx, adm, applierGroup); got != offsets {
		t.Errorf("the refused applier moved the group's offsets: %s -> %s", offsets, got)
	}

	p.startApply()
	p.converge(ctx, src, dr, srcFS, drFS, 3*time.Minute)
	eventually(t, 2*time.Minute, "applier caught up", func() bool { return p.caughtUp(ctx) })
	p.daemonsPrintedNoSecret()
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
	u := uniq(t)
	db := "so_sales_" + u
	ctx := ctxFor(t, 10*time.Minute)
	src, dr := env.HMS(t, testenv.Source), env.HMS(t, testenv.DR)
	srcFS, drFS := pipelineFS(t, env)
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
	p := newSecurePipeline(t, env, []string{db}, currentEventID(t, ctx, src), func(c *pipelineConf) {
		c.kafkaSecurity = fmt.Sprintf(`  sasl: {mechanism: OAUTHBEARER, token_file: "${HIVEDR_KAFKA_TOKEN_FILE}"}
  tls: {ca_file: %q}`, env.Get(t, "HIVEDR_TLS_CA"))
	})
	for cmd, role := range map[string]string{"tail": roleTailer, "copyd": roleCopyd, "apply": roleApplier} {
		p.roleEnv[cmd] = append(p.roleEnv[cmd], "HIVEDR_KAFKA_TOKEN_FILE="+tokenFor(role, role, time.Hour, nil))
	}
	w := wl.NewSource(src, srcFS, env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL"))
	spec := wl.TableSpec{Columns: []string{"id bigint", "note string"}, PartitionKeys: []string{"dt"}}
	p.startAll()
	if err := w.CreateDatabase(ctx, db); err != nil {
		t.Fatal(err)
	}
	if err := w.CreateTable(ctx, db, "orders", spec); err != nil {
		t.Fatal(err)
	}
	if _, err := w.AddPartitions(ctx, db, "orders", [][]string{{"2026-12-01"}, {"2026-12-02"}}, 30); err != nil {
		t.Fatal(err)
	}
	p.converge(ctx, src, dr, srcFS, drFS, 3*time.Minute)
	eventually(t, 2*time.Minute, "applier caught up", func() bool { return p.caughtUp(ctx) })
	for _, pr := range []*proc{p.tail, p.copyd, p.apply} {
		if out := strings.ReplaceAll(pr.out.String(), `\"`, `"`); !strings.Contains(out, `OAUTHBEARER token of subject "`+roleName(pr.name)+`"`) {
			t.Errorf("hivedr %s did not say it reached Kafka with an OAUTHBEARER token of %s:\n%s", pr.name, roleName(pr.name), tail(out, 15))
		}
	}

	p.apply.stop(t)
	adm := env.KafkaAdmin(t)
	topic := kafka.Topics{Prefix: p.prefix}.Events(db)
	before := mustEnds(t, ctx, adm, topic)
	if _, err := w.AddPartitions(ctx, db, "orders", [][]string{{"2026-12-03"}}, 40); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "the new events published", func() bool {
		p.checkAliveOf(p.tail, p.copyd)
		return mustEnds(t, ctx, adm, topic) > before
	})
	applierGroup := p.prefix + "-applier"
	offsets := groupOffsets(t, ctx, adm, applierGroup)
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, token string
		want        []string
	}{
		{"expired token", tokenFor("expired", roleApplier, -time.Minute, nil), []string{"SASL_AUTHENTICATION_FAILED", `subject "applier"`}},
		{"token of another key", tokenFor("forged", roleApplier, time.Hour, other), []string{"SASL_AUTHENTICATION_FAILED", `subject "applier"`}},
		{"the operator's token", tokenFor("operator-as-applier", roleOperator, time.Hour, nil), []string{"AUTHORIZATION_FAILED", `subject "operator"`}},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			pr := startHivedrEnv(t, "apply", append(roleEnv(env, t, roleApplier), "HIVEDR_KAFKA_TOKEN_FILE="+c.token),
				"apply", "-config", p.conf, "-state-dir", filepath.Join(t.TempDir(), "apply"))
			if code := pr.wait(t, 2*time.Minute); code != 1 {
				t.Fatalf("hivedr apply with the %s exited %d, want 1:\n%s", c.name, code, tail(pr.out.String(), 30))
			}
			out := strings.ReplaceAll(pr.out.String(), `\"`, `"`)
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("hivedr apply with the %s does not say %q:\n%s", c.name, w, tail(out, 15))
				}
			}
			if tok := strings.TrimSpace(readSecret(t, c.token)); strings.Contains(pr.out.String(), tok) {
				t.Errorf("hivedr apply printed its token")
			}
			if got := groupOffsets(t, ctx, adm, applierGroup); got != offsets {
				t.Errorf("the refused applier moved the group's offsets: %s -> %s", offsets, got)
			}
		})
	}

	p.startApply()
	p.converge(ctx, src, dr, srcFS, drFS, 3*time.Minute)
	eventually(t, 2*time.Minute, "applier caught up", func() bool { return p.caughtUp(ctx) })
	for cmd := range p.roleEnv {
		for _, kv := range p.roleEnv[cmd] {
			if f, ok := strings.CutPrefix(kv, "HIVEDR_KAFKA_TOKEN_FILE="); ok {
				p.secrets[cmd+"'s token"] = readSecret(t, f)
			}
		}
	}
	p.daemonsPrintedNoSecret()
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
