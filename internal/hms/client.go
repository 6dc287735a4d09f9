// Package hms connects to Hive Metastores over Thrift (Dial: the source
// for the tailer's Thrift reader, the DR metastore for the applier and
// status) and decodes the encodings of notification-log messages
// (MESSAGE_FORMAT json-0.2 and gzip(json-2.0)) into their JSON text.
// Reading the log itself is internal/hmslog's; decoding the JSON into
// records is the tailer's.
//
// The Thrift types and the generated client come from gohive's
// hive_metastore package; this package adds only the transport (binary
// protocol over a buffered socket, the metastore's default when SASL and
// framing are off, or over Thrift's SASL transport with Kerberos (GSSAPI,
// QOP auth, auth-int or auth-conf) when Options.Kerberos is set, for
// metastores with metastore.sasl.enabled), either one inside TLS when
// Options.TLS is set (metastore.use.SSL; tls.go), and what several roles
// call alike: a connection made on first use and again after a failure (Lazy), partition names
// (names.go) and streaming a table's partitions by name (stream.go),
// replicated transactions as Hive's REPL LOAD opens them (repl.go), and a
// source transaction's writes (writes.go). A connection without Kerberos
// to a metastore that requires it fails on its first call with a
// SASLRequiredError saying so and naming the keys to set (plain.go).
package hms

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/internal/krb"
)

// Client is a connection to one Hive Metastore. It is not safe for
// concurrent use: Thrift clients multiplex nothing, so each goroutine that
// talks to a metastore needs its own Client.
type Client struct {
	*hive_metastore.ThriftHiveMetastoreClient

	addr      string
	transport thrift.TTransport
	qop       krb.QOP
}

// Options tune Dial. The zero value is usable.
type Options struct {
	// ConnectTimeout bounds the TCP connect. Default 10s.
	ConnectTimeout time.Duration
	// SocketTimeout bounds each read and write on the connection. Default
	// 60s; metastore calls that scan large tables can be slow.
	SocketTimeout time.Duration
	// MaxMessageSize bounds one Thrift message. Default 256 MiB, enough for
	// a get_next_notification batch of large partition events.
	MaxMessageSize int32
	// Kerberos, when set, authenticates with SASL GSSAPI as its principal
	// (the metastore must run with metastore.sasl.enabled). Principal is
	// then the metastore's service principal (hive/_HOST@REALM; _HOST
	// becomes the address's host).
	Kerberos  *krb.Client
	Principal string
	// QOP is the SASL quality of protection to insist on with Kerberos.
	// Empty takes the strongest the metastore offers: auth-conf
	// (encrypted) from one with hadoop.rpc.protection=privacy.
	QOP krb.QOP
	// PrincipalKey is the configuration key that would hold Principal
	// (source.metastore_principal, applier.metastore_principal), named
	// when a metastore that requires Kerberos is reached without
	// (SASLRequiredError).
	PrincipalKey string
	// TLS, when set, wraps the connection in TLS before anything else
	// (plain Thrift, or SASL with Kerberos), for a metastore with
	// metastore.use.SSL=true. An empty ServerName is the address's host.
	// Such a metastore offers SASL QOP auth only, TLS protecting the rest.
	TLS *tls.Config
	// TLSError, when set, is why the TLS settings could not be made into
	// TLS (an unreadable CA file): Dial fails with it rather than connect
	// without.
	TLSError error
	// TLSKey is the configuration key of the TLS settings
	// (source.metastore_tls, applier.metastore_tls), named in errors: a
	// failed handshake, or a metastore that turns out to serve TLS when
	// TLS is off (TLSRequiredError).
	TLSKey string
}

func (o *Options) ensureDefaults() {
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 10 * time.Second
	}
	if o.SocketTimeout <= 0 {
		o.SocketTimeout = 60 * time.Second
	}
	if o.MaxMessageSize <= 0 {
		o.MaxMessageSize = 256 << 20
	}
}

