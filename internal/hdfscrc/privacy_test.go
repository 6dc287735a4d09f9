package hdfscrc

import (
	"bufio"
	"bytes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// serverView is the DataNode's side of a client's DIGEST-MD5 session: the
// same keys, each direction's swapped.
func serverView(s *digestSession) *digestSession {
	v := *s
	v.kic, v.kis = s.kis, s.kic
	v.enc, v.dec = s.dec, s.enc
	return &v
}

// TestDigestWrapPrivacy: under auth-conf a wrapped message is encrypted
// (the plaintext does not show) and unwraps with the peer's keys, in order;
// a changed byte is refused.
func TestDigestWrapPrivacy(t *testing.T) {
	c := newDigestSession("u", "0", "p", "n", "cn", "auth-conf", dtDigestURI)
	srv := serverView(newDigestSession("u", "0", "p", "n", "cn", "auth-conf", dtDigestURI))
	for i, msg := range [][]byte{[]byte("first secret message"), {}, bytes.Repeat([]byte("block data "), 100)} {
		tok := c.wrap(msg)
		if len(msg) > 0 && bytes.Contains(tok, msg[:10]) {
			t.Fatalf("message %d: the token carries the message in clear", i)
		}
		got, err := srv.unwrap(tok)
		if err != nil || !bytes.Equal(got, msg) {
			t.Fatalf("message %d: unwrap = %q, %v", i, got, err)
		}
		back, err := c.unwrap(srv.wrap(msg))
		if err != nil || !bytes.Equal(back, msg) {
			t.Fatalf("message %d: the server's token unwraps to %q, %v", i, back, err)
		}
	}
	tok := c.wrap([]byte("payload"))
	tok[2] ^= 1
	if _, err := srv.unwrap(tok); err == nil || !strings.Contains(err.Error(), "integrity") {
		t.Errorf("changed byte: err = %v, want an integrity error", err)
	}
}

// fakeEncryptingDataNode answers one SASL handshake on conn as a DataNode
// with QOP auth-conf does, checking the client's credentials are user and
// password and that it asks for cipher rc4 and offers AES/CTR; with aes it
// answers with AES/CTR keys (as with dfs.encrypt.data.transfer.cipher.suites)
// and speaks AES from then on, else the DIGEST-MD5 layer. It then reads
// len(want) bytes, checks they are want, and sends answer.
func fakeEncryptingDataNode(conn net.Conn, user, password string, aes bool, want, answer []byte) error {
	r := bufio.NewReader(conn)
	var magic [4]byte
	if _, err := io.ReadFull(r, magic[:]); err != nil || binary.BigEndian.Uint32(magic[:]) != saslMagic {
		return fmt.Errorf("magic %x, %v", magic, err)
	}
	if _, err := readEncryptorMessage(r); err != nil {
		return err
	}
	const nonce = "bm9uY2UtZnJvbS10aGUtZGF0YW5vZGU="
	challenge := `realm="0",nonce="` + nonce + `",qop="auth-conf",charset=utf-8,cipher="3des,rc4,des,rc4-56,rc4-40",algorithm=md5-sess`
	if _, err := conn.Write(marshalEncryptorMessage([]byte(challenge), false)); err != nil {
		return err
	}
	m, err := readEncryptorMessage(r)
	if err != nil {
		return err
	}
	d, err := parseDigestChallenge(string(m.Payload))
	if err != nil {
		return err
	}
	if d["username"] != user || d["qop"] != "auth-conf" || d["cipher"] != "rc4" {
		return fmt.Errorf("response %q: want user %q, qop auth-conf, cipher rc4", m.Payload, user)
	}
	if m.CipherOption == nil || m.CipherOption.Suite != cipherSuiteAESCTR {
		return fmt.Errorf("the client offers cipher option %+v, want AES/CTR", m.CipherOption)
	}
	cs := newDigestSession(user, "0", password, nonce, d["cnonce"], "auth-conf", dtDigestURI)
	if d["response"] != cs.response() {
		return fmt.Errorf("response value %s, want %s (wrong password?)", d["response"], cs.response())
	}
	srv := serverView(cs)
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, encStatusSuccess)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendBytes(b, []byte("rspauth="+srv.rspauth()))
	var rw io.ReadWriter
	if aes {
		keys := make([]byte, 32+16+32+16)
		rand.Read(keys)
		inKey, inIV, outKey, outIV := keys[:32], keys[32:48], keys[48:80], keys[80:]
		var opt []byte
		for i, f := range [][]byte{nil, srv.wrap(inKey), inIV, srv.wrap(outKey), outIV} {
			if i == 0 {
				opt = protowire.AppendTag(opt, 1, protowire.VarintType)
				opt = protowire.AppendVarint(opt, cipherSuiteAESCTR)
				continue
			}
			opt = protowire.AppendTag(opt, protowire.Number(i+1), protowire.BytesType)
			opt = protowire.AppendBytes(opt, f)
		}
		b = protowire.AppendTag(b, 4, protowire.BytesType)
		b = protowire.AppendBytes(b, opt)
		dec, err := aesCTR(inKey, inIV)
		if err != nil {
			return err
		}
		enc, err := aesCTR(outKey, outIV)
		if err != nil {
			return err
		}
		rw = &aesStream{r: cipher.StreamReader{S: dec, R: r}, w: cipher.StreamWriter{S: enc, W: conn}}
	} else {
		rw = &saslConn{r: r, w: conn, dg: srv}
	}
	if _, err := conn.Write(protowire.AppendBytes(nil, b)); err != nil {
		return err
	}
	got := make([]byte, len(want))
	if _, err := io.ReadFull(rw, got); err != nil || !bytes.Equal(got, want) {
		return fmt.Errorf("read request %q, %v; want %q", got, err, want)
	}
	_, err = rw.Write(answer)
	return err
}

