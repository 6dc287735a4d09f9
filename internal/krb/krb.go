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
// less than a sixth is left, with the keys it read at login. Client adds
// what a long-running daemon needs on top: every login it makes reads
// krb5.conf and the keytab from disk again, so a key rotated on the KDC
// (new kvno, new keytab file) is used from the next login on; it makes
// that login when the TGT has expired and the keys in memory no longer
// get one, and when getting a service ticket fails (so a TGT that expired
// while the KDC was unreachable does not wedge a daemon either). A failed
// login is retried at the next use after a capped exponential backoff,
// never kept for the life of the process. Connections already
// authenticated are not affected by ticket expiry; only new ones need a
// valid ticket.
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
	"time"

	"github.com/jcmturner/gokrb5/v8/client"
	"github.com/jcmturner/gokrb5/v8/config"
	"github.com/jcmturner/gokrb5/v8/keytab"
	"github.com/jcmturner/gokrb5/v8/krberror"
	"github.com/jcmturner/gokrb5/v8/messages"
	"github.com/jcmturner/gokrb5/v8/types"
	"github.com/prometheus/client_golang/prometheus"
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

// ErrRefused is wrapped by the error of a login that failed because of
// who it is rather than because something could not be had: the keytab
// holds no key of the principal, or the KDC refused the login (a stale
// key, an unknown principal). A keytab or krb5.conf that cannot be read,
// or a KDC that does not answer, is not refused: the next attempt may
// find them.
var ErrRefused = errors.New("kerberos: login refused")

// refusedError marks err as ErrRefused.
type refusedError struct{ error }

func (e refusedError) Unwrap() error        { return e.error }
func (e refusedError) Is(target error) bool { return target == ErrRefused }

// refused marks a failed exchange with the KDC as ErrRefused unless the
// KDC could not be reached.
func refused(err error) error {
	var ke krberror.Krberror
	if errors.As(err, &ke) && ke.RootCause == krberror.NetworkingError {
		return err
	}
	return refusedError{err}
}

// Login retry delays: after a failed login, the next attempt waits
// DefaultRetryMin, each further one twice as long, up to DefaultRetryMax.
const (
	DefaultRetryMin = time.Second
	DefaultRetryMax = 2 * time.Minute
)

// retireAfter is how long a client replaced by a new login is kept before
// it is destroyed: a connection made with it (the NameNode connection of
// an HDFS client whose files are still open) may still ask it for a
// ticket when it reconnects.
const retireAfter = 10 * time.Minute

// Client is a principal that logs in from its keytab. It reads krb5.conf
// and the keytab from disk at every login it makes, the first and each one
// after, so a key rotated on the KDC (a new kvno, the new keytab written
// over the old file) is taken up without a restart: a new login makes a new
// gokrb5 client (Current's generation changes), and holders that keep
// connections made with the old one (internal/fs's HDFS) make new ones.
// A failed login is not kept: the next use tries again once the backoff
// (DefaultRetryMin doubling up to DefaultRetryMax) has passed, and each
// failure counts in hivedr_kerberos_login_failures_total (Register).
//
// It is safe for concurrent use.
type Client struct {
	conf     Config
	log      *slog.Logger
	logins   prometheus.Counter
	failures prometheus.Counter
	// Replaced by tests: the clock, the exchanges with the KDC (a login;
	// a check that the TGT is valid or can be had with the keys in
	// memory), the delays.
	now                func() time.Time
	kdcLogin           func(*client.Client) error
	affirm             func(*client.Client) error
	retryMin, retryMax time.Duration

	mu        sync.Mutex // serializes logins
	principal string     // name@REALM once logged in; as configured before
	cl        *client.Client
	gen       uint64 // one more at each new client
	failed    int    // consecutive failed logins
	lastErr   error  // the last failed login's
	retryAt   time.Time
	retired   []retiredClient
	closed    bool
}

// retiredClient is a client a new login replaced, and when.
type retiredClient struct {
	cl *client.Client
	at time.Time
}

// New returns a client for c that has not logged in yet: it logs in at its
// first use (Current, ServiceTicket), and a daemon whose keytab or
// krb5.conf cannot be read yet (mounted late, being rotated) keeps trying
// instead of failing for good. It reads no file.
func New(c Config, log *slog.Logger) (*Client, error) {
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("kerberos: %w", err)
	}
	if !c.Enabled() {
		return nil, errors.New("kerberos: no principal configured")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Client{
		conf: c, log: log, principal: c.Principal,
		logins: prometheus.NewCounter(prometheus.CounterOpts{Name: "hivedr_kerberos_logins_total",
			Help: "Kerberos logins from the keytab that got a TGT: the first and each new one after (a rotated key, an expired ticket)."}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{Name: "hivedr_kerberos_login_failures_total",
			Help: "Kerberos logins that failed: krb5.conf or the keytab unreadable, no key of the principal in it, or the KDC refusing or not answering."}),
		now: time.Now, kdcLogin: (*client.Client).Login, affirm: (*client.Client).AffirmLogin,
		retryMin: DefaultRetryMin, retryMax: DefaultRetryMax,
	}, nil
}

