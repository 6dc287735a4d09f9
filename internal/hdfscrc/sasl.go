package hdfscrc

import (
	"bufio"
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/md5"
	"crypto/rand"
	"crypto/rc4"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// This file is the client side of SASL on HDFS's data transfer port, what a
// DataNode with dfs.data.transfer.protection set (the way a kerberized
// cluster on unprivileged ports authenticates clients) expects before any
// operation: a magic number, then DIGEST-MD5 (RFC 2831) with the block
// access token as credentials, in DataTransferEncryptorMessageProto
// messages. With QOP auth-int (protection "integrity") every later message
// in both directions is wrapped with an HMAC-MD5 and a sequence number and
// framed by a 4-byte length. With QOP auth-conf (protection "privacy") the
// client also asks for AES/CTR (a CipherOptionProto): a DataNode with
// dfs.encrypt.data.transfer.cipher.suites=AES/CTR/NoPadding answers with
// random keys and IVs, the keys encrypted under the DIGEST-MD5 layer
// (cipher rc4), and the stream is AES/CTR from then on; one without keeps
// the DIGEST-MD5 layer (RC4 and HMAC-MD5) for every message. On a cluster
// with dfs.encrypt.data.transfer the credentials are the NameNode's data
// encryption key instead of the block token (DataEncryptionKey).

// Data transfer protection levels (dfs.data.transfer.protection).
const (
	ProtectionNone           = ""
	ProtectionAuthentication = "authentication"
	ProtectionIntegrity      = "integrity"
	ProtectionPrivacy        = "privacy"
)

// CheckProtection checks a dfs.data.transfer.protection value this client
// can speak.
func CheckProtection(p string) error {
	switch p {
	case ProtectionNone, ProtectionAuthentication, ProtectionIntegrity, ProtectionPrivacy:
		return nil
	}
	return fmt.Errorf("%q is not one of authentication, integrity, privacy", p)
}

// DataEncryptionKey is a NameNode's key for encrypted data transfer
// (dfs.encrypt.data.transfer), which DataNodes of such a cluster take as
// SASL credentials in place of block tokens.
type DataEncryptionKey struct {
	KeyID       int32
	BlockPoolID string
	Nonce, Key  []byte
}

// credentials are the DIGEST-MD5 user name and password of the key.
func (k *DataEncryptionKey) credentials() (user, password string) {
	return fmt.Sprintf("%d %s %s", k.KeyID, k.BlockPoolID, base64.StdEncoding.EncodeToString(k.Nonce)),
		base64.StdEncoding.EncodeToString(k.Key)
}

// qopOf is the SASL QOP of a protection level.
func qopOf(protection string) string {
	switch protection {
	case ProtectionIntegrity:
		return "auth-int"
	case ProtectionPrivacy:
		return "auth-conf"
	}
	return "auth"
}

// digestCipher is the DIGEST-MD5 confidentiality cipher the client asks
// for under auth-conf (RFC 2831 section 2.4): 128-bit RC4, which Java's
// DIGEST-MD5 server offers by default. With AES/CTR negotiated it only
// carries the AES keys.
const digestCipher = "rc4"

// cipherSuiteAESCTR is CipherSuiteProto AES_CTR_NOPADDING.
const cipherSuiteAESCTR = 2

// cipherOption is a CipherOptionProto: the keys and IVs of AES/CTR, "in"
// for what the client sends, "out" for what the DataNode sends.
type cipherOption struct {
	Suite                      uint64
	InKey, InIV, OutKey, OutIV []byte
}

// saslMagic opens a SASL handshake on the data transfer port
// (SaslDataTransferServer's SASL_TRANSFER_MAGIC_NUMBER).
const saslMagic = 0xDEADBEEF

// DataTransferEncryptorStatus values.
const (
	encStatusSuccess    = 0
	encStatusUnknownKey = 1
	encStatusError      = 2
)

// The DIGEST-MD5 server of a DataNode calls itself "0" and protocol "hdfs".
const (
	dtRealm     = "0"
	dtDigestURI = "hdfs/0"
)

// blockToken is a Hadoop Token<BlockTokenIdentifier>.
type blockToken struct {
	Identifier, Password []byte
	Kind, Service        string
}

// empty reports whether the token carries nothing (clusters without block
// access tokens send empty ones).
func (t blockToken) empty() bool { return len(t.Identifier) == 0 && len(t.Password) == 0 }

// decodeBlockToken decodes a token as WebHDFS writes it (urlString): the
// URL-safe base64, without padding, of the token's Writable form (vint
// length + identifier, vint length + password, then kind and service as
// Hadoop Text).
func decodeBlockToken(s string) (blockToken, error) {
	if s == "" {
		return blockToken{}, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil {
		return blockToken{}, fmt.Errorf("block token: not URL-safe base64: %w", err)
	}
	r := bytes.NewReader(b)
	var t blockToken
	for i, dst := range []*[]byte{&t.Identifier, &t.Password} {
		if *dst, err = readVIntBytes(r); err != nil {
			return blockToken{}, fmt.Errorf("block token field %d: %w", i+1, err)
		}
	}
	for i, dst := range []*string{&t.Kind, &t.Service} {
		v, err := readVIntBytes(r)
		if err != nil {
			return blockToken{}, fmt.Errorf("block token field %d: %w", i+3, err)
		}
		*dst = string(v)
	}
	return t, nil
}

// readVIntBytes reads a Hadoop vint length and that many bytes.
func readVIntBytes(r *bytes.Reader) ([]byte, error) {
	n, err := readVInt(r)
	if err != nil {
		return nil, err
	}
	if n < 0 || int64(n) > int64(r.Len()) {
		return nil, fmt.Errorf("length %d with %d bytes left", n, r.Len())
	}
	b := make([]byte, n)
	_, err = io.ReadFull(r, b)
	return b, err
}

// readVInt reads a Hadoop WritableUtils vint: one byte in [-112, 127] is
// the value; otherwise the first byte gives the sign and how many
// big-endian bytes follow.
func readVInt(r *bytes.Reader) (int64, error) {
	fb, err := r.ReadByte()
	if err != nil {
		return 0, io.ErrUnexpectedEOF
	}
	first := int8(fb)
	if first >= -112 {
		return int64(first), nil
	}
	neg := first < -120
	size := int(-111 - int(first))
	if neg {
		size = int(-119 - int(first))
	}
	var v int64
	for i := 0; i < size-1; i++ {
		b, err := r.ReadByte()
		if err != nil {
			return 0, io.ErrUnexpectedEOF
		}
		v = v<<8 | int64(b)
	}
	if neg {
		v = ^v
	}
	return v, nil
}

// appendToken appends the fields of the TokenProto of t.
func appendToken(buf []byte, t blockToken) []byte {
	buf = protowire.AppendTag(buf, 1, protowire.BytesType)
	buf = protowire.AppendBytes(buf, t.Identifier)
	buf = protowire.AppendTag(buf, 2, protowire.BytesType)
	buf = protowire.AppendBytes(buf, t.Password)
	buf = protowire.AppendTag(buf, 3, protowire.BytesType)
	buf = protowire.AppendString(buf, t.Kind)
	buf = protowire.AppendTag(buf, 4, protowire.BytesType)
	return protowire.AppendString(buf, t.Service)
}

// encryptorMessage is a DataTransferEncryptorMessageProto.
type encryptorMessage struct {
	Status         uint64
	Payload        []byte
	Message        string
	AccessTokenErr bool
	CipherOption   *cipherOption // the first
}

// marshalEncryptorMessage is the delimited message of payload, offering
// AES/CTR when aes.
func marshalEncryptorMessage(payload []byte, aes bool) []byte {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, encStatusSuccess)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendBytes(b, payload)
	if aes {
		opt := protowire.AppendTag(nil, 1, protowire.VarintType)
		opt = protowire.AppendVarint(opt, cipherSuiteAESCTR)
		b = protowire.AppendTag(b, 4, protowire.BytesType)
		b = protowire.AppendBytes(b, opt)
	}
	return protowire.AppendBytes(nil, b) // varint-delimited
}

func unmarshalCipherOption(b []byte) (*cipherOption, error) {
	var o cipherOption
	err := walkFields(b, func(num protowire.Number, v uint64, bytes []byte) error {
		switch num {
		case 1:
			o.Suite = v
		case 2:
			o.InKey = append([]byte(nil), bytes...)
		case 3:
			o.InIV = append([]byte(nil), bytes...)
		case 4:
			o.OutKey = append([]byte(nil), bytes...)
		case 5:
			o.OutIV = append([]byte(nil), bytes...)
		}
		return nil
	})
	return &o, err
}

func unmarshalEncryptorMessage(b []byte) (encryptorMessage, error) {
	var m encryptorMessage
	err := walkFields(b, func(num protowire.Number, v uint64, bytes []byte) error {
		switch num {
		case 1:
			m.Status = v
		case 2:
			m.Payload = append([]byte(nil), bytes...)
		case 3:
			m.Message = string(bytes)
		case 4:
			if m.CipherOption == nil {
				o, err := unmarshalCipherOption(bytes)
				if err != nil {
					return fmt.Errorf("cipher option: %w", err)
				}
				m.CipherOption = o
			}
		case 6:
			m.AccessTokenErr = v != 0
		}
		return nil
	})
	return m, err
}

// saslConn is a data transfer connection after the SASL handshake: with
// QOP auth it passes bytes through; with auth-int it wraps each Write into
// one frame and unwraps frames on Read.
type saslConn struct {
	r  *bufio.Reader
	w  io.Writer
	dg *digestSession // nil: no security layer

	rbuf []byte
}

func (c *saslConn) Write(p []byte) (int, error) {
	if c.dg == nil {
		return c.w.Write(p)
	}
	tok := c.dg.wrap(p)
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(tok)))
	if _, err := c.w.Write(append(frame, tok...)); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (c *saslConn) Read(p []byte) (int, error) {
	if c.dg == nil {
		return c.r.Read(p)
	}
	for len(c.rbuf) == 0 {
		var hdr [4]byte
		if _, err := io.ReadFull(c.r, hdr[:]); err != nil {
			return 0, err
		}
		n := binary.BigEndian.Uint32(hdr[:])
		if n > maxResponse+16 {
			return 0, fmt.Errorf("sasl frame of %d bytes exceeds the limit of %d", n, maxResponse+16)
		}
		tok := make([]byte, n)
		if _, err := io.ReadFull(c.r, tok); err != nil {
			return 0, err
		}
		msg, err := c.dg.unwrap(tok)
		if err != nil {
			return 0, err
		}
		c.rbuf = msg
	}
	n := copy(p, c.rbuf)
	c.rbuf = c.rbuf[n:]
	return n, nil
}

