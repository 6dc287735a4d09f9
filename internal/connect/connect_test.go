package connect

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hivedr/hivedr/internal/krb/krbtest"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/testcerts"
)

func writeFile(t *testing.T, p, body string) string {
	t.Helper()
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// listTopics asks the cluster k describes for its topics with a client
// made by Kafka(k).
func listTopics(t *testing.T, k config.Kafka) error {
	t.Helper()
	opts, err := Kafka(k)
	if err != nil {
		t.Fatal(err)
	}
	return listTopicsWith(t, opts)
}

// listTopicsWith asks for the topics with a new client of opts.
func listTopicsWith(t *testing.T, opts []kgo.Opt) error {
	t.Helper()
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_, err = kadm.NewClient(cl).ListTopics(ctx)
	return err
}

// TestKafkaSASLOverTLS: Kafka(k) speaks SCRAM-SHA-512 and PLAIN over TLS
// verified with the configured CA, with a client certificate when given,
// reads the password file at every new connection (a rotated password is
// used without a new configuration); a wrong password is refused, and an
// unknown server certificate is an auth error.
func TestKafkaSASLOverTLS(t *testing.T) {
	certs := testcerts.Write(t)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.TLS(certs.Server(tls.VerifyClientCertIfGiven)), kfake.EnableSASL(),
		kfake.Superuser("SCRAM-SHA-512", "admin", "admin-pw"), kfake.Superuser("SCRAM-SHA-512", "tailer", "pw-1"),
		kfake.Superuser("PLAIN", "plainuser", "plain-pw"), kfake.SeedTopics(1, "hivedr.manifests"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dir := t.TempDir()
	pw := writeFile(t, filepath.Join(dir, "pw"), "pw-1\n")
	k := config.Kafka{Brokers: c.ListenAddrs(),
		SASL: config.SASL{Mechanism: config.SASLScramSHA512, User: "tailer", PasswordFile: pw},
		TLS:  config.TLS{CAFile: certs.CA}}
	opts, err := Kafka(k) // made once: the mechanism reads the file at each authentication
	if err != nil {
		t.Fatal(err)
	}
	if err := listTopicsWith(t, opts); err != nil {
		t.Fatalf("SCRAM-SHA-512 over TLS: %v", err)
	}

	plain := k
	plain.SASL = config.SASL{Mechanism: config.SASLPlain, User: "plainuser", Password: "plain-pw"}
	if err := listTopics(t, plain); err != nil {
		t.Fatalf("PLAIN over TLS: %v", err)
	}
	mtls := k
	mtls.TLS.CertFile, mtls.TLS.KeyFile = certs.ClientCert, certs.ClientKey
	if err := listTopics(t, mtls); err != nil {
		t.Fatalf("SCRAM-SHA-512 over mutual TLS: %v", err)
	}

	// kfake hangs up on a wrong password; Kafka answers
	// SASL_AUTHENTICATION_FAILED (e2e TestSecureRefusals), which Explain
	// names the user of.
	writeFile(t, pw, "not-the-password")
	if err := listTopics(t, k); err == nil {
		t.Fatal("a wrong password was accepted")
	}
	err = fmt.Errorf("create topic x: %w", kerr.SaslAuthenticationFailed)
	msg := Explain(&config.Config{Kafka: k}, err).Error()
	if !strings.Contains(msg, `SASL_SSL as SCRAM-SHA-512 user "tailer"`) || strings.Contains(msg, "not-the-password") {
		t.Errorf("Explain: %s", msg)
	}

	// Rotated in place: the cluster's password, then the file.
	adm, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DialTLSConfig(tlsConfig(t, certs.CA)),
		kgo.SASL(mechanismOf(t, config.SASL{Mechanism: config.SASLScramSHA512, User: "admin", Password: "admin-pw"})))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	res, err := kadm.NewClient(adm).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "tailer", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "pw-2"}})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("rotate tailer's password: %v", err)
	}
	writeFile(t, pw, "pw-2\n")
	if err := listTopicsWith(t, opts); err != nil {
		t.Fatalf("after rotating the password and its file: %v", err)
	}

	other := k
	other.TLS.CAFile = certs.OtherCA
	if err := listTopics(t, other); !IsAuthError(err) {
		t.Fatalf("a server certificate of another CA: %v, want an auth error", err)
	}
}