// Login is New logged in at once: it reads krb5.conf and the keytab and
// gets a TGT for c.Principal from the KDC. Errors name the principal and
// the keytab's path: a keytab without the principal's keys lists the
// principals it has; a key the KDC does not accept (a stale or foreign
// keytab) shows the KDC's error.
func Login(c Config, log *slog.Logger) (*Client, error) {
	kc, err := New(c, log)
	if err != nil {
		return nil, err
	}
	if _, _, err := kc.Current(); err != nil {
		return nil, err
	}
	return kc, nil
}

// Register registers the client's metrics with r:
// hivedr_kerberos_logins_total and hivedr_kerberos_login_failures_total.
func (c *Client) Register(r prometheus.Registerer) error {
	return errors.Join(r.Register(c.logins), r.Register(c.failures))
}

// load reads krb5.conf and the keytab and returns a client of the
// principal, not logged in, with the principal's full name and the
// highest key version the keytab holds for it.
func (c *Client) load() (*client.Client, string, int, error) {
	confPath := c.conf.krb5ConfPath()
	conf, err := config.Load(confPath)
	if err != nil {
		return nil, "", 0, fmt.Errorf("kerberos: principal %s: read krb5.conf %s: %w", c.conf.Principal, confPath, err)
	}
	name, realm, _ := strings.Cut(c.conf.Principal, "@")
	if realm == "" {
		realm = conf.LibDefaults.DefaultRealm
		if realm == "" {
			return nil, "", 0, fmt.Errorf("kerberos: principal %s has no realm and %s sets no default_realm", c.conf.Principal, confPath)
		}
	}
	full := name + "@" + realm
	kt, err := keytab.Load(c.conf.Keytab)
	if err != nil {
		return nil, "", 0, fmt.Errorf("kerberos: principal %s: read keytab %s: %w", full, c.conf.Keytab, err)
	}
	kvno, err := keyVersion(kt, name, realm)
	if err != nil {
		return nil, "", 0, refusedError{fmt.Errorf("kerberos: principal %s: keytab %s %w", full, c.conf.Keytab, err)}
	}
	return client.NewWithKeytab(name, realm, kt, conf, client.DisablePAFXFAST(true)), full, kvno, nil
}

// keyVersion returns the highest key version kt holds for name@realm,
// saying which principals it holds when it holds none of it.
func keyVersion(kt *keytab.Keytab, name, realm string) (int, error) {
	var held []string
	kvno := -1
	for _, e := range kt.Entries {
		p := strings.Join(e.Principal.Components, "/") + "@" + e.Principal.Realm
		if p == name+"@"+realm {
			kvno = max(kvno, int(e.KVNO))
		} else if !slices.Contains(held, p) {
			held = append(held, p)
		}
	}
	switch {
	case kvno >= 0:
		return kvno, nil
	case len(held) == 0:
		return 0, errors.New("holds no keys")
	}
	return 0, fmt.Errorf("has no key for it (it holds %s)", strings.Join(held, ", "))
}

// loginLocked logs in from the files on disk (load), unless the last
// attempt failed less than its backoff ago: then it returns that attempt's
// error, saying when the next one may be made. When probe is not nil the
// new client replaces the current one only if probe succeeds with it (a
// login that does not cure what made the caller log in again is dropped).
// The caller holds c.mu.
func (c *Client) loginLocked(probe func(*client.Client) error) error {
	if c.closed {
		return fmt.Errorf("kerberos: %s: client closed", c.principal)
	}
	now := c.now()
	if c.failed > 0 && now.Before(c.retryAt) {
		return fmt.Errorf("%w (%d failed logins in a row; next attempt in %s)", c.lastErr, c.failed, c.retryAt.Sub(now).Round(time.Millisecond))
	}
	cl, full, kvno, err := c.load()
	if err == nil {
		if err = c.kdcLogin(cl); err != nil {
			err = fmt.Errorf("kerberos: log in as %s with keytab %s: %w", full, c.conf.Keytab, refused(err))
		}
	}
	if err != nil {
		c.failed++
		c.lastErr = err
		wait := backoff(c.retryMin, c.retryMax, c.failed)
		c.retryAt = now.Add(wait)
		c.failures.Inc()
		c.log.Warn("kerberos: login failed", "principal", c.principal, "keytab", c.conf.Keytab,
			"failures", c.failed, "retry_in", wait, "err", err)
		return err
	}
	c.failed, c.lastErr = 0, nil
	if probe != nil {
		if err := probe(cl); err != nil {
			cl.Destroy()
			return err
		}
	}
	c.install(cl, full, kvno, now)
	return nil
}

