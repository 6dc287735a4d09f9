package config

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"
)

// TLS is how hivedr reaches a server over TLS (kafka.tls,
// schema_registry.tls). It is on when Enabled is set or any other key is
// given; with none of the files, the system's roots verify the server.
type TLS struct {
	// Enabled turns TLS on with the system's root CAs; giving ca_file,
	// cert_file, key_file or server_name turns it on too.
	Enabled bool `yaml:"enabled"`
	// CAFile is a PEM file of the CAs that verify the server, instead of
	// the system's.
	CAFile string `yaml:"ca_file"`
	// CertFile is the client's certificate (PEM) for mutual TLS; it
	// needs key_file.
	CertFile string `yaml:"cert_file"`
	// KeyFile is the client certificate's private key (PEM); it needs
	// cert_file.
	KeyFile string `yaml:"key_file"`
	// ServerName is the name the server's certificate must carry, when it
	// is not the host hivedr dials.
	ServerName string `yaml:"server_name"`
}

// On reports whether TLS is on.
func (t TLS) On() bool {
	return t.Enabled || t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.ServerName != ""
}

// ClientConfig returns the crypto/tls configuration t describes, reading
// its files now; nil when TLS is off. key names t in errors (kafka.tls).
func (t TLS) ClientConfig(key string) (*tls.Config, error) {
	if !t.On() {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("%s.ca_file: %w", key, err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s.ca_file: %s holds no PEM certificate", key, t.CAFile)
		}
	}
	switch {
	case t.CertFile != "" && t.KeyFile != "":
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("%s.cert_file, key_file: %w", key, err)
		}
		c.Certificates = []tls.Certificate{cert}
	case t.CertFile != "":
		return nil, fmt.Errorf("%s.key_file: required with cert_file", key)
	case t.KeyFile != "":
		return nil, fmt.Errorf("%s.cert_file: required with key_file", key)
	}
	return c, nil
}

// Validate checks t, reading its files, naming the key at fault.
func (t TLS) Validate(key string) error {
	_, err := t.ClientConfig(key)
	return err
}

// The SASL mechanisms of kafka.sasl.mechanism.
const (
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
	SASLPlain       = "PLAIN"
	SASLOAuthBearer = "OAUTHBEARER"
	SASLGSSAPI      = "GSSAPI"
)

// SASL is how hivedr authenticates to Kafka (kafka.sasl). Secrets come
// from the file (password, token) or, through ${NAME}, the environment;
// a *_file is read again at every authentication, so a secret rotated in
// place is picked up without a restart.
type SASL struct {
	// Mechanism is SCRAM-SHA-512, SCRAM-SHA-256, PLAIN, OAUTHBEARER or
	// GSSAPI; empty: no SASL.
	Mechanism string `yaml:"mechanism"`
	// User is the SCRAM or PLAIN user; it needs password or
	// password_file.
	User string `yaml:"user"`
	// Password is the user's password (${NAME} reads it from the
	// environment). Not with password_file.
	Password string `yaml:"password"`
	// PasswordFile is a file holding the user's password, read again at
	// every authentication. Not with password.
	PasswordFile string `yaml:"password_file"`
	// Token is the OAUTHBEARER token. Not with token_file.
	Token string `yaml:"token"`
	// TokenFile is a file holding the OAUTHBEARER token, read again at
	// every authentication. Not with token.
	TokenFile string `yaml:"token_file"`
	// Kerberos is GSSAPI's principal and keytab.
	Kerberos Kerberos `yaml:"kerberos"`
}

// Kerberos is a Kerberos client identity for SASL GSSAPI.
type Kerberos struct {
	// Principal is name@REALM (name/host@REALM for a service).
	Principal string `yaml:"principal"`
	// Keytab holds the principal's keys.
	Keytab string `yaml:"keytab"`
	// Krb5Conf locates the KDCs of the realm. Default /etc/krb5.conf.
	Krb5Conf string `yaml:"krb5_conf"`
	// ServiceName is the brokers' Kerberos service name. Default kafka.
	ServiceName string `yaml:"service_name"`
}

// EnsureDefaults upper-cases the mechanism and fills Kerberos's defaults.
func (s *SASL) EnsureDefaults() {
	s.Mechanism = strings.ToUpper(s.Mechanism)
	if s.Mechanism == SASLGSSAPI {
		if s.Kerberos.Krb5Conf == "" {
			s.Kerberos.Krb5Conf = "/etc/krb5.conf"
		}
		if s.Kerberos.ServiceName == "" {
			s.Kerberos.ServiceName = "kafka"
		}
	}
}