// TestKafkaMutualTLS: a broker that requires client certificates serves
// a client with the configured one and refuses one without.
func TestKafkaMutualTLS(t *testing.T) {
	certs := testcerts.Write(t)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.TLS(certs.Server(tls.RequireAndVerifyClientCert)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	k := config.Kafka{Brokers: c.ListenAddrs(), TLS: config.TLS{CAFile: certs.CA, CertFile: certs.ClientCert, KeyFile: certs.ClientKey}}
	if err := listTopics(t, k); err != nil {
		t.Fatalf("with the client certificate: %v", err)
	}
	k.TLS.CertFile, k.TLS.KeyFile = "", ""
	if err := listTopics(t, k); !IsAuthError(err) {
		t.Fatalf("without a client certificate: %v, want an auth error", err)
	}
}

func tlsConfig(t *testing.T, ca string) *tls.Config {
	t.Helper()
	c, err := config.TLS{CAFile: ca}.ClientConfig("test")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mechanismOf(t *testing.T, s config.SASL) sasl.Mechanism {
	t.Helper()
	m, err := mechanism(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestMechanisms(t *testing.T) {
	kt := filepath.Join(t.TempDir(), "keytab")
	for _, s := range []config.SASL{
		{Mechanism: config.SASLScramSHA256, User: "u", Password: "p"},
		{Mechanism: config.SASLScramSHA512, User: "u", Password: "p"},
		{Mechanism: config.SASLPlain, User: "u", Password: "p"},
		{Mechanism: config.SASLOAuthBearer, Token: "t"},
		{Mechanism: config.SASLGSSAPI, Kerberos: config.Kerberos{Principal: "hivedr@EX.COM", Keytab: kt, Krb5Conf: kt, ServiceName: "kafka"}},
	} {
		if got := mechanismOf(t, s).Name(); got != s.Mechanism {
			t.Errorf("mechanism %s is named %s", s.Mechanism, got)
		}
	}
	if m, err := mechanism(config.SASL{}); m != nil || err != nil {
		t.Errorf("no mechanism: %v, %v", m, err)
	}
}

// TestRegistryTLSAndBasicAuth: Registry(r) reaches an HTTPS registry that
// requires a client certificate of its CA and basic auth, reading the
// password file at every request; a refusal is an auth error that
// Explain names the HTTP status and user of.
func TestRegistryTLSAndBasicAuth(t *testing.T) {
	certs := testcerts.Write(t)
	var password atomic.Value
	password.Store("sr-pw-1")
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "hivedr" || p != password.Load().(string) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error_code":40101,"message":"Unauthorized"}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`["a-subject"]`))
	}))
	srv.TLS = certs.Server(tls.RequireAndVerifyClientCert)
	srv.StartTLS()
	defer srv.Close()
	pw := writeFile(t, filepath.Join(t.TempDir(), "pw"), "sr-pw-1\n")
	r := config.SchemaRegistry{URL: srv.URL, User: "hivedr", PasswordFile: pw,
		TLS: config.TLS{CAFile: certs.CA, CertFile: certs.ClientCert, KeyFile: certs.ClientKey}}
	opts, err := Registry(r)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := sr.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if s, err := cl.Subjects(ctx); err != nil || len(s) != 1 {
		t.Fatalf("subjects: %v, %v", s, err)
	}
	password.Store("sr-pw-2")
	writeFile(t, pw, "sr-pw-2")
	if _, err := cl.Subjects(ctx); err != nil {
		t.Fatalf("after rotating the password and its file, the same client: %v", err)
	}
	writeFile(t, pw, "wrong")
	_, err = cl.Subjects(ctx)
	if !IsAuthError(err) {
		t.Fatalf("a wrong password: %v, want an auth error", err)
	}
	if msg := Explain(&config.Config{SchemaRegistry: r}, err).Error(); !strings.Contains(msg, `HTTP 401 from the schema registry as user "hivedr"`) {
		t.Errorf("Explain: %s", msg)
	}

	noCert := r
	noCert.TLS.CertFile, noCert.TLS.KeyFile = "", ""
	writeFile(t, pw, "sr-pw-2")
	opts, err = Registry(noCert)
	if err != nil {
		t.Fatal(err)
	}
	cl, err = sr.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Subjects(ctx); !IsAuthError(err) {
		t.Fatalf("without a client certificate: %v, want an auth error", err)
	}
}

func TestIsAuthError(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("connection refused"), false},
		{kerr.NotCoordinator, false},
		{kerr.SaslAuthenticationFailed, true},
		{&kgo.ErrGroupSession{Err: kerr.GroupAuthorizationFailed}, true},
		{kerr.TopicAuthorizationFailed, true},
		{kerr.TransactionalIDAuthorizationFailed, true},
		{kerr.ClusterAuthorizationFailed, true},
		{&sr.ResponseError{StatusCode: http.StatusUnauthorized}, true},
		{&sr.ResponseError{StatusCode: http.StatusForbidden}, true},
		{&sr.ResponseError{StatusCode: http.StatusNotFound}, false},
		{tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, true},
	} {
		if got := IsAuthError(c.err); got != c.want {
			t.Errorf("IsAuthError(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// TestCertCheckVerdict: a server that requires a client certificate
// answers certCheck's probe (a TLS 1.3 handshake without one, then a read)
// with an alert that IsAuthError knows; one that only requests a
// certificate answers nothing, and the probe says nothing either. Through
// the transport, a request to the first fails as an auth error naming the
// certificate, whichever way the refusal first reached the client.
func TestCertCheckVerdict(t *testing.T) {
	certs := testcerts.Write(t)
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`[]`)) })
	for _, c := range []struct {
		name  string
		auth  tls.ClientAuthType
		fails bool
	}{
		{"required", tls.RequireAndVerifyClientCert, true},
		{"requested", tls.VerifyClientCertIfGiven, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewUnstartedServer(ok)
			srv.TLS = certs.Server(c.auth)
			srv.TLS.MinVersion = tls.VersionTLS13
			srv.StartTLS()
			defer srv.Close()
			tc, err := config.TLS{CAFile: certs.CA}.ClientConfig("schema_registry.tls")
			if err != nil {
				t.Fatal(err)
			}
			cc := newCertCheck(tc)
			host, port, _ := strings.Cut(strings.TrimPrefix(srv.URL, "https://"), ":")
			v := cc.verdict(context.Background(), host, port)
			if (v != nil) != c.fails || (v != nil && !IsAuthError(v)) {
				t.Fatalf("verdict: %v; want an auth error: %v", v, c.fails)
			}
			resp, err := (&http.Client{Transport: cc}).Get(srv.URL)
			if c.fails {
				if err == nil || !IsAuthError(err) || !strings.Contains(err.Error(), "certificate required") {
					t.Fatalf("request: %v; want an auth error naming the certificate", err)
				}
				if !cc.asked.Load() {
					t.Error("the server's CertificateRequest went unnoticed")
				}
				return
			}
			if err != nil {
				t.Fatalf("request: %v", err)
			}
			resp.Body.Close()
		})
	}
}