// saslHandshake authenticates conn's client to a DataNode for protection
// (authentication, integrity or privacy) and returns the stream to speak
// the data transfer protocol on. The credentials are the block token tok,
// or dek when the cluster encrypts data transfer (its DataNodes take no
// block token then).
func saslHandshake(conn io.ReadWriter, tok blockToken, protection string, dek *DataEncryptionKey) (io.ReadWriter, error) {
	var user, password string
	switch {
	case dek != nil:
		user, password = dek.credentials()
	case tok.empty():
		return nil, errors.New("sasl: the NameNode gave no block access token (is dfs.block.access.token.enable on?)")
	default:
		user, password = base64.StdEncoding.EncodeToString(tok.Identifier), base64.StdEncoding.EncodeToString(tok.Password)
	}
	r := bufio.NewReader(conn)
	hello := binary.BigEndian.AppendUint32(nil, saslMagic)
	if _, err := conn.Write(append(hello, marshalEncryptorMessage(nil, false)...)); err != nil {
		return nil, fmt.Errorf("sasl: send: %w", err)
	}
	challenge, err := readEncryptorMessage(r)
	if err != nil {
		return nil, err
	}
	want := qopOf(protection)
	dg, resp, err := digestRespond(challenge.Payload, user, password, want)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Write(marshalEncryptorMessage(resp, want == "auth-conf")); err != nil {
		return nil, fmt.Errorf("sasl: send: %w", err)
	}
	final, err := readEncryptorMessage(r)
	if err != nil {
		return nil, err
	}
	if err := dg.checkRspAuth(final.Payload); err != nil {
		return nil, err
	}
	if opt := final.CipherOption; opt != nil {
		if dg.qop != "auth-conf" {
			return nil, fmt.Errorf("sasl: the DataNode sent a cipher option under QOP %s", dg.qop)
		}
		return newAESStream(r, conn, dg, opt)
	}
	sc := &saslConn{r: r, w: conn}
	if dg.qop != "auth" {
		sc.dg = dg
	}
	return sc, nil
}

