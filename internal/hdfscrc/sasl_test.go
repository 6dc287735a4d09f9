package hdfscrc

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"
)

// TestDigestRFC2831 checks the DIGEST-MD5 arithmetic against the example
// exchange of RFC 2831 section 4.
func TestDigestRFC2831(t *testing.T) {
	s := newDigestSession("chris", "elwood.innosoft.com", "secret", "OA6MG9tEQGm2hh", "OA6MHXh6VqTrRk", "auth", "imap/elwood.innosoft.com")
	if got, want := s.response(), "d388dad90d4bbd760a152321f2143af7"; got != want {
		t.Errorf("response = %s, want %s", got, want)
	}
	if got, want := s.rspauth(), "ea40f60335c427b5527b84dbabcdfffd"; got != want {
		t.Errorf("rspauth = %s, want %s", got, want)
	}
}

// TestDigestWrap checks that a client's wrapped message unwraps with the
// peer's keys (a server's view is the client's with Kic and Kis swapped),
// and that a changed byte, a replay and a wrong type are refused.
func TestDigestWrap(t *testing.T) {
	c := newDigestSession("u", "0", "p", "n", "cn", "auth-int", "hdfs/0")
	srv := *c
	srv.kic, srv.kis = c.kis, c.kic
	for i, msg := range [][]byte{[]byte("first"), {}, bytes.Repeat([]byte{7}, 1000)} {
		tok := c.wrap(msg)
		got, err := srv.unwrap(tok)
		if err != nil || !bytes.Equal(got, msg) {
			t.Fatalf("message %d: unwrap = %q, %v", i, got, err)
		}
		if _, err := srv.unwrap(tok); err == nil || !strings.Contains(err.Error(), "sequence number") {
			t.Errorf("message %d: replay: err = %v, want a sequence number error", i, err)
		}
	}
	tok := c.wrap([]byte("payload"))
	tok[0] ^= 1
	if _, err := srv.unwrap(tok); err == nil || !strings.Contains(err.Error(), "integrity") {
		t.Errorf("changed byte: err = %v, want an integrity error", err)
	}
	if _, err := srv.unwrap([]byte("short")); err == nil {
		t.Error("a 5-byte token unwrapped")
	}
}

func TestParseDigestChallenge(t *testing.T) {
	d, err := parseDigestChallenge(`realm="0",nonce="a\"b,c",qop="auth-int",qop=auth, charset=utf-8,algorithm=md5-sess`)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"realm": "0", "nonce": `a"b,c`, "qop": "auth-int,auth", "charset": "utf-8", "algorithm": "md5-sess"} {
		if d[k] != want {
			t.Errorf("%s = %q, want %q", k, d[k], want)
		}
	}
	for _, bad := range []string{`realm`, `nonce="open`, `=x`} {
		if _, err := parseDigestChallenge(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestDecodeBlockToken decodes a token encoded as Hadoop's
// Token.encodeToUrlString does, with a one-byte and a two-byte vint length.
func TestDecodeBlockToken(t *testing.T) {
	id := bytes.Repeat([]byte{0xab}, 200) // length 200: vint 0x8f 0xc8
	var w []byte
	w = append(w, 0x8f, 200)
	w = append(w, id...)
	w = append(w, 3, 'p', 'w', 'd')
	w = append(w, 19)
	w = append(w, "HDFS_BLOCK_TOKEN"+"xyz"...)
	w = append(w, 0)
	got, err := decodeBlockToken(base64.RawURLEncoding.EncodeToString(w))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Identifier, id) || string(got.Password) != "pwd" || got.Kind != "HDFS_BLOCK_TOKENxyz" || got.Service != "" {
		t.Errorf("decoded %+v", got)
	}
	if tok, err := decodeBlockToken(""); err != nil || !tok.empty() {
		t.Errorf("empty string: %+v, %v", tok, err)
	}
	for _, bad := range []string{"!!", base64.RawURLEncoding.EncodeToString([]byte{0x8f, 200, 1})} {
		if _, err := decodeBlockToken(bad); err == nil {
			t.Errorf("%q decoded", bad)
		}
	}
}

func TestCheckProtection(t *testing.T) {
	for _, ok := range []string{"", "authentication", "integrity", "privacy"} {
		if err := CheckProtection(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"auth-conf", "auth"} {
		if err := CheckProtection(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
