package config

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hivedr/hivedr/internal/testcerts"
)

// writeCerts writes a CA certificate and a client certificate and key it
// signed, as PEM files, and returns their paths.
func writeCerts(t *testing.T) (ca, cert, key string) {
	f := testcerts.Write(t)
	return f.CA, f.ClientCert, f.ClientKey
}

func TestSecurityKeys(t *testing.T) {
	ca, cert, key := writeCerts(t)
	pw := write(t, "kafka-pw-1\n")
	c, err := parse([]byte(`
kafka:
  brokers: ["k1:9093"]
  sasl: {mechanism: scram-sha-512, user: tailer, password_file: "`+pw+`"}
  tls: {ca_file: "`+ca+`", cert_file: "`+cert+`", key_file: "`+key+`", server_name: kafka.prod}
schema_registry:
  url: https://sr.prod:8081
  user: hivedr
  password: "${SR_PASSWORD}"
  tls: {ca_file: "`+ca+`"}
`), func(name string) (string, bool) {
		return map[string]string{"SR_PASSWORD": "sr-pw"}[name], name == "SR_PASSWORD"
	})
	if err != nil {
		t.Fatal(err)
	}
	k := c.Kafka
	if k.SASL.Mechanism != SASLScramSHA512 {
		t.Errorf("mechanism %q: want it upper-cased to %s", k.SASL.Mechanism, SASLScramSHA512)
	}
	if got, err := k.SASL.SecretPassword(); err != nil || got != "kafka-pw-1" {
		t.Errorf("SecretPassword = %q, %v; want the file's content without its line break", got, err)
	}
	// The file is read again each time: a password rotated in place is used.
	if err := os.WriteFile(pw, []byte("kafka-pw-2"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, _ := k.SASL.SecretPassword(); got != "kafka-pw-2" {
		t.Errorf("after rotation SecretPassword = %q", got)
	}
	tc, err := k.TLS.ClientConfig("kafka.tls")
	if err != nil || tc == nil || tc.RootCAs == nil || len(tc.Certificates) != 1 || tc.ServerName != "kafka.prod" {
		t.Fatalf("kafka TLS config %+v, %v", tc, err)
	}
	if got, want := k.Security(), `SASL_SSL as SCRAM-SHA-512 user "tailer"`; got != want {
		t.Errorf("Security() = %q, want %q", got, want)
	}
	r := c.SchemaRegistry
	if r.URL != "https://sr.prod:8081" || r.User != "hivedr" || !r.TLSOn() || r.TLS.CAFile != ca {
		t.Errorf("schema_registry %+v", r)
	}
	if got, _ := r.SecretPassword(); got != "sr-pw" {
		t.Errorf("registry password %q, want the environment's", got)
	}

	// The URL alone is still a whole registry section, and is printed back
	// as one.
	c, err = parse([]byte("schema_registry: http://sr:8081\n"), osLookup)
	if err != nil || c.SchemaRegistry != (SchemaRegistry{URL: "http://sr:8081"}) {
		t.Fatalf("schema_registry as a URL: %+v, %v", c.SchemaRegistry, err)
	}
	out, err := c.MaskedYAML()
	if err != nil || !strings.Contains(string(out), "\nschema_registry: http://sr:8081\n") {
		t.Errorf("a bare registry URL printed as:\n%s (%v)", out, err)
	}

	for _, c := range []struct {
		k    Kafka
		want string
	}{
		{Kafka{}, "PLAINTEXT (anonymous)"},
		{Kafka{TLS: TLS{Enabled: true}}, "SSL (anonymous)"},
		{Kafka{TLS: TLS{CertFile: "/c.pem"}}, "SSL as the client certificate /c.pem"},
		{Kafka{SASL: SASL{Mechanism: SASLPlain, User: "u"}}, `SASL_PLAINTEXT as PLAIN user "u"`},
		{Kafka{SASL: SASL{Mechanism: SASLOAuthBearer}, TLS: TLS{Enabled: true}}, "SASL_SSL as an OAUTHBEARER token"},
		// A JWT names its subject (the signature is the broker's to check);
		// the token itself is never printed.
		{Kafka{SASL: SASL{Mechanism: SASLOAuthBearer, Token: "eyJhbGciOiJSUzI1NiJ9." + base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"tailer","exp":1}`)) + ".c2ln"}},
			`SASL_PLAINTEXT as an OAUTHBEARER token of subject "tailer"`},
		{Kafka{SASL: SASL{Mechanism: SASLOAuthBearer, Token: "not-a-jwt"}}, "SASL_PLAINTEXT as an OAUTHBEARER token"},
		{Kafka{SASL: SASL{Mechanism: SASLGSSAPI, Kerberos: Kerberos{Principal: "hivedr@EX.COM"}}}, `SASL_PLAINTEXT as GSSAPI principal "hivedr@EX.COM"`},
	} {
		if got := c.k.Security(); got != c.want {
			t.Errorf("Security() of %+v = %q, want %q", c.k, got, c.want)
		}
	}
}

// TestSecurityErrorsNameTheKey: every mistake in the security keys is an
// error naming the key, and never the secret.
func TestSecurityErrorsNameTheKey(t *testing.T) {
	ca, cert, key := writeCerts(t)
	pw := write(t, "the-secret\n")
	empty := write(t, "\n")
	keytab := write(t, "not really a keytab")
	missing := filepath.Join(t.TempDir(), "missing")
	for _, c := range []struct{ yaml, want string }{
		{`kafka: {sasl: {mechanism: SCRAM-SHA-1, user: u, password: p}}`, `kafka.sasl.mechanism: "SCRAM-SHA-1" is not SCRAM-SHA-512, SCRAM-SHA-256, PLAIN, OAUTHBEARER or GSSAPI`},
		{`kafka: {sasl: {user: u, password: p}}`, "kafka.sasl.mechanism: required with user, password"},
		{`kafka: {sasl: {mechanism: SCRAM-SHA-512, password: p}}`, "kafka.sasl.user: required with mechanism SCRAM-SHA-512"},
		{`kafka: {sasl: {mechanism: PLAIN, user: u}}`, "kafka.sasl.password: required (or password_file)"},
		{`kafka: {sasl: {mechanism: PLAIN, user: u, password: p, password_file: "` + pw + `"}}`, "kafka.sasl: password and password_file: give one, not both"},
		{`kafka: {sasl: {mechanism: SCRAM-SHA-256, user: u, password_file: "` + missing + `"}}`, "kafka.sasl.password_file: open " + missing},
		{`kafka: {sasl: {mechanism: SCRAM-SHA-256, user: u, password_file: "` + empty + `"}}`, "kafka.sasl.password_file: " + empty + " is empty"},
		{`kafka: {sasl: {mechanism: SCRAM-SHA-256, user: u, password: p, token: t}}`, "kafka.sasl: token: not used by mechanism SCRAM-SHA-256"},
		{`kafka: {sasl: {mechanism: OAUTHBEARER}}`, "kafka.sasl.token: required (or token_file)"},
		{`kafka: {sasl: {mechanism: OAUTHBEARER, token_file: "` + pw + `", user: u}}`, "kafka.sasl: user: not used by mechanism OAUTHBEARER"},
		{`kafka: {sasl: {mechanism: GSSAPI, kerberos: {keytab: "` + keytab + `"}}}`, "kafka.sasl.kerberos.principal: required with mechanism GSSAPI"},
		{`kafka: {sasl: {mechanism: GSSAPI, kerberos: {principal: hivedr, keytab: "` + keytab + `"}}}`, `kafka.sasl.kerberos.principal: "hivedr" is not name@REALM`},
		{`kafka: {sasl: {mechanism: GSSAPI, kerberos: {principal: hivedr@EX.COM}}}`, "kafka.sasl.kerberos.keytab: required with mechanism GSSAPI"},
		{`kafka: {sasl: {mechanism: GSSAPI, kerberos: {principal: hivedr@EX.COM, keytab: "` + missing + `", krb5_conf: "` + keytab + `"}}}`, "kafka.sasl.kerberos.keytab: stat " + missing},
		{`kafka: {sasl: {mechanism: GSSAPI, kerberos: {principal: hivedr@EX.COM, keytab: "` + keytab + `", krb5_conf: "` + missing + `"}}}`, "kafka.sasl.kerberos.krb5_conf: stat " + missing},
		{`kafka: {sasl: {mechanism: SCRAM-SHA-512, user: u, password: p, kerbros: {}}}`, "kafka.sasl.kerbros: unknown key, did you mean kerberos?"},
		{`kafka: {tls: {ca_file: "` + missing + `"}}`, "kafka.tls.ca_file: open " + missing},
		{`kafka: {tls: {ca_file: "` + pw + `"}}`, "kafka.tls.ca_file: " + pw + " holds no PEM certificate"},
		{`kafka: {tls: {cert_file: "` + cert + `"}}`, "kafka.tls.key_file: required with cert_file"},
		{`kafka: {tls: {key_file: "` + key + `"}}`, "kafka.tls.cert_file: required with key_file"},
		{`kafka: {tls: {cert_file: "` + cert + `", key_file: "` + ca + `"}}`, "kafka.tls.cert_file, key_file:"},
		{`schema_registry: {user: u, password: p}`, "schema_registry.url: required"},
		{`schema_registry: {url: "ftp://sr"}`, `schema_registry: "ftp://sr" is not an http(s) URL`},
		{`schema_registry: {url: "http://sr:8081", tls: {ca_file: "` + ca + `"}}`, "schema_registry.tls: given, but the URL http://sr:8081 is not https://"},
		{`schema_registry: {url: "https://sr:8081", password: the-secret}`, "schema_registry.user: required with a password"},
		{`schema_registry: {url: "https://sr:8081", user: u}`, "schema_registry.password: required (or password_file)"},
		{`schema_registry: {url: "https://sr:8081", user: u, password_file: "` + missing + `"}`, "schema_registry.password_file: open " + missing},
		{`schema_registry: {url: "https://sr:8081", tls: {cert_file: "` + cert + `"}}`, "schema_registry.tls.key_file: required with cert_file"},
		{`schema_registry: [a, b]`, "schema_registry: a list, want a mapping of keys"},
	} {
		_, err := parse([]byte(c.yaml), osLookup)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s:\n  error %v\n  want %q", c.yaml, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "the-secret") {
			t.Errorf("%s: the error shows the secret: %v", c.yaml, err)
		}
	}
}

// TestSecurityMasked: config check's output masks every SASL and registry
// secret (literal or from the environment), shows the files that hold
// them, and loads again.
func TestSecurityMasked(t *testing.T) {
	pw := write(t, "file-pw\n")
	lookup := func(name string) (string, bool) {
		v, ok := map[string]string{"KAFKA_PASSWORD": "env-kafka-pw", "SR_PASSWORD": "env-sr-pw"}[name]
		return v, ok
	}
	c, err := parse([]byte(`
kafka:
  brokers: ["k1:9093"]
  sasl: {mechanism: PLAIN, user: tailer, password: "${KAFKA_PASSWORD}"}
  tls: {enabled: true}
schema_registry: {url: "https://sr:8081", user: hivedr, password: "${SR_PASSWORD}"}
`), lookup)
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.MaskedYAML()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"env-kafka-pw", "env-sr-pw"} {
		if strings.Contains(string(out), s) {
			t.Errorf("the secret %s is in the output:\n%s", s, out)
		}
	}
	if n := strings.Count(string(out), "password: '***'"); n != 2 {
		t.Errorf("%d masked passwords, want 2:\n%s", n, out)
	}
	if _, err := Load(write(t, string(out))); err != nil {
		t.Errorf("the output does not load: %v\n%s", err, out)
	}

	c, err = parse([]byte(`
kafka:
  sasl: {mechanism: OAUTHBEARER, token: tok-SECRET}
schema_registry: {url: "https://sr:8081", user: hivedr, password_file: "`+pw+`"}
`), osLookup)
	if err != nil {
		t.Fatal(err)
	}
	out, err = c.MaskedYAML()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "tok-SECRET") || !strings.Contains(string(out), "token: '***'") {
		t.Errorf("the OAUTHBEARER token is not masked:\n%s", out)
	}
	if !strings.Contains(string(out), "password_file: "+pw) {
		t.Errorf("the password file's path is not shown:\n%s", out)
	}
}

// TestMetastoreTLSKeys: source.metastore_tls and applier.metastore_tls
// give each metastore's options its own TLS configuration, none when off;
// a CA file that does not read is an error naming the key, at load and,
// should it go after, when the options are made (never TLS quietly off).
func TestMetastoreTLSKeys(t *testing.T) {
	ca, _, _ := writeCerts(t)
	c, err := parse([]byte(`
source:
  metastore: hms-src.prod:9083
  metastore_tls: {ca_file: "`+ca+`"}
applier:
  metastore: hms-dr.prod:9083
`), osLookup)
	if err != nil {
		t.Fatal(err)
	}
	src, dr := c.SourceMetastoreOptions(), c.DRMetastoreOptions()
	if src.TLS == nil || src.TLS.RootCAs == nil || src.TLSError != nil || src.TLSKey != "source.metastore_tls" {
		t.Errorf("source options: TLS %v (roots %v), error %v, key %q; want the CA's, under source.metastore_tls",
			src.TLS, src.TLS != nil && src.TLS.RootCAs != nil, src.TLSError, src.TLSKey)
	}
	if !c.Source.MetastoreTLS.Enabled {
		t.Error("source.metastore_tls.enabled is not shown as in effect")
	}
	if dr.TLS != nil || dr.TLSError != nil || dr.TLSKey != "applier.metastore_tls" {
		t.Errorf("DR options: TLS %v, error %v, key %q; want none, under applier.metastore_tls", dr.TLS, dr.TLSError, dr.TLSKey)
	}

	if err := os.Remove(ca); err != nil {
		t.Fatal(err)
	}
	if o := c.SourceMetastoreOptions(); o.TLS != nil || o.TLSError == nil || !strings.Contains(o.TLSError.Error(), "source.metastore_tls.ca_file: open "+ca) {
		t.Errorf("options with the CA file gone: TLS %v, error %v; want no TLS and an error naming source.metastore_tls.ca_file", o.TLS, o.TLSError)
	}
	for _, y := range []struct{ yaml, want string }{
		{`source: {metastore: "h:9083", metastore_tls: {ca_file: "` + ca + `"}}`, "source.metastore_tls.ca_file: open " + ca},
		{`applier: {metastore: "h:9083", metastore_tls: {ca_file: "` + ca + `"}}`, "applier.metastore_tls.ca_file: open " + ca},
	} {
		if _, err := parse([]byte(y.yaml), osLookup); err == nil || !strings.Contains(err.Error(), y.want) {
			t.Errorf("%s: error %v, want %q", y.yaml, err, y.want)
		}
	}
}