// Validate checks s, reading its secret files, naming the key at fault
// (key is kafka.sasl).
func (s SASL) Validate(key string) error {
	given := func(k, v string) string {
		if v != "" {
			return k
		}
		return ""
	}
	var stray []string
	keep := func(ks ...string) {
		for _, k := range ks {
			if k != "" {
				stray = append(stray, k)
			}
		}
	}
	kerb := s.Kerberos != Kerberos{}
	switch s.Mechanism {
	case "":
		keep(given("user", s.User), given("password", s.Password), given("password_file", s.PasswordFile),
			given("token", s.Token), given("token_file", s.TokenFile))
		if kerb {
			keep("kerberos")
		}
		if len(stray) > 0 {
			return fmt.Errorf("%s.mechanism: required with %s", key, strings.Join(stray, ", "))
		}
		return nil
	case SASLScramSHA256, SASLScramSHA512, SASLPlain:
		if s.User == "" {
			return fmt.Errorf("%s.user: required with mechanism %s", key, s.Mechanism)
		}
		if err := checkSecret(key, "password", s.Password, s.PasswordFile); err != nil {
			return err
		}
		keep(given("token", s.Token), given("token_file", s.TokenFile))
		if kerb {
			keep("kerberos")
		}
	case SASLOAuthBearer:
		if err := checkSecret(key, "token", s.Token, s.TokenFile); err != nil {
			return err
		}
		keep(given("user", s.User), given("password", s.Password), given("password_file", s.PasswordFile))
		if kerb {
			keep("kerberos")
		}
	case SASLGSSAPI:
		k := s.Kerberos
		if k.Principal == "" {
			return fmt.Errorf("%s.kerberos.principal: required with mechanism GSSAPI", key)
		}
		if _, realm, ok := strings.Cut(k.Principal, "@"); !ok || realm == "" {
			return fmt.Errorf("%s.kerberos.principal: %q is not name@REALM", key, k.Principal)
		}
		if k.Keytab == "" {
			return fmt.Errorf("%s.kerberos.keytab: required with mechanism GSSAPI", key)
		}
		for _, f := range []struct{ k, path string }{{"keytab", k.Keytab}, {"krb5_conf", k.Krb5Conf}} {
			if _, err := os.Stat(f.path); err != nil {
				return fmt.Errorf("%s.kerberos.%s: %w", key, f.k, err)
			}
		}
		keep(given("user", s.User), given("password", s.Password), given("password_file", s.PasswordFile),
			given("token", s.Token), given("token_file", s.TokenFile))
	default:
		return fmt.Errorf("%s.mechanism: %q is not %s, %s, %s, %s or %s", key, s.Mechanism,
			SASLScramSHA512, SASLScramSHA256, SASLPlain, SASLOAuthBearer, SASLGSSAPI)
	}
	if len(stray) > 0 {
		return fmt.Errorf("%s: %s: not used by mechanism %s", key, strings.Join(stray, ", "), s.Mechanism)
	}
	return nil
}

// SecretPassword returns the SCRAM or PLAIN password: Password, or the
// content of PasswordFile read now.
func (s SASL) SecretPassword() (string, error) {
	return secret("kafka.sasl.password", s.Password, s.PasswordFile)
}

// SecretToken returns the OAUTHBEARER token: Token, or the content of
// TokenFile read now.
func (s SASL) SecretToken() (string, error) {
	return secret("kafka.sasl.token", s.Token, s.TokenFile)
}

// Principal names who s authenticates as, for errors and logs (never the
// secret): `SCRAM-SHA-512 user "tailer"`, `GSSAPI principal
// "hivedr@EXAMPLE.COM"`, `an OAUTHBEARER token of subject "tailer"`, or
// "no SASL (anonymous)".
func (s SASL) Principal() string {
	switch s.Mechanism {
	case "":
		return "no SASL (anonymous)"
	case SASLOAuthBearer:
		if sub := s.tokenSubject(); sub != "" {
			return fmt.Sprintf("an OAUTHBEARER token of subject %q", sub)
		}
		return "an OAUTHBEARER token"
	case SASLGSSAPI:
		return fmt.Sprintf("GSSAPI principal %q", s.Kerberos.Principal)
	}
	return fmt.Sprintf("%s user %q", s.Mechanism, s.User)
}

