package hms

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"syscall"

	"github.com/apache/thrift/lib/go/thrift"
)

// A metastore that requires SASL (metastore.sasl.enabled, on a kerberized
// cluster) takes the first bytes of a client's plain Thrift call for a
// SASL negotiation message, refuses it with a negotiation message of its
// own ("Invalid status -128") and closes the connection. Without a look at
// what came back, a client without Kerberos sees only an EOF, which says
// nothing about what is wrong. plainSocket looks.

// headLen is how much of the first answer on a connection plainSocket
// keeps to recognize a SASL negotiation message.
const headLen = 512

// plainSocket is the socket of a connection without SASL: it passes
// everything through, keeping the first bytes it reads, and turns the
// connection closing on the first answer into a *SASLRequiredError when
// that answer was a SASL negotiation message or nothing at all. Over TCP
// (tlsKey set) an answer that starts with a TLS alert fails the read at
// once with a *TLSRequiredError.
type plainSocket struct {
	thrift.TTransport
	addr, key string
	tlsKey    string // the key of the TLS settings; "" over TLS
	head      []byte
	read      int64 // bytes read on the connection so far
	checked   bool  // the head was looked at for a TLS alert
}

// Read implements thrift.TTransport.
func (s *plainSocket) Read(p []byte) (int, error) {
	n, err := s.TTransport.Read(p)
	if k := min(n, headLen-len(s.head)); k > 0 {
		s.head = append(s.head, p[:k]...)
	}
	s.read += int64(n)
	if s.tlsKey != "" && !s.checked && len(s.head) >= 3 {
		s.checked = true
		if tlsAlert(s.head) {
			return 0, &TLSRequiredError{Addr: s.addr, Key: s.tlsKey,
				Err: thrift.NewTTransportException(thrift.UNKNOWN_TRANSPORT_EXCEPTION, fmt.Sprintf("TLS alert %x", s.head))}
		}
	}
	if err != nil && closed(err) {
		if msg, isSASL := saslNegotiation(s.head); isSASL || s.read == 0 {
			return n, &SASLRequiredError{Addr: s.addr, Key: s.key, TLSKey: s.tlsKey, ServerMessage: msg, Sure: isSASL, Err: err}
		}
	}
	return n, err
}

// closed reports whether err is the peer closing (or resetting) the
// connection.
func closed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE)
}

// saslNegotiation reports whether b starts with a Thrift SASL negotiation
// message of status BAD or ERROR (one byte, then a four-byte big-endian
// length and that many bytes of text), as a SASL server refuses with, and
// returns its text (cut to what b holds). A plain Thrift answer starts
// with 0x80 (strict) or 0x00 (a short method name's length), never 2 to 5.
func saslNegotiation(b []byte) (string, bool) {
	if len(b) < 5 || (b[0] != saslBad && b[0] != saslError) {
		return "", false
	}
	n := binary.BigEndian.Uint32(b[1:5])
	if n > 1<<16 {
		return "", false
	}
	text := b[5:]
	if uint32(len(text)) > n {
		text = text[:n]
	}
	return string(text), true
}

// DefaultPrincipalKey is what SASLRequiredError names when Options do not
// say which configuration key holds the metastore's principal.
const DefaultPrincipalKey = "the metastore's principal (source.metastore_principal or applier.metastore_principal)"

// SASLRequiredError is a metastore closing a connection made without SASL
// on its first call: Sure when it answered with a SASL negotiation
// message (it requires Kerberos), else when it answered nothing (it may).
type SASLRequiredError struct {
	Addr string
	// Key is the configuration key of the metastore's principal.
	Key string
	// TLSKey, set on a connection without TLS, is the configuration key
	// of the metastore's TLS settings, named as the other possibility
	// when the metastore closed the connection without a word.
	TLSKey string
	// ServerMessage is the text of the metastore's SASL message.
	ServerMessage string
	Sure          bool
	Err           error
}

func (e *SASLRequiredError) Error() string {
	key := e.Key
	if key == "" {
		key = DefaultPrincipalKey
	}
	fix := fmt.Sprintf("set %s to its service principal (e.g. hive/_HOST@REALM) and the kerberos section "+
		"(principal, keytab: hivedr's own)", key)
	if e.Sure {
		return fmt.Sprintf("hive metastore %s answered the first call with a SASL negotiation message (%q) and closed the connection: "+
			"it requires Kerberos (metastore.sasl.enabled), and hivedr connected without: %s: %v", e.Addr, e.ServerMessage, fix, e.Err)
	}
	or := ""
	if e.TLSKey != "" {
		or = fmt.Sprintf("; or it may serve TLS (metastore.use.SSL=true), and hivedr connected without: if so, set %s", e.TLSKey)
	}
	return fmt.Sprintf("hive metastore %s closed the connection without answering the first call: "+
		"it may require Kerberos (metastore.sasl.enabled), and hivedr connected without; if so, %s%s: %v", e.Addr, fix, or, e.Err)
}

func (e *SASLRequiredError) Unwrap() error { return e.Err }
