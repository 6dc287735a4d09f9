package hdfscrc

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"io"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// Fuzz targets for what this package reads from DataNodes and from the
// NameNode's answers: bytes off the network, which a faulty or hostile
// peer chooses. Each must not panic, and what it accepts must be
// consistent. `make fuzz` runs them; crashers found are kept under
// testdata/fuzz and run with every `go test`.

// FuzzBlockOpResponse decodes an OP_BLOCK_CHECKSUM answer as the client
// does (the BlockOpResponseProto after its length prefix).
func FuzzBlockOpResponse(f *testing.F) {
	f.Add(marshalBlockOpResponse(0, "", &checksumResponse{BytesPerCrc: 512, CrcPerBlock: 2, BlockChecksum: []byte{1, 2, 3, 4},
		CrcType: checksumTypeCRC32C, HasCrcType: true, BlockChecksumType: blockChecksumComposite}))
	f.Add(marshalBlockOpResponse(1, "Replica not found", nil))
	f.Add(marshalBlockOpResponse(0, "", &checksumResponse{BlockChecksum: make([]byte, 16), CrcType: 1, HasCrcType: true}))
	f.Add([]byte{0x08, 0x00, 0x1a, 0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		crc, err := blockCRCFromResponse(b)
		if err != nil {
			return
		}
		// Accepted: a successful answer with a 4-byte CRC32C composite
		// checksum, which is the CRC returned.
		r, err := unmarshalBlockOpResponse(b)
		if err != nil || r.Status != statusSuccess || r.Checksum == nil || len(r.Checksum.BlockChecksum) != 4 ||
			binary.BigEndian.Uint32(r.Checksum.BlockChecksum) != crc {
			t.Fatalf("accepted %x as CRC %08x, but it decodes to %+v, %v", b, crc, r, err)
		}
	})
}

// FuzzReadDelimited reads a length-prefixed message off a stream, as
// every answer of a DataNode is read.
func FuzzReadDelimited(f *testing.F) {
	f.Add(protowire.AppendBytes(nil, []byte("hello")))
	f.Add(protowire.AppendVarint(nil, maxResponse+1))
	f.Add([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01})
	f.Add([]byte{0x05, 1, 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		msg, err := readDelimited(bufio.NewReader(bytes.NewReader(b)))
		if err != nil {
			return
		}
		n, k := protowire.ConsumeVarint(b)
		if k < 0 || n != uint64(len(msg)) || len(msg) > maxResponse || !bytes.Equal(msg, b[k:k+len(msg)]) {
			t.Fatalf("read %d bytes %x from %x", len(msg), msg, b)
		}
	})
}

// encodeBlockToken is decodeBlockToken's inverse: Hadoop's
// Token.encodeToUrlString (test helper).
func encodeBlockToken(tok blockToken) string {
	var b []byte
	for _, f := range [][]byte{tok.Identifier, tok.Password, []byte(tok.Kind), []byte(tok.Service)} {
		b = appendVInt(b, int64(len(f)))
		b = append(b, f...)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// appendVInt appends v as a Hadoop WritableUtils vint.
func appendVInt(b []byte, v int64) []byte {
	if v >= -112 && v <= 127 {
		return append(b, byte(v))
	}
	first := int64(-112)
	if v < 0 {
		v, first = ^v, -120
	}
	var tmp []byte
	for x := v; x != 0; x >>= 8 {
		tmp = append([]byte{byte(x)}, tmp...)
	}
	return append(append(b, byte(first-int64(len(tmp)))), tmp...)
}

// FuzzDecodeBlockToken decodes a block access token as the NameNode's
// answer gives it (WebHDFS urlString). What it accepts must encode back
// to a token that decodes the same.
func FuzzDecodeBlockToken(f *testing.F) {
	f.Add(encodeBlockToken(blockToken{Identifier: bytes.Repeat([]byte{0xab}, 200), Password: []byte("pwd"), Kind: "HDFS_BLOCK_TOKEN"}))
	f.Add(encodeBlockToken(blockToken{Identifier: []byte{1}, Password: make([]byte, 20), Kind: "HDFS_BLOCK_TOKEN", Service: "127.0.0.1:9866"}))
	f.Add("")
	f.Add("!!")
	f.Add(base64.RawURLEncoding.EncodeToString([]byte{0x88, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}))
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := decodeBlockToken(s)
		if err != nil || tok.empty() && tok.Kind == "" && tok.Service == "" {
			return
		}
		again, err := decodeBlockToken(encodeBlockToken(tok))
		if err != nil || !bytes.Equal(again.Identifier, tok.Identifier) || !bytes.Equal(again.Password, tok.Password) ||
			again.Kind != tok.Kind || again.Service != tok.Service {
			t.Fatalf("%q decoded to %+v, which encodes back to %+v, %v", s, tok, again, err)
		}
	})
}