// aesStream is a data transfer connection encrypted with AES/CTR after
// the handshake.
type aesStream struct {
	r cipher.StreamReader
	w cipher.StreamWriter
}

func (s *aesStream) Read(p []byte) (int, error)  { return s.r.Read(p) }
func (s *aesStream) Write(p []byte) (int, error) { return s.w.Write(p) }

// newAESStream takes the AES/CTR keys out of the DataNode's cipher option
// (encrypted under the DIGEST-MD5 layer, InKey first) and returns the
// stream: the client encrypts with InKey and InIV and decrypts with
// OutKey and OutIV.
func newAESStream(r io.Reader, w io.Writer, dg *digestSession, opt *cipherOption) (*aesStream, error) {
	if opt.Suite != cipherSuiteAESCTR {
		return nil, fmt.Errorf("sasl: the DataNode chose cipher suite %d, not AES/CTR/NoPadding", opt.Suite)
	}
	inKey, err := dg.unwrap(opt.InKey)
	if err != nil {
		return nil, fmt.Errorf("sasl: the DataNode's AES key: %w", err)
	}
	outKey, err := dg.unwrap(opt.OutKey)
	if err != nil {
		return nil, fmt.Errorf("sasl: the DataNode's AES key: %w", err)
	}
	enc, err := aesCTR(inKey, opt.InIV)
	if err != nil {
		return nil, err
	}
	dec, err := aesCTR(outKey, opt.OutIV)
	if err != nil {
		return nil, err
	}
	return &aesStream{r: cipher.StreamReader{S: dec, R: r}, w: cipher.StreamWriter{S: enc, W: w}}, nil
}

