package krb

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"

	"github.com/jcmturner/gokrb5/v8/spnego"
)

// Transport is an http.RoundTripper that authenticates every request with
// SPNEGO (RFC 4559: "Authorization: Negotiate <token>") as the client's
// principal, for a service whose principal is SPN (HTTP/_HOST@REALM style;
// _HOST becomes each request's host). It sends the token with the first
// request rather than waiting for a 401, so a request with a body is never
// sent twice. Hadoop answers with a signed cookie that could stand in for
// later tokens; Transport does not keep it (service tickets are cached, so
// a token costs no KDC round trip).
type Transport struct {
	// Base carries the requests; nil means http.DefaultTransport.
	Base http.RoundTripper
	// Client is the principal the requests authenticate as.
	Client *Client
	// SPN is the service principal pattern (e.g. HTTP/_HOST@REALM).
	SPN string
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	host := req.URL.Hostname()
	spn := ServicePrincipal(t.SPN, host)
	tok, err := t.token(spn)
	if err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Negotiate "+tok)
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(r)
}

// token returns a SPNEGO token for spn, logging in again once when the
// ticket cannot be had.
func (t *Transport) token(spn string) (string, error) {
	// Warm (or refresh) the ticket through serviceTicket, which logs in
	// again from the keytab if it must; the SPNEGO client then finds it
	// in the cache of the gokrb5 client that got it.
	name, _, _ := strings.Cut(spn, "@")
	cl, _, _, err := t.Client.serviceTicket(name)
	if err != nil {
		return "", err
	}
	s := spnego.SPNEGOClient(cl, name)
	if err := s.AcquireCred(); err != nil {
		return "", fmt.Errorf("kerberos: %s: SPNEGO for %s: %w", t.Client.Principal(), name, err)
	}
	st, err := s.InitSecContext()
	if err != nil {
		return "", fmt.Errorf("kerberos: %s: SPNEGO for %s: %w", t.Client.Principal(), name, err)
	}
	b, err := st.Marshal()
	if err != nil {
		return "", fmt.Errorf("kerberos: %s: SPNEGO for %s: %w", t.Client.Principal(), name, err)
	}
	return base64.StdEncoding.EncodeToString(b), nil
}
