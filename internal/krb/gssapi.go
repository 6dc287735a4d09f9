package krb

import (
	"bytes"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/jcmturner/gokrb5/v8/crypto"
	"github.com/jcmturner/gokrb5/v8/gssapi"
	"github.com/jcmturner/gokrb5/v8/iana/keyusage"
	"github.com/jcmturner/gokrb5/v8/spnego"
	"github.com/jcmturner/gokrb5/v8/types"
)

// QOP is a SASL quality of protection: what the security layer negotiated
// after authentication does to every later message.
type QOP string

// The SASL QOPs, weakest first. Hadoop names them authentication, integrity
// and privacy (hadoop.rpc.protection).
const (
	// QOPAuth: authentication only, messages travel as they are.
	QOPAuth QOP = "auth"
	// QOPAuthInt: every message carries a keyed checksum.
	QOPAuthInt QOP = "auth-int"
	// QOPAuthConf: every message is encrypted (and checksummed).
	QOPAuthConf QOP = "auth-conf"
)

// ParseQOP parses a QOP as SASL (auth, auth-int, auth-conf) or Hadoop
// (authentication, integrity, privacy) names it. Empty is returned as is:
// the strongest QOP the server offers.
func ParseQOP(s string) (QOP, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "":
		return "", nil
	case "auth", "authentication":
		return QOPAuth, nil
	case "auth-int", "integrity":
		return QOPAuthInt, nil
	case "auth-conf", "privacy":
		return QOPAuthConf, nil
	}
	return "", fmt.Errorf("QOP %q is not one of auth, auth-int, auth-conf (authentication, integrity, privacy)", s)
}

// SASL GSSAPI security layers (RFC 4752 section 3.3), bits of the first
// byte of the server's last challenge and of the client's answer.
const (
	layerNone      = 1
	layerIntegrity = 2
	layerPrivacy   = 4
)

// layers maps each QOP to its security layer bit.
var layers = []struct {
	qop QOP
	bit byte
}{{QOPAuthConf, layerPrivacy}, {QOPAuthInt, layerIntegrity}, {QOPAuth, layerNone}}