// tokenSubject is the sub claim of the OAUTHBEARER token when it is a
// JWT, read without checking its signature (the broker does that): who
// the token says it is, for errors and logs; "" when it cannot be read.
func (s SASL) tokenSubject() string {
	tok, err := s.SecretToken()
	if err != nil {
		return ""
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return ""
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return ""
	}
	var claims struct {
		Sub string `json:"sub"`
	}
	if json.Unmarshal(payload, &claims) != nil {
		return ""
	}
	return claims.Sub
}

// checkSecret checks that exactly one of a secret's value and its file
// is given (key.name, key.name_file), and that the file has content.
func checkSecret(key, name, value, file string) error {
	switch {
	case value != "" && file != "":
		return fmt.Errorf("%s: %s and %s_file: give one, not both", key, name, name)
	case value == "" && file == "":
		return fmt.Errorf("%s.%s: required (or %s_file)", key, name, name)
	case file != "":
		_, err := secret(key+"."+name, "", file)
		return err
	}
	return nil
}

// secret is a secret's value: value, else the content of file without
// its trailing line break. Errors name the file (key_file), never the
// content.
func secret(key, value, file string) (string, error) {
	if file == "" {
		return value, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%s_file: %w", key, err)
	}
	v := strings.TrimRight(string(b), "\r\n")
	if v == "" {
		return "", fmt.Errorf("%s_file: %s is empty", key, file)
	}
	return v, nil
}

// SchemaRegistry is the Confluent-compatible schema registry: written as
// its URL alone (schema_registry: https://sr:8081), or as a mapping with
// basic auth and TLS.
type SchemaRegistry struct {
	// URL is http:// or https://host:port. With https, TLS verifies the
	// server with the system's roots unless tls says otherwise.
	URL string `yaml:"url"`
	// User is the basic-auth user, with password or password_file;
	// empty: no auth.
	User string `yaml:"user"`
	// Password is the basic-auth password (${NAME} reads it from the
	// environment). Not with password_file.
	Password string `yaml:"password"`
	// PasswordFile is a file holding the basic-auth password, read again
	// at every request, so a password rotated in place is picked up. Not
	// with password.
	PasswordFile string `yaml:"password_file"`
	// TLS: CA, client certificate for mutual TLS, server name.
	TLS TLS `yaml:"tls"`
}

// schemaRegistryFields is SchemaRegistry without its YAML methods.
type schemaRegistryFields SchemaRegistry

// UnmarshalYAML reads a URL or a mapping.
func (r *SchemaRegistry) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*r = SchemaRegistry{}
		return n.Decode(&r.URL)
	}
	f := schemaRegistryFields(*r)
	if err := n.Decode(&f); err != nil {
		return err
	}
	*r = SchemaRegistry(f)
	return nil
}

// MarshalYAML writes the URL alone when nothing else is set.
func (r SchemaRegistry) MarshalYAML() (any, error) {
	if r.User == "" && r.Password == "" && r.PasswordFile == "" && r.TLS == (TLS{}) {
		return r.URL, nil
	}
	return schemaRegistryFields(r), nil
}

// TLSOn reports whether the registry is reached over TLS.
func (r SchemaRegistry) TLSOn() bool { return strings.HasPrefix(r.URL, "https://") }

// Validate checks r, reading its files, naming the key at fault. An
// empty URL passes: Require asks for it.
func (r SchemaRegistry) Validate() error {
	const key = "schema_registry"
	if r.URL == "" {
		if r.User != "" || r.Password != "" || r.PasswordFile != "" || r.TLS.On() {
			return errors.New(key + ".url: required")
		}
		return nil
	}
	if u, err := url.Parse(r.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s: %q is not an http(s) URL", key, MaskSecrets(r.URL))
	}
	if r.TLS.On() && !r.TLSOn() {
		return fmt.Errorf("%s.tls: given, but the URL %s is not https://", key, MaskSecrets(r.URL))
	}
	if err := r.TLS.Validate(key + ".tls"); err != nil {
		return err
	}
	if r.User == "" {
		if r.Password != "" || r.PasswordFile != "" {
			return fmt.Errorf("%s.user: required with a password", key)
		}
		return nil
	}
	return checkSecret(key, "password", r.Password, r.PasswordFile)
}

// SecretPassword returns the basic-auth password: Password, or the
// content of PasswordFile read now.
func (r SchemaRegistry) SecretPassword() (string, error) {
	return secret("schema_registry.password", r.Password, r.PasswordFile)
}
