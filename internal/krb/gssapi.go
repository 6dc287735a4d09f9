package krb

import (
	"errors"
	"fmt"

	"github.com/jcmturner/gokrb5/v8/gssapi"
	"github.com/jcmturner/gokrb5/v8/iana/keyusage"
	"github.com/jcmturner/gokrb5/v8/spnego"
	"github.com/jcmturner/gokrb5/v8/types"
)

// SASL GSSAPI security layers (RFC 4752 section 3.3), the first byte of
// the server's last challenge and of the client's answer.
const (
	layerNone      = 1
	layerIntegrity = 2
	layerPrivacy   = 4
)

// ErrSecurityLayer is wrapped when a server insists on a SASL security layer
// (QOP auth-int or auth-conf) that this client does not implement.
var ErrSecurityLayer = errors.New("server requires a SASL integrity or privacy layer (QOP auth-int/auth-conf); hivedr speaks QOP auth only (hadoop.rpc.protection=authentication)")

// GSSAPI is the client side of one SASL GSSAPI exchange (RFC 4752) with
// QOP auth: authentication only, no security layer afterwards, which is how
// Hive Metastores and Hadoop services run with hadoop.rpc.protection at its
// default. Start gives the initial response, Step answers each challenge.
//
// No mutual-authentication flag is sent; the server still proves itself:
// its security-layer offer is a GSS wrap token that only a holder of the
// service key could have made with the session key in the ticket.
type GSSAPI struct {
	key  types.EncryptionKey
	spn  string
	done bool
}

// StartGSSAPI gets a ticket for spn and returns the exchange and its
// initial response (the Kerberos AP-REQ as a GSS-API token).
func (c *Client) StartGSSAPI(spn string) (*GSSAPI, []byte, error) {
	tkt, key, err := c.ServiceTicket(spn)
	if err != nil {
		return nil, nil, err
	}
	tok, err := spnego.NewKRB5TokenAPREQ(c.GoKrb5(), tkt, key,
		[]int{gssapi.ContextFlagInteg, gssapi.ContextFlagConf}, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("kerberos: %s: GSS-API token for %s: %w", c.principal, spn, err)
	}
	b, err := tok.Marshal()
	if err != nil {
		return nil, nil, fmt.Errorf("kerberos: %s: GSS-API token for %s: %w", c.principal, spn, err)
	}
	return &GSSAPI{key: key, spn: spn}, b, nil
}

// Step answers the server's challenge. The only challenge QOP auth has is
// the server's wrapped security-layer offer; the answer picks no layer.
// done is true once the answer is the last message the client sends.
func (g *GSSAPI) Step(challenge []byte) (response []byte, done bool, err error) {
	if g.done {
		return nil, true, fmt.Errorf("sasl gssapi with %s: unexpected challenge after the exchange ended", g.spn)
	}
	var wt gssapi.WrapToken
	if err := wt.Unmarshal(challenge, true); err != nil {
		return nil, false, fmt.Errorf("sasl gssapi with %s: decode the server's wrap token: %w", g.spn, err)
	}
	if ok, err := wt.Verify(g.key, keyusage.GSSAPI_ACCEPTOR_SEAL); !ok {
		return nil, false, fmt.Errorf("sasl gssapi with %s: the server's wrap token does not verify (is it %s?): %v", g.spn, g.spn, err)
	}
	if len(wt.Payload) != 4 {
		return nil, false, fmt.Errorf("sasl gssapi with %s: security layer offer of %d bytes, want 4", g.spn, len(wt.Payload))
	}
	if wt.Payload[0]&layerNone == 0 {
		return nil, false, fmt.Errorf("sasl gssapi with %s: %w", g.spn, ErrSecurityLayer)
	}
	// No layer, no maximum buffer, no authorization ID (act as ourselves).
	out, err := gssapi.NewInitiatorWrapToken([]byte{layerNone, 0, 0, 0}, g.key)
	if err != nil {
		return nil, false, fmt.Errorf("sasl gssapi with %s: wrap the answer: %w", g.spn, err)
	}
	b, err := out.Marshal()
	if err != nil {
		return nil, false, fmt.Errorf("sasl gssapi with %s: wrap the answer: %w", g.spn, err)
	}
	g.done = true
	return b, true, nil
}