// resetTransport fails every request as a write into a reset connection.
type resetTransport struct{}

func (resetTransport) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, &net.OpError{Op: "write", Net: "tcp", Err: syscall.ECONNRESET}
}

// TestCertCheckReset: the refusal that reaches the request as a reset
// (the race of TLS 1.3: the server's alert lost behind its RST) comes out
// as the server's alert, an auth error, once the server asked for a
// certificate; before that, or from a server that does not require one,
// the reset stays a reset (an outage to wait out).
func TestCertCheckReset(t *testing.T) {
	certs := testcerts.Write(t)
	tc, err := config.TLS{CAFile: certs.CA}.ClientConfig("schema_registry.tls")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name        string
		auth        tls.ClientAuthType
		asked, want bool
	}{
		{"required and asked", tls.RequireAndVerifyClientCert, true, true},
		{"required, not asked yet", tls.RequireAndVerifyClientCert, false, false},
		{"requested", tls.VerifyClientCertIfGiven, true, false},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			srv := httptest.NewUnstartedServer(http.NotFoundHandler())
			srv.TLS = certs.Server(c.auth)
			srv.StartTLS()
			defer srv.Close()
			cc := newCertCheck(tc)
			cc.base = resetTransport{}
			cc.asked.Store(c.asked)
			_, err := (&http.Client{Transport: cc}).Get(srv.URL)
			if err == nil || IsAuthError(err) != c.want {
				t.Fatalf("request: %v; want an auth error: %v", err, c.want)
			}
			if c.want && (!strings.Contains(err.Error(), "certificate required") || !strings.Contains(err.Error(), "connection reset")) {
				t.Errorf("request: %v; want the alert and the reset named", err)
			}
		})
	}
}

// TestGSSAPILoginRetried: a keytab that cannot be read at the first
// authentication fails that one only; once it is there, the next
// authentication logs in with it (a failed first read used to be kept for
// the life of the process); a keytab written over the old one (a rotated
// key) makes a new client with the new key.
func TestGSSAPILoginRetried(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "krb5.conf")
	if err := os.WriteFile(conf, []byte("[libdefaults]\n default_realm = EX.COM\n[realms]\n EX.COM = {\n  kdc = 127.0.0.1:1\n }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ktPath := filepath.Join(dir, "hivedr.keytab")
	auth := gssapiAuth(config.Kerberos{Principal: "hivedr@EX.COM", Keytab: ktPath, Krb5Conf: conf, ServiceName: "kafka"})
	if _, err := auth(context.Background()); err == nil || !strings.Contains(err.Error(), "kafka.sasl.kerberos.keytab") {
		t.Fatalf("without a keytab: %v, want an error naming kafka.sasl.kerberos.keytab", err)
	}
	krbtest.WriteKeytab(t, ktPath, "hivedr", "EX.COM", "secret", 1)
	a, err := auth(context.Background())
	if err != nil || a.Client == nil || a.Service != "kafka" {
		t.Fatalf("with the keytab in place: %+v, %v; want a client for service kafka", a, err)
	}
	if again, _ := auth(context.Background()); again.Client != a.Client {
		t.Error("a second authentication made another client; want the one shared")
	}
	// The key rotated: a keytab of key version 2 written over the file.
	krbtest.WriteKeytab(t, ktPath, "hivedr", "EX.COM", "rotated", 2)
	r, err := auth(context.Background())
	if err != nil || r.Client == a.Client {
		t.Fatalf("after the keytab changed: %v; want a new client", err)
	}
	var kvnos []uint32
	for _, e := range r.Client.Credentials.Keytab().Entries {
		kvnos = append(kvnos, e.KVNO)
	}
	if !slices.Equal(kvnos, []uint32{2}) {
		t.Errorf("after the keytab changed the client holds keys of versions %v, want [2]", kvnos)
	}
}
