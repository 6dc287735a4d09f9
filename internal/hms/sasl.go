package hms

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/hivedr/hivedr/internal/krb"
)

// Thrift SASL negotiation statuses (TSaslTransport.NegotiationStatus).
const (
	saslStart    = 0x01
	saslOK       = 0x02
	saslBad      = 0x03
	saslError    = 0x04
	saslComplete = 0x05
)

// saslTransport is the client side of Thrift's SASL transport with
// mechanism GSSAPI, what a metastore with metastore.sasl.enabled=true
// speaks: a negotiation of [status byte][4-byte length][payload] messages,
// then every Thrift message in frames of [4-byte length][bytes], one frame
// per Flush. Under QOP auth-int or auth-conf (the metastore's
// hadoop.rpc.protection integrity or privacy) a frame's bytes are one
// GSS-API wrap token of the Thrift bytes, checksummed or encrypted.
type saslTransport struct {
	conn    thrift.TTransport // the socket
	kc      *krb.Client
	spn     string  // service principal, _HOST resolved
	qop     krb.QOP // wanted; empty: the strongest offered
	maxSize int32
	layer   securityLayer // the negotiated one
	tlsKey  string        // the key of the TLS settings, when TLS is off

	r    *bufio.Reader
	wbuf []byte
	rbuf []byte // rest of the frame being read
}

var _ thrift.TTransport = (*saslTransport)(nil)

// securityLayer protects frames after the negotiation (*krb.GSSAPI).
type securityLayer interface {
	QOP() krb.QOP
	Wrap(msg []byte) ([]byte, error)
	Unwrap(tok []byte) ([]byte, error)
}

// newSASLTransport wraps the (unopened) socket of a metastore whose
// service principal is spn.
// qop is the QOP to insist on (empty: the strongest the metastore offers).
func newSASLTransport(sock thrift.TTransport, kc *krb.Client, spn string, qop krb.QOP, maxSize int32) *saslTransport {
	return &saslTransport{conn: sock, kc: kc, spn: spn, qop: qop, maxSize: maxSize, r: bufio.NewReaderSize(sock, 64<<10)}
}

// QOP is the quality of protection negotiated.
func (t *saslTransport) QOP() krb.QOP { return t.layer.QOP() }

// Open opens the socket and authenticates.
func (t *saslTransport) Open() error {
	if err := t.conn.Open(); err != nil {
		return err
	}
	if err := t.negotiate(); err != nil {
		t.conn.Close()
		return err
	}
	return nil
}

// negotiate runs the SASL exchange.
func (t *saslTransport) negotiate() error {
	g, initial, err := t.kc.StartGSSAPI(t.spn, t.qop)
	if err != nil {
		return err
	}
	if err := t.sendNegotiation(saslStart, []byte("GSSAPI")); err != nil {
		return err
	}
	if err := t.sendNegotiation(saslOK, initial); err != nil {
		return err
	}
	clientDone := false
	for {
		status, payload, err := t.readNegotiation()
		if err != nil {
			return err
		}
		switch status {
		case saslBad, saslError:
			return fmt.Errorf("sasl: the metastore refused %s (service %s): %s", t.kc.Principal(), t.spn, payload)
		case saslComplete:
			if !clientDone {
				return fmt.Errorf("sasl: the metastore ended the exchange before %s was done", t.kc.Principal())
			}
			t.layer = g
			return nil
		case saslOK:
			if clientDone {
				return fmt.Errorf("sasl: the metastore sent another challenge after %s was done", t.kc.Principal())
			}
			resp, done, err := g.Step(payload)
			if err != nil {
				return err
			}
			st := byte(saslOK)
			if done {
				st, clientDone = saslComplete, true
			}
			if err := t.sendNegotiation(st, resp); err != nil {
				return err
			}
		default:
			return fmt.Errorf("sasl: unknown negotiation status %d from the metastore", status)
		}
	}
}

func (t *saslTransport) sendNegotiation(status byte, payload []byte) error {
	b := make([]byte, 5, 5+len(payload))
	b[0] = status
	binary.BigEndian.PutUint32(b[1:], uint32(len(payload)))
	b = append(b, payload...)
	if _, err := t.conn.Write(b); err != nil {
		return fmt.Errorf("sasl: send: %w", err)
	}
	return t.conn.Flush(context.Background())
}

