package transfer

import (
	"bytes"
	"crypto/hmac"
	"crypto/md5"
	"encoding/binary"
	"io"
	"net"
	"testing"
)

// TestChallengeQopChoice: of several QOPs offered, the preferred one is
// answered with when offered, else the strongest.
func TestChallengeQopChoice(t *testing.T) {
	for _, tc := range []struct{ offer, prefer, want string }{
		{"auth,auth-int", "auth", "auth"},
		{"auth,auth-int", "auth-int", "auth-int"},
		{"auth,auth-int,auth-conf", "", "auth-conf"},
		{"auth,auth-conf", "auth-int", "auth-conf"},
		{"auth-conf", "auth-conf", "auth-conf"},
	} {
		d := digestMD5Handshake{authID: []byte("id"), passwd: "pw", hostname: "0", service: "hdfs", preferQop: tc.prefer}
		resp, err := d.challengeStep1([]byte(`realm="0",nonce="n",qop="` + tc.offer + `",charset=utf-8,cipher="rc4",algorithm=md5-sess`))
		if err != nil {
			t.Fatal(err)
		}
		if d.token.Qop[0] != tc.want || !bytes.Contains(resp, []byte("qop="+tc.want+",")) {
			t.Errorf("offer %s, prefer %q: answered %s (%s), want %s", tc.offer, tc.prefer, d.token.Qop[0], resp, tc.want)
		}
	}
}

// TestIntegrityReadAcrossMessages: a read that takes the rest of one
// wrapped message and the start of the next returns both.
func TestIntegrityReadAcrossMessages(t *testing.T) {
	kic, kis := []byte("0123456789abcdef"), []byte("fedcba9876543210")
	client, server := net.Pipe()
	defer client.Close()
	c := newDigestMD5IntegrityConn(client, kic, kis)
	go func() {
		defer server.Close()
		for seq, msg := range []string{"first message", "second message"} {
			seqBuf := make([]byte, 4)
			binary.BigEndian.PutUint32(seqBuf, uint32(seq))
			m := hmac.New(md5.New, kis)
			m.Write(seqBuf)
			m.Write([]byte(msg))
			tok := append(append([]byte(msg), m.Sum(nil)[:10]...), 0, 1)
			tok = append(tok, seqBuf...)
			server.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(tok))), tok...))
		}
	}()
	head := make([]byte, 5)
	if _, err := io.ReadFull(c, head); err != nil {
		t.Fatal(err)
	}
	rest := make([]byte, len("first message"+"second message")-5)
	n, err := c.Read(rest)
	if err != nil || string(rest[:n]) != " message"+"second message" {
		t.Fatalf("read %d bytes %q (%v) across two messages, want both parts", n, rest[:n], err)
	}
}