func aesCTR(key, iv []byte) (cipher.Stream, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("sasl: the DataNode's AES key: %w", err)
	}
	if len(iv) != aes.BlockSize {
		return nil, fmt.Errorf("sasl: the DataNode's AES IV is %d bytes, want %d", len(iv), aes.BlockSize)
	}
	return cipher.NewCTR(b, iv), nil
}

// readEncryptorMessage reads one handshake message, failing on an error status.
func readEncryptorMessage(r *bufio.Reader) (encryptorMessage, error) {
	b, err := readDelimited(r)
	if err != nil {
		return encryptorMessage{}, fmt.Errorf("sasl: read: %w (does the DataNode run with dfs.data.transfer.protection?)", err)
	}
	m, err := unmarshalEncryptorMessage(b)
	if err != nil {
		return encryptorMessage{}, fmt.Errorf("sasl: decode: %w", err)
	}
	switch m.Status {
	case encStatusSuccess:
		return m, nil
	case encStatusUnknownKey:
		return encryptorMessage{}, fmt.Errorf("sasl: the DataNode does not know the block token's key (ERROR_UNKNOWN_KEY): %s", m.Message)
	default:
		what := "ERROR"
		if m.AccessTokenErr {
			what = "block access token refused"
		}
		return encryptorMessage{}, fmt.Errorf("sasl: the DataNode refused the handshake (%s): %s", what, m.Message)
	}
}

// digestSession is a DIGEST-MD5 client's state after its response.
type digestSession struct {
	qop                    string
	ha1Hex                 string
	nonce, cnonce, nc, uri string
	kic, kis               []byte      // integrity keys (auth-int, auth-conf)
	enc, dec               *rc4.Cipher // confidentiality (auth-conf)
	sendSeq, recvSeq       uint32
}

