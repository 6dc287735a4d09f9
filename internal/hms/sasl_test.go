package hms

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/hivedr/hivedr/internal/krb"
)

// xorLayer is a security layer double: a token is "W" and the message
// XORed with 0x5A, so a frame carried unwrapped, or wrapped twice, shows.
type xorLayer struct{}

func (xorLayer) QOP() krb.QOP { return krb.QOPAuthConf }

func (xorLayer) Wrap(msg []byte) ([]byte, error) {
	out := []byte{'W'}
	for _, b := range msg {
		out = append(out, b^0x5A)
	}
	return out, nil
}

func (xorLayer) Unwrap(tok []byte) ([]byte, error) {
	if len(tok) == 0 || tok[0] != 'W' {
		return nil, errors.New("not a wrapped token")
	}
	out := make([]byte, 0, len(tok)-1)
	for _, b := range tok[1:] {
		out = append(out, b^0x5A)
	}
	return out, nil
}

// TestSASLFramesWrapped: after the negotiation each Flush sends one frame
// of [length][wrapped bytes] and each frame read is unwrapped, so a
// Thrift message crosses under the security layer whole, in both
// directions; a frame that does not unwrap fails the read.
func TestSASLFramesWrapped(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	defer server.Close()
	tr := newSASLTransport(thrift.NewTSocketFromConnConf(client, &thrift.TConfiguration{}), nil, "hive/meta@R", "", 1<<20)
	tr.layer = xorLayer{}

	msg := bytes.Repeat([]byte("get_table_req "), 1000)
	sent := make(chan []byte, 1)
	go func() {
		var hdr [4]byte
		io.ReadFull(server, hdr[:])
		b := make([]byte, binary.BigEndian.Uint32(hdr[:]))
		io.ReadFull(server, b)
		sent <- b
	}()
	// Two writes, one Flush: one frame.
	if _, err := tr.Write(msg[:100]); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Write(msg[100:]); err != nil {
		t.Fatal(err)
	}
	if err := tr.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	frame := <-sent
	if got, err := (xorLayer{}).Unwrap(frame); err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("the server read a frame of %d bytes that unwraps to %d bytes (%v), want the %d-byte message", len(frame), len(got), err, len(msg))
	}

	answer := []byte("get_table_req answer")
	go func() {
		tok, _ := (xorLayer{}).Wrap(answer)
		server.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(tok))), tok...))
		server.Write(append(binary.BigEndian.AppendUint32(nil, 5), "clear"...))
	}()
	got := make([]byte, len(answer))
	if _, err := io.ReadFull(tr, got); err != nil || !bytes.Equal(got, answer) {
		t.Fatalf("read %q, %v; want %q", got, err, answer)
	}
	if _, err := tr.Read(make([]byte, 10)); err == nil || !strings.Contains(err.Error(), "QOP auth-conf") {
		t.Fatalf("an unwrapped frame read: err = %v", err)
	}
}