// TestSASLHandshakePrivacy runs the client's handshake under "privacy"
// against a DataNode that switches to AES/CTR and one that keeps the
// DIGEST-MD5 layer, with a block token and with a data encryption key as
// credentials: the request and the answer cross intact, and never in
// clear.
func TestSASLHandshakePrivacy(t *testing.T) {
	tok := blockToken{Identifier: []byte("block-token-id"), Password: []byte("block-token-pw")}
	dek := &DataEncryptionKey{KeyID: -7, BlockPoolID: "BP-1-127.0.0.1-1", Nonce: []byte("nonce"), Key: []byte("0123456789abcdef")}
	req := []byte("OP_BLOCK_CHECKSUM request of the client")
	answer := []byte("BlockOpResponseProto of the DataNode")
	for _, aes := range []bool{true, false} {
		for _, withKey := range []bool{false, true} {
			t.Run(fmt.Sprintf("aes=%t,key=%t", aes, withKey), func(t *testing.T) {
				user, password := base64.StdEncoding.EncodeToString(tok.Identifier), base64.StdEncoding.EncodeToString(tok.Password)
				var k *DataEncryptionKey
				if withKey {
					k = dek
					user, password = "-7 BP-1-127.0.0.1-1 "+base64.StdEncoding.EncodeToString(dek.Nonce), base64.StdEncoding.EncodeToString(dek.Key)
				}
				client, server := net.Pipe()
				defer client.Close()
				wire := &recorder{Conn: server}
				done := make(chan error, 1)
				go func() {
					defer server.Close()
					server.SetDeadline(time.Now().Add(10 * time.Second))
					done <- fakeEncryptingDataNode(wire, user, password, aes, req, answer)
				}()
				client.SetDeadline(time.Now().Add(10 * time.Second))
				rw, err := saslHandshake(client, tok, ProtectionPrivacy, k)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := rw.Write(req); err != nil {
					t.Fatal(err)
				}
				got := make([]byte, len(answer))
				if _, err := io.ReadFull(rw, got); err != nil || !bytes.Equal(got, answer) {
					t.Fatalf("answer %q, %v; want %q (server: %v)", got, err, answer, <-done)
				}
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				if bytes.Contains(wire.bytes(), req[:16]) || bytes.Contains(wire.bytes(), answer[:16]) {
					t.Error("the request or the answer crossed the wire in clear")
				}
			})
		}
	}
}

// recorder is a connection that records every byte read and written.
type recorder struct {
	net.Conn
	buf bytes.Buffer
}

func (r *recorder) Read(p []byte) (int, error) {
	n, err := r.Conn.Read(p)
	r.buf.Write(p[:n])
	return n, err
}

func (r *recorder) Write(p []byte) (int, error) {
	r.buf.Write(p)
	return r.Conn.Write(p)
}

func (r *recorder) bytes() []byte { return r.buf.Bytes() }