// parseDigestChallenge splits a DIGEST-MD5 challenge into its directives;
// qop, which may repeat or list values, is returned comma-joined.
func parseDigestChallenge(s string) (map[string]string, error) {
	out := map[string]string{}
	for s = strings.TrimSpace(s); s != ""; {
		eq := strings.IndexByte(s, '=')
		if eq <= 0 {
			return nil, fmt.Errorf("sasl: bad DIGEST-MD5 challenge near %q", s)
		}
		key := strings.ToLower(strings.TrimSpace(s[:eq]))
		s = strings.TrimLeft(s[eq+1:], " \t")
		var val string
		if strings.HasPrefix(s, `"`) {
			var b strings.Builder
			i := 1
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				b.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New("sasl: unterminated quoted value in DIGEST-MD5 challenge")
			}
			val, s = b.String(), s[i+1:]
		} else {
			end := strings.IndexByte(s, ',')
			if end < 0 {
				end = len(s)
			}
			val, s = strings.TrimSpace(s[:end]), s[end:]
		}
		if prev, ok := out[key]; ok && key == "qop" {
			val = prev + "," + val
		}
		out[key] = val
		s = strings.TrimLeft(s, " \t")
		s = strings.TrimPrefix(s, ",")
		s = strings.TrimLeft(s, " \t")
	}
	return out, nil
}

// digestRespond answers a DIGEST-MD5 challenge as user with password,
// asking for qop.
func digestRespond(challenge []byte, user, password, qop string) (*digestSession, []byte, error) {
	d, err := parseDigestChallenge(string(challenge))
	if err != nil {
		return nil, nil, err
	}
	offered := strings.Split(d["qop"], ",")
	if d["qop"] == "" {
		offered = []string{"auth"}
	}
	found := false
	for _, q := range offered {
		if strings.TrimSpace(q) == qop {
			found = true
		}
	}
	if !found {
		return nil, nil, fmt.Errorf("sasl: the DataNode offers QOP %s, not %s (dfs.data.transfer.protection differs from the configured data_transfer_protection)", d["qop"], qop)
	}
	if d["nonce"] == "" {
		return nil, nil, errors.New("sasl: DIGEST-MD5 challenge without a nonce")
	}
	cipherDirective := ""
	if qop == "auth-conf" {
		if !slices.Contains(strings.Split(d["cipher"], ","), digestCipher) {
			return nil, nil, fmt.Errorf("sasl: the DataNode offers ciphers %q, not %s (set dfs.encrypt.data.transfer.algorithm to rc4, or unset it)", d["cipher"], digestCipher)
		}
		cipherDirective = ",cipher=" + digestCipher
	}
	if a := d["algorithm"]; a != "md5-sess" {
		return nil, nil, fmt.Errorf("sasl: DIGEST-MD5 algorithm %q, want md5-sess", a)
	}
	realm := d["realm"]
	if realm == "" {
		realm = dtRealm
	}
	var cn [16]byte
	if _, err := rand.Read(cn[:]); err != nil {
		return nil, nil, err
	}
	s := newDigestSession(user, realm, password, d["nonce"], base64.StdEncoding.EncodeToString(cn[:]), qop, dtDigestURI)
	var b strings.Builder
	fmt.Fprintf(&b, `charset=utf-8,username="%s",realm="%s",nonce="%s",nc=%s,cnonce="%s",digest-uri="%s",maxbuf=65536,response=%s,qop=%s%s`,
		user, realm, s.nonce, s.nc, s.cnonce, s.uri, s.response(), qop, cipherDirective)
	return s, []byte(b.String()), nil
}

// newDigestSession derives the session's H(A1) and, for auth-int and
// auth-conf, its integrity keys, and for auth-conf its RC4 keys (RFC 2831
// sections 2.1.2.1, 2.3 and 2.4).
func newDigestSession(user, realm, password, nonce, cnonce, qop, uri string) *digestSession {
	s := &digestSession{qop: qop, nonce: nonce, cnonce: cnonce, nc: "00000001", uri: uri}
	urp := md5.Sum([]byte(user + ":" + realm + ":" + password))
	ha1 := md5.Sum(append(urp[:], ":"+nonce+":"+cnonce...))
	s.ha1Hex = hex.EncodeToString(ha1[:])
	if qop == "auth-int" || qop == "auth-conf" {
		kic := md5.Sum(append(ha1[:], "Digest session key to client-to-server signing key magic constant"...))
		kis := md5.Sum(append(ha1[:], "Digest session key to server-to-client signing key magic constant"...))
		s.kic, s.kis = kic[:], kis[:]
	}
	if qop == "auth-conf" {
		// RC4 takes all 16 bytes of H(A1).
		kcc := md5.Sum(append(ha1[:], "Digest H(A1) to client-to-server sealing key magic constant"...))
		kcs := md5.Sum(append(ha1[:], "Digest H(A1) to server-to-client sealing key magic constant"...))
		s.enc, _ = rc4.NewCipher(kcc[:]) // 16 bytes: no error
		s.dec, _ = rc4.NewCipher(kcs[:])
	}
	return s
}

