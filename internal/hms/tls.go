package hms

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/apache/thrift/lib/go/thrift"
)

// A metastore with metastore.use.SSL=true serves its Thrift port over TLS
// (its certificate from metastore.keystore.path). Hive's own client opens
// the TLS socket first and runs everything else over it: plain Thrift, or
// the SASL negotiation and frames when metastore.sasl.enabled is also on.
// In that case Hive sets the SASL QOP to auth whatever
// hadoop.rpc.protection says, TLS already protecting the connection; a
// client insisting on auth-int or auth-conf is refused.

// newSocket returns the unopened socket to addr: TCP, or TLS over TCP
// when opts.TLS is set, its errors on opening explained (tlsSocket).
func newSocket(addr string, conf *thrift.TConfiguration, opts Options) thrift.TTransport {
	if opts.TLS == nil {
		return thrift.NewTSocketConf(addr, conf)
	}
	tc := opts.TLS.Clone()
	if tc.ServerName == "" {
		tc.ServerName = hostOf(addr)
	}
	c := *conf
	c.TLSConfig = tc
	return &tlsSocket{TSSLSocket: thrift.NewTSSLSocketConf(addr, &c), name: tc.ServerName, key: opts.TLSKey}
}

// tlsSocket is a TLS socket whose Open says what a failed handshake
// means for a metastore.
type tlsSocket struct {
	*thrift.TSSLSocket
	name string // the name the certificate must carry
	key  string // the configuration key of the TLS settings
}

// Open implements thrift.TTransport.
func (s *tlsSocket) Open() error {
	err := s.TSSLSocket.Open()
	var dial *net.OpError
	if err == nil || errors.As(err, &dial) && dial.Op == "dial" {
		return err // nothing of TLS yet: refused, unreachable
	}
	key := s.key
	if key == "" {
		key = "the metastore's TLS settings"
	}
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		header   tls.RecordHeaderError
		netErr   net.Error
	)
	var hint string
	switch {
	case errors.As(err, &unknown):
		hint = fmt.Sprintf("its certificate is not signed by a CA hivedr trusts: set %s.ca_file to the CA that signed it", key)
	case errors.As(err, &hostname):
		hint = fmt.Sprintf("its certificate is not for the name %s: dial a name it carries, or set %s.server_name to one", s.name, key)
	case errors.As(err, &invalid):
		hint = "its certificate is not valid (expired, not yet valid, or not for a server)"
	case errors.As(err, &header), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), closed(err):
		hint = fmt.Sprintf("it did not answer with TLS: does it run with metastore.use.SSL=true? If not, remove %s", key)
	case errors.As(err, &netErr) && netErr.Timeout():
		hint = fmt.Sprintf("no TLS answer in time: does it run with metastore.use.SSL=true? If not, remove %s", key)
	default:
		return fmt.Errorf("TLS to the metastore (%s): %w", key, err)
	}
	return fmt.Errorf("TLS to the metastore (%s): %s: %w", key, hint, err)
}

// TLSRequiredError is a metastore answering a connection made without
// TLS with a TLS alert: it serves TLS (metastore.use.SSL=true).
type TLSRequiredError struct {
	Addr string
	// Key is the configuration key of the metastore's TLS settings.
	Key string
	Err error
}

func (e *TLSRequiredError) Error() string {
	key := e.Key
	if key == "" {
		key = DefaultTLSKey
	}
	return fmt.Sprintf("hive metastore %s answered the first call with a TLS alert: it serves TLS (metastore.use.SSL=true), "+
		"and hivedr connected without: set %s (ca_file: the CA that signed its certificate): %v", e.Addr, key, e.Err)
}

func (e *TLSRequiredError) Unwrap() error { return e.Err }

// DefaultTLSKey is what TLSRequiredError names when Options do not say
// which configuration key holds the metastore's TLS settings.
const DefaultTLSKey = "the metastore's TLS settings (source.metastore_tls or applier.metastore_tls)"

// tlsAlert reports whether b starts with a TLS alert record (content type
// 21, protocol version 3.x), what a TLS server answers a client that
// speaks something else with. No Thrift or SASL answer starts so.
func tlsAlert(b []byte) bool {
	return len(b) >= 3 && b[0] == 21 && b[1] == 3 && b[2] <= 4
}