// install makes cl the current client, retiring the one it replaces and
// destroying those retired at least retireAfter ago. The caller holds c.mu.
func (c *Client) install(cl *client.Client, full string, kvno int, now time.Time) {
	again := c.cl != nil
	if again {
		c.retired = append(c.retired, retiredClient{cl: c.cl, at: now})
	}
	kept := c.retired[:0]
	for _, r := range c.retired {
		if now.Sub(r.at) >= retireAfter {
			r.cl.Destroy()
		} else {
			kept = append(kept, r)
		}
	}
	c.retired = kept
	c.cl, c.principal = cl, full
	c.gen++
	c.logins.Inc()
	msg := "kerberos: logged in"
	if again {
		msg = "kerberos: logged in again"
	}
	c.log.Info(msg, "principal", full, "keytab", c.conf.Keytab, "kvno", kvno)
}

// backoff is the delay after the n-th failed login in a row: least,
// doubled n-1 times, at most most.
func backoff(least, most time.Duration, n int) time.Duration {
	d := least
	for i := 1; i < n && d < most; i++ {
		d *= 2
	}
	return min(d, most)
}

// Current returns the logged-in gokrb5 client and its generation, which
// changes at each new login. It logs in first if the client has not yet,
// and logs in again from the files on disk when the client's TGT has
// expired and the keys it holds no longer get a new one (the key was
// rotated). A holder that keeps the gokrb5 client for connections made
// later (colinmarc/hdfs) compares generations to know when to make a new
// holder with the new client.
func (c *Client) Current() (*client.Client, uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cl != nil && !c.closed {
		err := c.affirm(c.cl)
		if err == nil {
			return c.cl, c.gen, nil
		}
		if c.failed == 0 { // once, not at every use while logins fail
			c.log.Info("kerberos: the TGT cannot be had with the keys in memory; reading the keytab again",
				"principal", c.principal, "keytab", c.conf.Keytab, "err", err)
		}
	}
	if err := c.loginLocked(nil); err != nil {
		return nil, 0, err
	}
	return c.cl, c.gen, nil
}

// Principal is the principal, name@REALM once logged in (before, as
// configured).
func (c *Client) Principal() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.principal
}

// ShortName is the principal's first component, the user name Hadoop's
// default auth_to_local rule maps it to (hivedr-copyd@R and nn/host@R give
// hivedr-copyd and nn).
func (c *Client) ShortName() string {
	name, _, _ := strings.Cut(c.Principal(), "@")
	name, _, _ = strings.Cut(name, "/")
	return name
}

// GoKrb5 returns the current gokrb5 client (nil before the first login),
// for one exchange. Holders that keep it for later connections use
// Current, whose generation tells them when a new login replaced it.
func (c *Client) GoKrb5() *client.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cl
}

// Close stops background renewal of the current client and of those new
// logins replaced. The client logs in no more.
func (c *Client) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.cl != nil {
		c.cl.Destroy()
	}
	for _, r := range c.retired {
		r.cl.Destroy()
	}
	c.retired = nil
}

// ServiceTicket returns a ticket for the service principal spn (service/host,
// with or without @REALM: the realm comes from krb5.conf's domain_realm, as
// for Hadoop's own clients) and its session key. When the current client
// cannot get it, it logs in again from the files on disk and asks the new
// client, which replaces the current one if it gets the ticket.
func (c *Client) ServiceTicket(spn string) (messages.Ticket, types.EncryptionKey, error) {
	_, tkt, key, err := c.serviceTicket(spn)
	return tkt, key, err
}

// serviceTicket is ServiceTicket, also returning the gokrb5 client that
// got the ticket (in whose cache it is).
func (c *Client) serviceTicket(spn string) (*client.Client, messages.Ticket, types.EncryptionKey, error) {
	spn, _, _ = strings.Cut(spn, "@")
	cl, gen, err := c.Current()
	if err != nil {
		return nil, messages.Ticket{}, types.EncryptionKey{}, fmt.Errorf("ticket for %s: %w", spn, err)
	}
	tkt, key, err := cl.GetServiceTicket(spn)
	if err == nil {
		return cl, tkt, key, nil
	}
	var (
		got  *client.Client
		tkt2 messages.Ticket
		key2 types.EncryptionKey
	)
	lerr := c.relogin(gen, func(n *client.Client) error {
		var err error
		tkt2, key2, err = n.GetServiceTicket(spn)
		got = n
		return err
	})
	if lerr != nil {
		return nil, tkt, key, fmt.Errorf("kerberos: %s: ticket for %s: %w (and logging in again: %v)", c.Principal(), spn, err, lerr)
	}
	return got, tkt2, key2, nil
}

// relogin runs probe with a new login's client (loginLocked), or with the
// current client when another caller logged in again since generation gen.
func (c *Client) relogin(gen uint64, probe func(*client.Client) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen && c.cl != nil && !c.closed {
		return probe(c.cl)
	}
	return c.loginLocked(probe)
}

// ServicePrincipal resolves a service principal pattern for a connection to
// host: _HOST, as in Hadoop's configuration (nn/_HOST@REALM), becomes host
// in lower case. A pattern without _HOST is returned unchanged.
func ServicePrincipal(pattern, host string) string {
	return strings.ReplaceAll(pattern, "_HOST", strings.ToLower(host))
}