// Dial connects to the metastore at addr (host:port).
func Dial(ctx context.Context, addr string, opts Options) (*Client, error) {
	opts.ensureDefaults()
	if opts.TLSError != nil {
		return nil, fmt.Errorf("connect to hive metastore %s: %w", addr, opts.TLSError)
	}
	conf := &thrift.TConfiguration{
		ConnectTimeout: opts.ConnectTimeout,
		SocketTimeout:  opts.SocketTimeout,
		MaxMessageSize: opts.MaxMessageSize,
	}
	if dl, ok := ctx.Deadline(); ok {
		if d := time.Until(dl); d > 0 && d < conf.ConnectTimeout {
			conf.ConnectTimeout = d
		}
	}
	sock := newSocket(addr, conf, opts)
	tlsKey := "" // named when the metastore may want TLS: only without
	if opts.TLS == nil {
		tlsKey = cmp.Or(opts.TLSKey, DefaultTLSKey)
	}
	var (
		trans thrift.TTransport
		qop   krb.QOP
	)
	if opts.Kerberos != nil {
		if opts.Principal == "" {
			return nil, fmt.Errorf("connect to hive metastore %s: Kerberos needs the metastore's principal", addr)
		}
		spn := krb.ServicePrincipal(opts.Principal, hostOf(addr))
		st := newSASLTransport(sock, opts.Kerberos, spn, opts.QOP, opts.MaxMessageSize)
		st.tlsKey = tlsKey
		if err := st.Open(); err != nil {
			return nil, fmt.Errorf("connect to hive metastore %s as %s: %w", addr, opts.Kerberos.Principal(), err)
		}
		trans, qop = st, st.QOP()
	} else {
		if err := sock.Open(); err != nil {
			return nil, fmt.Errorf("connect to hive metastore %s: %w", addr, err)
		}
		trans = thrift.NewTBufferedTransport(&plainSocket{TTransport: sock, addr: addr, key: opts.PrincipalKey, tlsKey: tlsKey}, 64<<10)
	}
	proto := thrift.NewTBinaryProtocolConf(trans, conf)
	return &Client{
		ThriftHiveMetastoreClient: hive_metastore.NewThriftHiveMetastoreClient(thrift.NewTStandardClient(proto, proto)),
		addr:                      addr,
		transport:                 trans,
		qop:                       qop,
	}, nil
}

// QOP is the SASL quality of protection of the connection: auth, auth-int
// or auth-conf with Kerberos, empty without.
func (c *Client) QOP() krb.QOP { return c.qop }

// Addr is the address the client is connected to.
func (c *Client) Addr() string { return c.addr }

// Close closes the connection.
func (c *Client) Close() error { return c.transport.Close() }

// TableRequest is the get_table_req request for db.name. It announces the
// INSERT_ONLY_TABLES capability: without it the metastore refuses to
// return an insert-only transactional table ("Your client does not appear
// to support insert-only tables"). hivedr reads and writes such tables'
// metadata and files as they are, so it supports them.
func TableRequest(db, name string) *hive_metastore.GetTableRequest {
	return &hive_metastore.GetTableRequest{
		DbName: db, TblName: name,
		Capabilities:          &hive_metastore.ClientCapabilities{Values: []hive_metastore.ClientCapability{hive_metastore.ClientCapability_INSERT_ONLY_TABLES}},
		ProcessorCapabilities: ProcessorCapabilities(), ProcessorIdentifier: processorIdentifier(),
	}
}

// ProcessorCapabilities are what hivedr tells a Hive 4 metastore it can
// read and write, as Hive's own clients do: the metastore's metadata
// transformer refuses transactional tables to a client that declares
// none. (A replica must still run without a transformer that rewrites
// tables, such as Hive 4's default one, which turns managed tables that
// are not transactional into external ones: see docs/acid.md.)
func ProcessorCapabilities() []string {
	return []string{"HIVEFULLACIDREAD", "HIVEFULLACIDWRITE", "HIVEMANAGEDINSERTREAD", "HIVEMANAGEDINSERTWRITE",
		"EXTREAD", "EXTWRITE", "HIVEMANAGESTATS", "HIVECACHEINVALIDATE"}
}

// processorIdentifier names hivedr to the metastore beside its
// capabilities.
func processorIdentifier() *string {
	id := "hivedr"
	return &id
}

// CreateTable creates t with create_table_req, declaring hivedr's
// ProcessorCapabilities (the plain create_table declares none).
func (c *Client) CreateTable(ctx context.Context, t *hive_metastore.Table) error {
	return c.CreateTableReq(ctx, &hive_metastore.CreateTableRequest{Table: t, ProcessorCapabilities: ProcessorCapabilities(),
		ProcessorIdentifier: processorIdentifier()})
}
