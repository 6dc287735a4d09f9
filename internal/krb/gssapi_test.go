package krb

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/jcmturner/gokrb5/v8/crypto"
	"github.com/jcmturner/gokrb5/v8/gssapi"
	"github.com/jcmturner/gokrb5/v8/iana/etypeID"
	"github.com/jcmturner/gokrb5/v8/iana/keyusage"
	"github.com/jcmturner/gokrb5/v8/types"
)

// acceptor is the server side of the security layer, as a test double:
// it makes tokens as an RFC 4121 acceptor does (rotated by rrc) and opens
// the client's.
type acceptor struct {
	t   *testing.T
	key types.EncryptionKey
	seq uint64
	rrc int
}

// keySizes are the key lengths of the etypes tested (gokrb5 reports 24
// for aes256-cts-hmac-sha384-192, whose keys are 32 bytes).
var keySizes = map[int32]int{
	etypeID.AES128_CTS_HMAC_SHA1_96: 16, etypeID.AES256_CTS_HMAC_SHA1_96: 32,
	etypeID.AES128_CTS_HMAC_SHA256_128: 16, etypeID.AES256_CTS_HMAC_SHA384_192: 32,
}

func testKey(t *testing.T, etype int32) types.EncryptionKey {
	t.Helper()
	k := make([]byte, keySizes[etype])
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return types.EncryptionKey{KeyType: etype, KeyValue: k}
}

// rotate rotates the token's body right by a.rrc and records it in the header.
func (a *acceptor) rotate(tok []byte) []byte {
	body := tok[wrapHeaderLen:]
	r := a.rrc % len(body)
	rot := append(append([]byte(nil), body[len(body)-r:]...), body[:len(body)-r]...)
	binary.BigEndian.PutUint16(tok[6:8], uint16(a.rrc))
	return append(tok[:wrapHeaderLen], rot...)
}

// wrap makes the acceptor's next token of msg.
func (a *acceptor) wrap(msg []byte, seal bool) []byte {
	a.t.Helper()
	seq := a.seq
	a.seq++
	if !seal {
		et, err := crypto.GetEtype(a.key.KeyType)
		if err != nil {
			a.t.Fatal(err)
		}
		wt := gssapi.WrapToken{Flags: flagSentByAcceptor, EC: uint16(et.GetHMACBitLength() / 8), SndSeqNum: seq, Payload: msg}
		if err := wt.SetCheckSum(a.key, keyusage.GSSAPI_ACCEPTOR_SEAL); err != nil {
			a.t.Fatal(err)
		}
		b, err := wt.Marshal()
		if err != nil {
			a.t.Fatal(err)
		}
		return a.rotate(b)
	}
	// A filler of 3 bytes, as an acceptor may add.
	hdr := wrapHeader(flagSentByAcceptor|flagSealed, 3, seq)
	plain := append(append(append([]byte(nil), msg...), 0xFF, 0xFF, 0xFF), hdr...)
	_, ct, err := encrypt(a.key, plain, keyusage.GSSAPI_ACCEPTOR_SEAL)
	if err != nil {
		a.t.Fatal(err)
	}
	return a.rotate(append(hdr, ct...))
}

// open checks a client token and returns its message and whether it was sealed.
func (a *acceptor) open(tok []byte) ([]byte, bool) {
	a.t.Helper()
	if tok[2]&flagSentByAcceptor != 0 {
		a.t.Fatalf("client token with the acceptor flag: %x", tok[:16])
	}
	if tok[2]&flagSealed != 0 {
		plain, err := crypto.DecryptMessage(tok[wrapHeaderLen:], a.key, keyusage.GSSAPI_INITIATOR_SEAL)
		if err != nil {
			a.t.Fatal(err)
		}
		if !bytes.Equal(plain[len(plain)-wrapHeaderLen:], tok[:wrapHeaderLen]) {
			a.t.Fatalf("header copy %x, header %x", plain[len(plain)-wrapHeaderLen:], tok[:wrapHeaderLen])
		}
		return plain[:len(plain)-wrapHeaderLen], true
	}
	var wt gssapi.WrapToken
	if err := wt.Unmarshal(tok, false); err != nil {
		a.t.Fatal(err)
	}
	if ok, err := wt.Verify(a.key, keyusage.GSSAPI_INITIATOR_SEAL); !ok {
		a.t.Fatal(err)
	}
	return wt.Payload, false
}