func (t *saslTransport) readNegotiation() (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(t.r, hdr[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			orTLS := ""
			if t.tlsKey != "" {
				orTLS = fmt.Sprintf(" Or does it serve TLS (metastore.use.SSL=true), needing %s?", t.tlsKey)
			}
			return 0, nil, fmt.Errorf("sasl: the metastore closed the connection during authentication (does it run with metastore.sasl.enabled, and is its principal %s?%s): %w", t.spn, orTLS, err)
		}
		return 0, nil, fmt.Errorf("sasl: read: %w", err)
	}
	if t.tlsKey != "" && tlsAlert(hdr[:]) {
		return 0, nil, fmt.Errorf("sasl: the metastore answered with a TLS alert (%x): it serves TLS (metastore.use.SSL=true), "+
			"and hivedr connected without: set %s", hdr, t.tlsKey)
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > 1<<20 {
		return 0, nil, fmt.Errorf("sasl: negotiation message of %d bytes from the metastore (is it a SASL server?)", n)
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(t.r, payload); err != nil {
		return 0, nil, fmt.Errorf("sasl: read: %w", err)
	}
	return hdr[0], payload, nil
}

// Read reads from the current frame, reading the next one when it is used up.
func (t *saslTransport) Read(p []byte) (int, error) {
	if len(t.rbuf) == 0 {
		var hdr [4]byte
		if _, err := io.ReadFull(t.r, hdr[:]); err != nil {
			return 0, thrift.NewTTransportExceptionFromError(err)
		}
		n := binary.BigEndian.Uint32(hdr[:])
		if t.maxSize > 0 && n > uint32(t.maxSize) {
			return 0, thrift.NewTTransportException(thrift.UNKNOWN_TRANSPORT_EXCEPTION,
				fmt.Sprintf("sasl frame of %d bytes exceeds the limit of %d", n, t.maxSize))
		}
		buf := make([]byte, n)
		if _, err := io.ReadFull(t.r, buf); err != nil {
			return 0, thrift.NewTTransportExceptionFromError(err)
		}
		msg, err := t.layer.Unwrap(buf)
		if err != nil {
			return 0, thrift.NewTTransportException(thrift.UNKNOWN_TRANSPORT_EXCEPTION,
				fmt.Sprintf("sasl frame from the metastore (QOP %s): %v", t.layer.QOP(), err))
		}
		t.rbuf = msg
	}
	n := copy(p, t.rbuf)
	t.rbuf = t.rbuf[n:]
	return n, nil
}

// Write buffers p until Flush.
func (t *saslTransport) Write(p []byte) (int, error) {
	t.wbuf = append(t.wbuf, p...)
	return len(p), nil
}

// Flush sends the buffered bytes as one frame (wrapped under the
// negotiated QOP).
func (t *saslTransport) Flush(ctx context.Context) error {
	if len(t.wbuf) == 0 {
		return nil
	}
	payload, err := t.layer.Wrap(t.wbuf)
	if err != nil {
		return thrift.NewTTransportException(thrift.UNKNOWN_TRANSPORT_EXCEPTION,
			fmt.Sprintf("sasl frame to the metastore (QOP %s): %v", t.layer.QOP(), err))
	}
	frame := make([]byte, 4, 4+len(payload))
	binary.BigEndian.PutUint32(frame, uint32(len(payload)))
	frame = append(frame, payload...)
	t.wbuf = t.wbuf[:0]
	if _, err := t.conn.Write(frame); err != nil {
		return thrift.NewTTransportExceptionFromError(err)
	}
	return t.conn.Flush(ctx)
}

// RemainingBytes implements thrift.TTransport: frames do not say how much
// of a message is left.
func (t *saslTransport) RemainingBytes() uint64 { return ^uint64(0) }

// IsOpen implements thrift.TTransport.
func (t *saslTransport) IsOpen() bool { return t.conn.IsOpen() }

// Close closes the socket.
func (t *saslTransport) Close() error { return t.conn.Close() }

// hostOf returns the host of a host:port address.
func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}