// FuzzDigestChallenge answers a DataNode's DIGEST-MD5 challenge and checks
// its final message (rspauth), for both QOPs the client asks for. An
// answer it gives must carry the challenge's nonce and parse.
func FuzzDigestChallenge(f *testing.F) {
	f.Add([]byte(`realm="0",nonce="bm9uY2U=",qop="auth",charset=utf-8,algorithm=md5-sess`), []byte(`rspauth=0123`), false)
	f.Add([]byte(`realm="0",nonce="a\"b,c",qop="auth-int",qop=auth,charset=utf-8,algorithm=md5-sess`), []byte(`rspauth="x"`), true)
	f.Add([]byte(`nonce="open`), []byte(`=`), false)
	f.Fuzz(func(t *testing.T, challenge, final []byte, integrity bool) {
		qop := "auth"
		if integrity {
			qop = "auth-int"
		}
		s, resp, err := digestRespond(challenge, "aWQ=", "cHdk", qop)
		if err != nil {
			return
		}
		d, err := parseDigestChallenge(string(resp))
		if err != nil || d["qop"] != qop || d["response"] != s.response() {
			t.Fatalf("answered %q with %q, which parses to %v, %v", challenge, resp, d, err)
		}
		if err := s.checkRspAuth(final); err == nil {
			if fd, _ := parseDigestChallenge(string(final)); fd["rspauth"] != s.rspauth() {
				t.Fatalf("final message %q accepted without the rspauth %s", final, s.rspauth())
			}
		}
	})
}

// fuzzConn is a connection whose reads come from r; writes go nowhere.
type fuzzConn struct{ r io.Reader }

func (c fuzzConn) Read(p []byte) (int, error)  { return c.r.Read(p) }
func (c fuzzConn) Write(p []byte) (int, error) { return len(p), nil }

// FuzzSASLHandshake runs the client side of the data transfer handshake
// against a DataNode whose answers are the fuzz input: the handshake
// messages (DataTransferEncryptorMessageProto), the challenge in them, and
// the final message. It cannot succeed without the block token's
// password, which the input does not know; it must fail cleanly.
func FuzzSASLHandshake(f *testing.F) {
	msg := func(status uint64, payload string, text string) []byte {
		var b []byte
		b = protowire.AppendTag(b, 1, protowire.VarintType)
		b = protowire.AppendVarint(b, status)
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendBytes(b, []byte(payload))
		if text != "" {
			b = protowire.AppendTag(b, 3, protowire.BytesType)
			b = protowire.AppendString(b, text)
		}
		return protowire.AppendBytes(nil, b)
	}
	challenge := `realm="0",nonce="bm9uY2U=",qop="auth",charset=utf-8,algorithm=md5-sess`
	f.Add(append(msg(encStatusSuccess, challenge, ""), msg(encStatusSuccess, "rspauth=00", "")...), false)
	f.Add(msg(encStatusError, "", "Block token with block_token_identifier expired"), true)
	f.Add(msg(encStatusUnknownKey, "", "no key"), false)
	f.Fuzz(func(t *testing.T, answers []byte, integrity bool) {
		protection := ProtectionAuthentication
		if integrity {
			protection = ProtectionIntegrity
		}
		tok := blockToken{Identifier: []byte("id"), Password: []byte("password"), Kind: "HDFS_BLOCK_TOKEN"}
		if _, err := saslHandshake(fuzzConn{bytes.NewReader(answers)}, tok, protection, nil); err == nil {
			t.Fatalf("handshake succeeded on %x without knowing the token's password", answers)
		}
	})
}

// FuzzUnwrap reads a DataNode's answer through the integrity layer
// (auth-int): length-framed tokens, each a message, its HMAC, type and
// sequence number. Only tokens the peer wrapped with the session's key
// come through, in order; anything else fails.
func FuzzUnwrap(f *testing.F) {
	session := func() (client, server *digestSession) {
		c := newDigestSession("aWQ=", "0", "cHdk", "bm9uY2U=", "Y25vbmNl", "auth-int", dtDigestURI)
		s := *c
		s.kic, s.kis = c.kis, c.kic
		return c, &s
	}
	frame := func(tok []byte) []byte { return append(binary.BigEndian.AppendUint32(nil, uint32(len(tok))), tok...) }
	_, srv := session()
	f.Add(append(frame(srv.wrap([]byte("answer one"))), frame(srv.wrap([]byte("answer two")))...))
	f.Add(frame([]byte("short")))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, in []byte) {
		client, _ := session()
		c := &saslConn{r: bufio.NewReader(bytes.NewReader(in)), dg: client}
		got, _ := io.ReadAll(io.LimitReader(c, 4<<20))
		// What came through is the messages of the input's first frames,
		// in order: each frame's token without its 16-byte trailer.
		var msgs []byte
		for rest := in; len(rest) >= 4 && len(msgs) < len(got); {
			n := binary.BigEndian.Uint32(rest)
			if n < 16 || uint64(len(rest)-4) < uint64(n) {
				break
			}
			msgs = append(msgs, rest[4:4+n-16]...)
			rest = rest[4+n:]
		}
		if !bytes.HasPrefix(msgs, got) {
			t.Fatalf("read %x from %x, which is not what its frames carry", got, in)
		}
	})
}
