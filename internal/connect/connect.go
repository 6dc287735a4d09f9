// Package connect builds hivedr's clients of Kafka and of the schema
// registry from the configuration. Every role and command takes them from
// here, so the TLS, SASL and registry credentials of the configuration
// apply alike to the tailer, copyd, the applier and every tool, and an
// authentication or authorization error names who hivedr was (Explain).
package connect

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	krbclient "github.com/jcmturner/gokrb5/v8/client"
	krbconfig "github.com/jcmturner/gokrb5/v8/config"
	"github.com/jcmturner/gokrb5/v8/keytab"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/kerberos"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/schemas"
)

// Kafka returns the options every Kafka client of hivedr starts from:
// k's seed brokers, TLS and SASL. A role adds its own (group,
// transactional ID) after them.
func Kafka(k config.Kafka) ([]kgo.Opt, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(k.Brokers...)}
	tc, err := k.TLS.ClientConfig("kafka.tls")
	if err != nil {
		return nil, err
	}
	if tc != nil {
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	m, err := mechanism(k.SASL)
	if err != nil {
		return nil, err
	}
	if m != nil {
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

// mechanism is s's SASL mechanism; nil for none. Secrets in files are
// read at every authentication, so a rotated password or token is used
// from the next connection on.
func mechanism(s config.SASL) (sasl.Mechanism, error) {
	switch s.Mechanism {
	case "":
		return nil, nil
	case config.SASLScramSHA256, config.SASLScramSHA512:
		auth := func(context.Context) (scram.Auth, error) {
			pw, err := s.SecretPassword()
			return scram.Auth{User: s.User, Pass: pw}, err
		}
		if s.Mechanism == config.SASLScramSHA256 {
			return scram.Sha256(auth), nil
		}
		return scram.Sha512(auth), nil
	case config.SASLPlain:
		return plain.Plain(func(context.Context) (plain.Auth, error) {
			pw, err := s.SecretPassword()
			return plain.Auth{User: s.User, Pass: pw}, err
		}), nil
	case config.SASLOAuthBearer:
		return oauth.Oauth(func(context.Context) (oauth.Auth, error) {
			tok, err := s.SecretToken()
			return oauth.Auth{Token: tok}, err
		}), nil
	case config.SASLGSSAPI:
		return gssapi(s.Kerberos), nil
	}
	return nil, fmt.Errorf("kafka.sasl.mechanism: %q is not supported", s.Mechanism)
}

// gssapi is SASL GSSAPI as k's principal, logging in with its keytab at
// the first authentication; the one Kerberos client is shared by the
// connections and logs in again with the keytab when its ticket expires.
func gssapi(k config.Kerberos) sasl.Mechanism { return kerberos.Kerberos(gssapiAuth(k)) }

// gssapiAuth returns the Kerberos client of k for each authentication.
// krb5.conf and the keytab are read at every authentication, and a new
// client is made when either changed (a key rotated on the KDC: a new
// kvno, the new keytab written over the old file), so the next login
// uses the new key; a client keeps the keys it was made with, which the
// KDC refuses once they are rotated out. A file that cannot be read
// (mounted late, being rotated) fails that authentication only, and the
// next one reads it again. A replaced client is not destroyed: sessions
// still being set up may be using it.
func gssapiAuth(k config.Kerberos) func(context.Context) (kerberos.Auth, error) {
	var (
		mu               sync.Mutex
		cl               *krbclient.Client
		confRead, ktRead []byte // the files cl was made from
	)
	return func(context.Context) (kerberos.Auth, error) {
		mu.Lock()
		defer mu.Unlock()
		confB, err := os.ReadFile(k.Krb5Conf)
		if err != nil {
			return kerberos.Auth{}, fmt.Errorf("kafka.sasl.kerberos.krb5_conf: %w", err)
		}
		ktB, err := os.ReadFile(k.Keytab)
		if err != nil {
			return kerberos.Auth{}, fmt.Errorf("kafka.sasl.kerberos.keytab: %w", err)
		}
		if cl == nil || !bytes.Equal(confB, confRead) || !bytes.Equal(ktB, ktRead) {
			conf, err := krbconfig.NewFromString(string(confB))
			if err != nil {
				return kerberos.Auth{}, fmt.Errorf("kafka.sasl.kerberos.krb5_conf: %s: %w", k.Krb5Conf, err)
			}
			kt := keytab.New()
			if err := kt.Unmarshal(ktB); err != nil {
				return kerberos.Auth{}, fmt.Errorf("kafka.sasl.kerberos.keytab: %s: %w", k.Keytab, err)
			}
			name, realm, _ := strings.Cut(k.Principal, "@")
			cl = krbclient.NewWithKeytab(name, realm, kt, conf, krbclient.DisablePAFXFAST(true))
			confRead, ktRead = confB, ktB
		}
		return kerberos.Auth{Client: cl, Service: k.ServiceName, PersistAfterAuth: true}, nil
	}
}

// Registry returns the options of a schema registry client for r: its
// URL, TLS (with an https URL; without a client certificate through
// certCheck, so that a server requiring one is an auth error) and basic
// auth.
func Registry(r config.SchemaRegistry) ([]sr.ClientOpt, error) {
	opts := []sr.ClientOpt{sr.URLs(r.URL)}
	if r.TLSOn() {
		tc, err := r.TLS.ClientConfig("schema_registry.tls")
		if err != nil {
			return nil, err
		}
		if tc == nil {
			tc = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		if len(tc.Certificates) == 0 {
			// sr.NewClient's default client, with certCheck's transport.
			opts = append(opts, sr.HTTPClient(&http.Client{Timeout: 5 * time.Second, Transport: newCertCheck(tc)}))
		} else {
			opts = append(opts, sr.DialTLSConfig(tc))
		}
	}
	if r.User != "" {
		opts = append(opts, sr.PreReq(func(req *http.Request) error {
			pw, err := r.SecretPassword()
			if err != nil {
				return err
			}
			req.SetBasicAuth(r.User, pw)
			return nil
		}))
	}
	return opts, nil
}

// Serde is the codec of the registry r, with hivedr's schemas registered
// there (schemas.NewSerde).
func Serde(ctx context.Context, r config.SchemaRegistry) (*schemas.Serde, error) {
	opts, err := Registry(r)
	if err != nil {
		return nil, err
	}
	s, err := schemas.DialSerde(ctx, r.URL, opts...)
	return s, explainRegistry(r, err)
}

// Decoder is a read-only decoder over the registry r: it fetches writer
// schemas by ID and registers nothing.
func Decoder(r config.SchemaRegistry) (*schemas.Decoder, error) {
	opts, err := Registry(r)
	if err != nil {
		return nil, err
	}
	return schemas.DialDecoder(r.URL, opts...)
}

// IsAuthError reports whether err says that Kafka or the schema registry
// refused hivedr's credentials or TLS, or denied it something: Kafka's
// (kafka.IsAuthError), or the registry's HTTP 401 and 403. No retry fixes
// them; a role stops on them instead of waiting.
func IsAuthError(err error) bool {
	var re *sr.ResponseError
	if errors.As(err, &re) && (re.StatusCode == http.StatusUnauthorized || re.StatusCode == http.StatusForbidden) {
		return true
	}
	return kafka.IsAuthError(err)
}

// Explain adds who hivedr was to an error that says Kafka or the schema
// registry refused its credentials or TLS, or denied it something
// (IsAuthError), so the operator sees which user lacks which ACL:
//
//	copyd: join group hivedr-copyd: GROUP_AUTHORIZATION_FAILED: ...
//	(Kafka SASL_SSL as SCRAM-SHA-512 user "applier"; `hivedr acls` lists what each role needs)
//	schema registry https://sr:8081: ...: Unauthorized (HTTP 401 as user "hivedr")
//
// Other errors come back as they are.
func Explain(conf *config.Config, err error) error {
	if kafka.IsAuthError(err) {
		return fmt.Errorf("%w (Kafka %s; `hivedr acls` lists what each role needs)", err, conf.Kafka.Security())
	}
	return explainRegistry(conf.SchemaRegistry, err)
}

// registryRefusal is an HTTP 401 or 403 of the registry, explained.
type registryRefusal struct {
	err error
	why string
}

func (e *registryRefusal) Error() string { return e.err.Error() + " (" + e.why + ")" }
func (e *registryRefusal) Unwrap() error { return e.err }

// explainRegistry names the HTTP status and the user of a registry's
// refusal (once); other errors come back as they are.
func explainRegistry(r config.SchemaRegistry, err error) error {
	var (
		re   *sr.ResponseError
		done *registryRefusal
	)
	if errors.As(err, &done) || !errors.As(err, &re) || (re.StatusCode != http.StatusUnauthorized && re.StatusCode != http.StatusForbidden) {
		return err
	}
	who := "without credentials (no schema_registry.user)"
	if r.User != "" {
		who = fmt.Sprintf("as user %q", r.User)
	}
	return &registryRefusal{err: err, why: fmt.Sprintf("HTTP %d from the schema registry %s", re.StatusCode, who)}
}