// response is the client's response value.
func (s *digestSession) response() string { return s.digest("AUTHENTICATE:" + s.uri) }

// rspauth is the value the server's last message must carry.
func (s *digestSession) rspauth() string { return s.digest(":" + s.uri) }

// digest is the response value for A2 (RFC 2831 section 2.1.2.1): A2 is
// "AUTHENTICATE:uri" for the client's response and ":uri" for the server's
// rspauth, with 32 zeros appended for auth-int.
func (s *digestSession) digest(a2 string) string {
	if s.qop != "auth" {
		a2 += ":00000000000000000000000000000000"
	}
	ha2 := md5.Sum([]byte(a2))
	kd := md5.Sum([]byte(s.ha1Hex + ":" + s.nonce + ":" + s.nc + ":" + s.cnonce + ":" + s.qop + ":" + hex.EncodeToString(ha2[:])))
	return hex.EncodeToString(kd[:])
}

// checkRspAuth checks the server's final message, which proves it knew
// the block token's password too.
func (s *digestSession) checkRspAuth(final []byte) error {
	d, err := parseDigestChallenge(string(final))
	if err != nil {
		return err
	}
	got, ok := d["rspauth"]
	if !ok {
		return errors.New("sasl: the DataNode's last message has no rspauth")
	}
	if !hmac.Equal([]byte(got), []byte(s.rspauth())) {
		return errors.New("sasl: the DataNode's rspauth does not match (not the DataNode the NameNode named?)")
	}
	return nil
}

// wrap protects msg for sending: msg and the first 10 bytes of
// HMAC-MD5(Kic, seq || msg), encrypted with RC4 under auth-conf, then
// message type 1 and seq.
func (s *digestSession) wrap(msg []byte) []byte {
	seq := binary.BigEndian.AppendUint32(nil, s.sendSeq)
	s.sendSeq++
	m := hmac.New(md5.New, s.kic)
	m.Write(seq)
	m.Write(msg)
	out := append(append([]byte(nil), msg...), m.Sum(nil)[:10]...)
	if s.enc != nil {
		s.enc.XORKeyStream(out, out)
	}
	out = append(out, 0, 1)
	return append(out, seq...)
}

// unwrap checks a token the server sent (auth-int) and returns its message.
func (s *digestSession) unwrap(tok []byte) ([]byte, error) {
	if len(tok) < 16 {
		return nil, fmt.Errorf("sasl: wrapped message of %d bytes is too short", len(tok))
	}
	body, typ, seq := tok[:len(tok)-6], tok[len(tok)-6:len(tok)-4], tok[len(tok)-4:]
	if s.dec != nil {
		// The RC4 stream advances only over tokens that pass the checks
		// below; a failed one ends the connection anyway.
		body = append([]byte(nil), body...)
		s.dec.XORKeyStream(body, body)
	}
	msg, mac := body[:len(body)-10], body[len(body)-10:]
	if binary.BigEndian.Uint16(typ) != 1 {
		return nil, fmt.Errorf("sasl: wrapped message of type %d, want 1", binary.BigEndian.Uint16(typ))
	}
	if got := binary.BigEndian.Uint32(seq); got != s.recvSeq {
		return nil, fmt.Errorf("sasl: wrapped message with sequence number %d, want %d", got, s.recvSeq)
	}
	m := hmac.New(md5.New, s.kis)
	m.Write(seq)
	m.Write(msg)
	if !hmac.Equal(m.Sum(nil)[:10], mac) {
		return nil, errors.New("sasl: wrapped message fails its integrity check")
	}
	s.recvSeq++
	return msg, nil
}
