// Package krb is hivedr's Kerberos client: it logs a principal in from a
// keytab (gokrb5, pure Go: no libkrb5, no kinit, no ticket cache on disk),
// keeps its ticket valid for as long as a daemon runs, and hands out what
// the kerberized protocols need: service tickets and GSS-API tokens for
// SASL GSSAPI (the metastore's Thrift, internal/hms) and SPNEGO (WebHDFS,
// Transport), and the gokrb5 client itself for colinmarc/hdfs's NameNode
// RPC.
//
// Ticket lifetime: gokrb5 renews or re-acquires the TGT in the background
// at five sixths of its life and before each service ticket request when
// less than a sixth is left; a keytab login re-authenticates with the keytab
// when the TGT cannot be renewed. Client adds one more guard: when getting a
// service ticket fails, it logs in again from the keytab once and retries,
// so a TGT that expired while the KDC was unreachable does not wedge a
// daemon. Connections already authenticated are not affected by ticket
// expiry; only new ones need a valid ticket.
//
// Nothing here logs or returns key material: errors name the principal, the
// keytab's path and the principals a keytab holds, never keys or tickets.
package krb

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/jcmturner/gokrb5/v8/client"
	"github.com/jcmturner/gokrb5/v8/config"
	"github.com/jcmturner/gokrb5/v8/keytab"
	"github.com/jcmturner/gokrb5/v8/messages"
	"github.com/jcmturner/gokrb5/v8/types"
)

// DefaultKrb5Conf is read when neither Config.Krb5Conf nor $KRB5_CONFIG
// names a krb5.conf.
const DefaultKrb5Conf = "/etc/krb5.conf"

// Config says who to be. It is the top-level `kerberos:` section of
// hivedr's configuration, one per file: every kerberized metastore and
// HDFS cluster of the file is reached as this principal. Roles that need
// principals of their own get them from their own files, or from one file
// with principal: ${HIVEDR_PRINCIPAL} set per process. Kafka's SASL GSSAPI
// is configured apart, in kafka.sasl.kerberos.
type Config struct {
	// Principal is the client principal, name@REALM or name/host@REALM;
	// without @REALM, krb5.conf's default_realm. Empty: no Kerberos.
	Principal string `yaml:"principal"`
	// Keytab is the path of a keytab holding Principal's keys.
	Keytab string `yaml:"keytab"`
	// Krb5Conf is the path of krb5.conf (realms, KDCs, encryption types).
	// Default $KRB5_CONFIG, else /etc/krb5.conf.
	Krb5Conf string `yaml:"krb5_conf"`
}

// Enabled reports whether c asks for Kerberos.
func (c Config) Enabled() bool { return c.Principal != "" }

// Validate checks that the fields go together; it reads no file.
func (c Config) Validate() error {
	if c.Principal == "" {
		if c.Keytab != "" {
			return errors.New("keytab: set without a principal")
		}
		return nil
	}
	if strings.Count(c.Principal, "@") > 1 || strings.HasSuffix(c.Principal, "@") || strings.HasPrefix(c.Principal, "@") {
		return fmt.Errorf("principal: %q is not name@REALM", c.Principal)
	}
	if c.Keytab == "" {
		return fmt.Errorf("keytab: required with principal %s (hivedr logs in from a keytab)", c.Principal)
	}
	return nil
}

// krb5ConfPath returns the krb5.conf path c uses.
func (c Config) krb5ConfPath() string {
	if c.Krb5Conf != "" {
		return c.Krb5Conf
	}
	if p := os.Getenv("KRB5_CONFIG"); p != "" {
		// KRB5_CONFIG may list several files; gokrb5 reads one.
		p, _, _ = strings.Cut(p, ":")
		return p
	}
	return DefaultKrb5Conf
}

// Client is a logged-in principal. It is safe for concurrent use.
type Client struct {
	principal string // name@REALM, as logged in
	keytab    string
	log       *slog.Logger

	mu sync.Mutex // serializes re-logins
	cl *client.Client
}