// offeredQOPs names the QOPs of a security layer bitmask, strongest first.
func offeredQOPs(mask byte) string {
	var names []string
	for _, l := range layers {
		if mask&l.bit != 0 {
			names = append(names, string(l.qop))
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ",")
}

// ErrSecurityLayer is wrapped when the server offers no security layer the
// client accepts.
var ErrSecurityLayer = errors.New("no SASL security layer in common")

// maxWrappedSize is the largest wrapped message the client says it
// receives (RFC 4752: three bytes). Thrift's SASL transport wraps each
// whole frame regardless, as Java's does, so it is advisory.
const maxWrappedSize = 1<<24 - 1

// RFC 4121 wrap token flags.
const (
	flagSentByAcceptor = 0x01
	flagSealed         = 0x02
	flagAcceptorSubkey = 0x04
)

// wrapHeaderLen is the length of an RFC 4121 wrap token's header.
const wrapHeaderLen = 16

// GSSAPI is the client side of one SASL GSSAPI exchange (RFC 4752) and,
// once it is done, of the security layer it negotiated: with QOP auth-int
// or auth-conf, Wrap and Unwrap protect every later message with Kerberos
// v5 wrap tokens (RFC 4121), checksummed or encrypted. Start gives the
// initial response, Step answers each challenge.
//
// No mutual-authentication flag is sent; the server still proves itself:
// its security-layer offer is a GSS wrap token that only a holder of the
// service key could have made with the session key in the ticket.
type GSSAPI struct {
	key  types.EncryptionKey
	spn  string
	want QOP // "": the strongest offered
	done bool
	qop  QOP

	sendSeq uint64
	recvSeq uint64 // the sequence number the next server token must carry
	recvAny bool   // no server token seen yet
}

// StartGSSAPI gets a ticket for spn and returns the exchange and its
// initial response (the Kerberos AP-REQ as a GSS-API token). want is the
// QOP to insist on; empty takes the strongest the server offers.
func (c *Client) StartGSSAPI(spn string, want QOP) (*GSSAPI, []byte, error) {
	if _, err := ParseQOP(string(want)); err != nil {
		return nil, nil, err
	}
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
	return newGSSAPI(key, spn, want), b, nil
}

func newGSSAPI(key types.EncryptionKey, spn string, want QOP) *GSSAPI {
	return &GSSAPI{key: key, spn: spn, want: want, recvAny: true}
}

// Step answers the server's challenge. The only challenge is the server's
// wrapped security-layer offer; the answer picks the wanted layer (or the
// strongest offered). done is true once the answer is the last message the
// client sends.
func (g *GSSAPI) Step(challenge []byte) (response []byte, done bool, err error) {
	if g.done {
		return nil, true, fmt.Errorf("sasl gssapi with %s: unexpected challenge after the exchange ended", g.spn)
	}
	offer, err := g.unwrap(challenge, false)
	if err != nil {
		return nil, false, fmt.Errorf("sasl gssapi with %s: the server's security layer offer (is it %s?): %w", g.spn, g.spn, err)
	}
	if len(offer) != 4 {
		return nil, false, fmt.Errorf("sasl gssapi with %s: security layer offer of %d bytes, want 4", g.spn, len(offer))
	}
	layer, qop, err := chooseLayer(offer[0], g.want)
	if err != nil {
		return nil, false, fmt.Errorf("sasl gssapi with %s: %w", g.spn, err)
	}
	// The layer, the largest wrapped message taken (none without a
	// layer), no authorization ID (act as ourselves); wrapped without
	// confidentiality (RFC 4752 section 3.1).
	var answer []byte
	if layer == layerNone {
		answer = []byte{layer, 0, 0, 0}
	} else {
		answer = binary.BigEndian.AppendUint32(nil, uint32(layer)<<24|maxWrappedSize)
	}
	out, err := g.wrap(answer, false)
	if err != nil {
		return nil, false, fmt.Errorf("sasl gssapi with %s: wrap the answer: %w", g.spn, err)
	}
	g.done, g.qop = true, qop
	return out, true, nil
}

// chooseLayer picks the security layer of want (the strongest offered when
// empty) from the server's offer.
func chooseLayer(offer byte, want QOP) (byte, QOP, error) {
	for _, l := range layers {
		if offer&l.bit != 0 && (want == "" || want == l.qop) {
			return l.bit, l.qop, nil
		}
	}
	if want == "" {
		return 0, "", fmt.Errorf("%w: the server offers security layers %#x", ErrSecurityLayer, offer)
	}
	return 0, "", fmt.Errorf("%w: QOP %s wanted, the server offers %s", ErrSecurityLayer, want, offeredQOPs(offer))
}

// QOP is the quality of protection negotiated; empty before Step is done.
func (g *GSSAPI) QOP() QOP { return g.qop }

// Wrap protects one message for the server under the negotiated QOP:
// encrypted with auth-conf, checksummed with auth-int, as it is with auth.
func (g *GSSAPI) Wrap(msg []byte) ([]byte, error) {
	switch g.qop {
	case QOPAuthConf:
		return g.wrap(msg, true)
	case QOPAuthInt:
		return g.wrap(msg, false)
	case QOPAuth:
		return msg, nil
	}
	return nil, errors.New("sasl gssapi: wrap before the exchange is done")
}

// Unwrap checks (and with auth-conf decrypts) one message from the server
// under the negotiated QOP and returns its content.
func (g *GSSAPI) Unwrap(tok []byte) ([]byte, error) {
	switch g.qop {
	case QOPAuthConf, QOPAuthInt:
		return g.unwrap(tok, g.qop == QOPAuthConf)
	case QOPAuth:
		return tok, nil
	}
	return nil, errors.New("sasl gssapi: unwrap before the exchange is done")
}

// wrap makes the initiator's next wrap token of msg (RFC 4121 section
// 4.2.6.2): encrypted (msg and a copy of the header, no filler, no
// rotation) when seal, else msg and a checksum of msg and the header.
func (g *GSSAPI) wrap(msg []byte, seal bool) ([]byte, error) {
	seq := g.sendSeq
	if !seal {
		et, err := crypto.GetEtype(g.key.KeyType)
		if err != nil {
			return nil, err
		}
		wt := gssapi.WrapToken{EC: uint16(et.GetHMACBitLength() / 8), SndSeqNum: seq, Payload: msg}
		if err := wt.SetCheckSum(g.key, keyusage.GSSAPI_INITIATOR_SEAL); err != nil {
			return nil, err
		}
		out, err := wt.Marshal()
		if err != nil {
			return nil, err
		}
		g.sendSeq++
		return out, nil
	}
	hdr := wrapHeader(flagSealed, 0, seq)
	_, ct, err := encrypt(g.key, append(append(make([]byte, 0, len(msg)+wrapHeaderLen), msg...), hdr...), keyusage.GSSAPI_INITIATOR_SEAL)
	if err != nil {
		return nil, err
	}
	g.sendSeq++
	return append(hdr, ct...), nil
}

// encrypt encrypts plain with key for usage: the confounded ciphertext and
// its integrity checksum.
func encrypt(key types.EncryptionKey, plain []byte, usage uint32) ([]byte, []byte, error) {
	et, err := crypto.GetEtype(key.KeyType)
	if err != nil {
		return nil, nil, err
	}
	return et.EncryptMessage(key.KeyValue, plain, usage)
}

// wrapHeader is an RFC 4121 wrap token header with RRC 0.
func wrapHeader(flags byte, ec uint16, seq uint64) []byte {
	h := make([]byte, wrapHeaderLen)
	h[0], h[1], h[2], h[3] = 0x05, 0x04, flags, 0xFF
	binary.BigEndian.PutUint16(h[4:6], ec)
	binary.BigEndian.PutUint64(h[8:16], seq)
	return h
}

// unwrap checks a wrap token from the server, sealed (encrypted) exactly
// when seal, and returns its message. Tokens must arrive in the server's
// sequence, one after another.
func (g *GSSAPI) unwrap(tok []byte, seal bool) ([]byte, error) {
	if len(tok) < wrapHeaderLen {
		return nil, fmt.Errorf("wrap token of %d bytes is shorter than its header", len(tok))
	}
	if tok[0] != 0x05 || tok[1] != 0x04 || tok[3] != 0xFF {
		return nil, fmt.Errorf("not a wrap token (starts %x)", tok[:4])
	}
	flags := tok[2]
	switch {
	case flags&flagSentByAcceptor == 0:
		return nil, errors.New("wrap token not sent by the acceptor")
	case flags&flagAcceptorSubkey != 0:
		return nil, errors.New("wrap token under an acceptor subkey, which was never negotiated")
	case (flags&flagSealed != 0) != seal:
		return nil, fmt.Errorf("wrap token sealed=%t, want sealed=%t under QOP %s", flags&flagSealed != 0, seal, g.qop)
	}
	ec := int(binary.BigEndian.Uint16(tok[4:6]))
	rrc := int(binary.BigEndian.Uint16(tok[6:8]))
	seq := binary.BigEndian.Uint64(tok[8:16])
	body := append([]byte(nil), tok[wrapHeaderLen:]...)
	if len(body) > 0 {
		// Undo the right rotation by rrc.
		r := rrc % len(body)
		body = append(body[r:], body[:r]...)
	}
	var msg []byte
	if seal {
		plain, err := crypto.DecryptMessage(body, g.key, keyusage.GSSAPI_ACCEPTOR_SEAL)
		if err != nil {
			return nil, fmt.Errorf("wrap token does not decrypt: %w", err)
		}
		if len(plain) < ec+wrapHeaderLen {
			return nil, fmt.Errorf("sealed wrap token of %d bytes holds no header copy", len(plain))
		}
		want := wrapHeader(flags, uint16(ec), seq)
		if subtle.ConstantTimeCompare(plain[len(plain)-wrapHeaderLen:], want) != 1 {
			return nil, errors.New("sealed wrap token's header copy does not match its header")
		}
		msg = plain[:len(plain)-wrapHeaderLen-ec]
	} else {
		if ec > len(body) {
			return nil, fmt.Errorf("wrap token of %d bytes with a %d-byte checksum", len(tok), ec)
		}
		wt := gssapi.WrapToken{Flags: flags, SndSeqNum: seq, Payload: body[:len(body)-ec], CheckSum: body[len(body)-ec:]}
		if ok, err := wt.Verify(g.key, keyusage.GSSAPI_ACCEPTOR_SEAL); !ok {
			return nil, fmt.Errorf("wrap token does not verify: %w", err)
		}
		msg = wt.Payload
	}
	if !g.recvAny && seq != g.recvSeq {
		return nil, fmt.Errorf("wrap token with sequence number %d, want %d (replayed, lost or reordered)", seq, g.recvSeq)
	}
	g.recvAny, g.recvSeq = false, seq+1
	return bytes.Clone(msg), nil
}