// TestGSSAPISecurityLayer runs the negotiation against each offer and then
// messages both ways, for the etypes a KDC issues session keys in.
func TestGSSAPISecurityLayer(t *testing.T) {
	for etype := range keySizes {
		for _, tc := range []struct {
			offer byte
			want  QOP
			got   QOP
			layer byte
		}{
			{layerNone | layerIntegrity | layerPrivacy, "", QOPAuthConf, layerPrivacy},
			{layerNone | layerIntegrity, "", QOPAuthInt, layerIntegrity},
			{layerNone, "", QOPAuth, layerNone},
			{layerNone | layerIntegrity | layerPrivacy, QOPAuthInt, QOPAuthInt, layerIntegrity},
			{layerPrivacy, QOPAuthConf, QOPAuthConf, layerPrivacy},
		} {
			key := testKey(t, etype)
			srv := &acceptor{t: t, key: key, seq: 7000, rrc: 28}
			g := newGSSAPI(key, "hive/meta@R", tc.want)
			resp, done, err := g.Step(srv.wrap([]byte{tc.offer, 0, 0x10, 0}, false))
			if err != nil || !done {
				t.Fatalf("etype %d offer %#x: Step: done %t, %v", etype, tc.offer, done, err)
			}
			if g.QOP() != tc.got {
				t.Fatalf("etype %d offer %#x want %q: QOP %q, want %q", etype, tc.offer, tc.want, g.QOP(), tc.got)
			}
			answer, sealed := srv.open(resp)
			if sealed || answer[0] != tc.layer {
				t.Fatalf("etype %d offer %#x: answer %x (sealed %t), want layer %#x unsealed", etype, tc.offer, answer, sealed, tc.layer)
			}
			if tc.layer == layerNone && !bytes.Equal(answer, []byte{layerNone, 0, 0, 0}) {
				t.Fatalf("answer %x: a client without a layer must take no buffer", answer)
			}
			for i, msg := range [][]byte{[]byte("get_table_req"), {}, bytes.Repeat([]byte("x"), 70000)} {
				tok, err := g.Wrap(msg)
				if err != nil {
					t.Fatal(err)
				}
				if tc.got == QOPAuth {
					if !bytes.Equal(tok, msg) {
						t.Fatalf("auth: Wrap changed the message")
					}
					continue
				}
				got, sealed := srv.open(tok)
				if !bytes.Equal(got, msg) || sealed != (tc.got == QOPAuthConf) {
					t.Fatalf("etype %d %s message %d: server read %d bytes sealed=%t", etype, tc.got, i, len(got), sealed)
				}
				if sealed && len(msg) > 8 && bytes.Contains(tok, msg[:8]) {
					t.Fatalf("auth-conf token carries the message in clear")
				}
				back, err := g.Unwrap(srv.wrap(msg, tc.got == QOPAuthConf))
				if err != nil || !bytes.Equal(back, msg) {
					t.Fatalf("etype %d %s message %d: Unwrap: %d bytes, %v", etype, tc.got, i, len(back), err)
				}
			}
		}
	}
}

// TestGSSAPIRefusals: what an attacker or a misconfigured server could
// send is refused.
func TestGSSAPIRefusals(t *testing.T) {
	key := testKey(t, etypeID.AES256_CTS_HMAC_SHA1_96)
	setup := func(t *testing.T, offer byte) (*GSSAPI, *acceptor) {
		srv := &acceptor{t: t, key: key, seq: 1}
		g := newGSSAPI(key, "hive/meta@R", "")
		if _, _, err := g.Step(srv.wrap([]byte{offer, 0, 0x10, 0}, false)); err != nil {
			t.Fatal(err)
		}
		return g, srv
	}
	t.Run("qop not offered", func(t *testing.T) {
		srv := &acceptor{t: t, key: key}
		g := newGSSAPI(key, "hive/meta@R", QOPAuthConf)
		_, _, err := g.Step(srv.wrap([]byte{layerNone | layerIntegrity, 0, 0x10, 0}, false))
		if !errors.Is(err, ErrSecurityLayer) || !strings.Contains(err.Error(), "auth-conf wanted, the server offers auth-int,auth") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("wrong key", func(t *testing.T) {
		srv := &acceptor{t: t, key: testKey(t, etypeID.AES256_CTS_HMAC_SHA1_96)}
		g := newGSSAPI(key, "hive/meta@R", "")
		if _, _, err := g.Step(srv.wrap([]byte{layerNone, 0, 0, 0}, false)); err == nil || !strings.Contains(err.Error(), "does not verify") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("unsealed under auth-conf", func(t *testing.T) {
		g, srv := setup(t, layerPrivacy)
		if _, err := g.Unwrap(srv.wrap([]byte("clear"), false)); err == nil || !strings.Contains(err.Error(), "sealed=false") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("tampered", func(t *testing.T) {
		g, srv := setup(t, layerPrivacy)
		tok := srv.wrap([]byte("get_table_req answer"), true)
		tok[len(tok)-20] ^= 1
		if _, err := g.Unwrap(tok); err == nil || !strings.Contains(err.Error(), "does not decrypt") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("replayed", func(t *testing.T) {
		g, srv := setup(t, layerIntegrity)
		tok := srv.wrap([]byte("one"), false)
		if _, err := g.Unwrap(tok); err != nil {
			t.Fatal(err)
		}
		if _, err := g.Unwrap(tok); err == nil || !strings.Contains(err.Error(), "sequence number 2, want 3") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("reflected", func(t *testing.T) {
		g, _ := setup(t, layerPrivacy)
		tok, err := g.Wrap([]byte("own message"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := g.Unwrap(tok); err == nil || !strings.Contains(err.Error(), "not sent by the acceptor") {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestParseQOP(t *testing.T) {
	for in, want := range map[string]QOP{"": "", "auth": QOPAuth, "Privacy": QOPAuthConf, "integrity": QOPAuthInt, "auth-conf": QOPAuthConf} {
		if got, err := ParseQOP(in); err != nil || got != want {
			t.Errorf("ParseQOP(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseQOP("conf"); err == nil {
		t.Error("ParseQOP(conf): no error")
	}
}