// Login reads krb5.conf and the keytab and gets a TGT for c.Principal from
// the KDC. Errors name the principal and the keytab's path: a keytab
// without the principal's keys lists the principals it has; a key the KDC
// does not accept (a stale or foreign keytab) shows the KDC's error.
func Login(c Config, log *slog.Logger) (*Client, error) {
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("kerberos: %w", err)
	}
	if !c.Enabled() {
		return nil, errors.New("kerberos: no principal configured")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	confPath := c.krb5ConfPath()
	conf, err := config.Load(confPath)
	if err != nil {
		return nil, fmt.Errorf("kerberos: principal %s: read krb5.conf %s: %w", c.Principal, confPath, err)
	}
	name, realm, _ := strings.Cut(c.Principal, "@")
	if realm == "" {
		realm = conf.LibDefaults.DefaultRealm
		if realm == "" {
			return nil, fmt.Errorf("kerberos: principal %s has no realm and %s sets no default_realm", c.Principal, confPath)
		}
	}
	full := name + "@" + realm
	kt, err := keytab.Load(c.Keytab)
	if err != nil {
		return nil, fmt.Errorf("kerberos: principal %s: read keytab %s: %w", full, c.Keytab, err)
	}
	if err := hasPrincipal(kt, name, realm); err != nil {
		return nil, fmt.Errorf("kerberos: principal %s: keytab %s %w", full, c.Keytab, err)
	}
	cl := client.NewWithKeytab(name, realm, kt, conf, client.DisablePAFXFAST(true))
	if err := cl.Login(); err != nil {
		return nil, fmt.Errorf("kerberos: log in as %s with keytab %s: %w", full, c.Keytab, err)
	}
	log.Info("kerberos: logged in", "principal", full, "keytab", c.Keytab)
	return &Client{principal: full, keytab: c.Keytab, log: log, cl: cl}, nil
}

// hasPrincipal checks that kt holds a key of name@realm, saying which
// principals it holds when not.
func hasPrincipal(kt *keytab.Keytab, name, realm string) error {
	var held []string
	for _, e := range kt.Entries {
		p := strings.Join(e.Principal.Components, "/") + "@" + e.Principal.Realm
		if p == name+"@"+realm {
			return nil
		}
		if !slices.Contains(held, p) {
			held = append(held, p)
		}
	}
	if len(held) == 0 {
		return errors.New("holds no keys")
	}
	return fmt.Errorf("has no key for it (it holds %s)", strings.Join(held, ", "))
}

// Principal is the logged-in principal, name@REALM.
func (c *Client) Principal() string { return c.principal }

// ShortName is the principal's first component, the user name Hadoop's
// default auth_to_local rule maps it to (hivedr-copyd@R and nn/host@R give
// hivedr-copyd and nn).
func (c *Client) ShortName() string {
	name, _, _ := strings.Cut(c.principal, "@")
	name, _, _ = strings.Cut(name, "/")
	return name
}

// GoKrb5 returns the underlying gokrb5 client, for libraries that take one
// (colinmarc/hdfs's KerberosClient).
func (c *Client) GoKrb5() *client.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cl
}

// Close stops background renewal.
func (c *Client) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cl.Destroy()
}

// ServiceTicket returns a ticket for the service principal spn (service/host,
// with or without @REALM: the realm comes from krb5.conf's domain_realm, as
// for Hadoop's own clients) and its session key. On failure it logs in
// again from the keytab once and retries.
func (c *Client) ServiceTicket(spn string) (messages.Ticket, types.EncryptionKey, error) {
	spn, _, _ = strings.Cut(spn, "@")
	cl := c.GoKrb5()
	tkt, key, err := cl.GetServiceTicket(spn)
	if err == nil {
		return tkt, key, nil
	}
	if lerr := c.relogin(); lerr != nil {
		return tkt, key, fmt.Errorf("kerberos: %s: ticket for %s: %w (and logging in again: %v)", c.principal, spn, err, lerr)
	}
	tkt, key, err = c.GoKrb5().GetServiceTicket(spn)
	if err != nil {
		return tkt, key, fmt.Errorf("kerberos: %s: ticket for %s: %w", c.principal, spn, err)
	}
	return tkt, key, nil
}

// relogin gets a new TGT from the keytab.
func (c *Client) relogin() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.cl.Login(); err != nil {
		return err
	}
	c.log.Info("kerberos: logged in again", "principal", c.principal, "keytab", c.keytab)
	return nil
}

// ServicePrincipal resolves a service principal pattern for a connection to
// host: _HOST, as in Hadoop's configuration (nn/_HOST@REALM), becomes host
// in lower case. A pattern without _HOST is returned unchanged.
func ServicePrincipal(pattern, host string) string {
	return strings.ReplaceAll(pattern, "_HOST", strings.ToLower(host))
}
