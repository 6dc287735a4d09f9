package connect

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/hivedr/hivedr/internal/kafka"
)

// verdictWait bounds how long certCheck waits for a server's alert.
const verdictWait = 3 * time.Second

// certCheck is the registry client's transport when TLS is on and no
// client certificate is configured. Under TLS 1.3 a server that requires
// one refuses its absence only after the client's handshake is done, with
// an alert the client may never read: the request's write meets a reset
// connection first, and an error that says nothing of certificates would
// look like an outage, waited out rather than reported. So certCheck
// notes when a server asks for a client certificate (its
// CertificateRequest), and when a request then fails below HTTP it asks
// the server's verdict on a connection of its own: a handshake and a read
// with nothing sent, which returns the server's alert (certificate
// required) if it refuses connections without one. The request then fails
// with that alert (kafka.IsTLSRefusal, IsAuthError), the first error
// naming the reset. A server that
// only requests a certificate, or one that is away, leaves the error as it
// was.
type certCheck struct {
	base  http.RoundTripper
	tc    *tls.Config // base's, without a client certificate
	asked atomic.Bool // a server asked for a client certificate
}

func newCertCheck(tc *tls.Config) *certCheck {
	c := &certCheck{tc: tc.Clone()}
	noted := tc.Clone()
	noted.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		c.asked.Store(true)
		return &tls.Certificate{}, nil // none: the handshake goes on without
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = noted
	c.base = tr
	return c
}

func (c *certCheck) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(req)
	if err == nil || req.URL.Scheme != "https" || !c.asked.Load() || kafka.IsTLSRefusal(err) {
		return resp, err
	}
	if alert := c.verdict(req.Context(), req.URL.Hostname(), req.URL.Port()); alert != nil {
		// The alert first: IsTLSRefusal looks at the first net.OpError,
		// and err holds one of its own (a write's reset).
		return nil, fmt.Errorf("%w: the server refuses connections without a client certificate, and the configuration gives none (the request failed: %v)", alert, err)
	}
	return resp, err
}

// verdict connects to host:port, completes a handshake without a client
// certificate and reads, sending nothing: a server that requires one
// answers with an alert, returned; nil if it does not within verdictWait
// (it waits for a request) or the connection fails otherwise.
func (c *certCheck) verdict(ctx context.Context, host, port string) error {
	if port == "" {
		port = "443"
	}
	ctx, cancel := context.WithTimeout(ctx, verdictWait)
	defer cancel()
	tc := c.tc.Clone()
	if tc.ServerName == "" {
		tc.ServerName = host
	}
	conn, err := (&tls.Dialer{Config: tc}).DialContext(ctx, "tcp", net.JoinHostPort(host, port))
	if err != nil {
		if kafka.IsTLSRefusal(err) {
			return err // TLS 1.2: the refusal comes within the handshake
		}
		return nil
	}
	defer conn.Close()
	if d, ok := ctx.Deadline(); ok {
		conn.SetReadDeadline(d)
	}
	if _, err := conn.Read(make([]byte, 1)); err != nil && kafka.IsTLSRefusal(err) {
		return err
	}
	return nil
}
