package hms

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
)

// acceptOne accepts one connection on a local port and hands it to
// serve (with a deadline), closing it after.
func acceptOne(t *testing.T, serve func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(20 * time.Second))
		serve(c)
	}()
	return ln.Addr().String()
}

// serveOnce accepts one connection on a local port, reads what the client
// sends first, answers with answer, and closes it.
func serveOnce(t *testing.T, answer []byte) string {
	return acceptOne(t, func(c net.Conn) {
		buf := make([]byte, 5) // a SASL server reads a status byte and a length
		io.ReadFull(c, buf)
		c.Write(answer)
	})
}

// saslFrame is a Thrift SASL negotiation message.
func saslFrame(status byte, text string) []byte {
	b := append([]byte{status}, binary.BigEndian.AppendUint32(nil, uint32(len(text)))...)
	return append(b, text...)
}

// TestPlainToSASLMetastore: a connection without Kerberos to a metastore
// that requires SASL fails its first call with an error that says so and
// names the key to set (as the metastore answers: TSaslTransport's ERROR
// message for the status byte it cannot read, then a close); one that
// closes without a word gets the same advice as a possibility; an answer
// that is not a SASL message is left as it was.
func TestPlainToSASLMetastore(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer []byte
		want   []string // in the error
		sure   bool
		hinted bool
	}{
		{"SASL refusal", saslFrame(saslError, "Invalid status -128"),
			[]string{"answered the first call with a SASL negotiation message", `"Invalid status -128"`, "requires Kerberos",
				"set applier.metastore_principal", "kerberos section"}, true, true},
		{"closed without a word", nil,
			[]string{"closed the connection without answering the first call", "may require Kerberos", "set applier.metastore_principal"}, false, true},
		{"a truncated Thrift answer", []byte{0x80, 0x01, 0x00, 0x02, 0x00, 0x00}, nil, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := serveOnce(t, tc.answer)
			err := failedCall(t, addr, Options{PrincipalKey: "applier.metastore_principal", SocketTimeout: 10 * time.Second})
			var se *SASLRequiredError
			if got := errors.As(err, &se); got != tc.hinted {
				t.Fatalf("err = %v; SASLRequiredError %v, want %v", err, got, tc.hinted)
			}
			if tc.hinted && se.Sure != tc.sure {
				t.Errorf("Sure = %v, want %v", se.Sure, tc.sure)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if !tc.hinted && strings.Contains(err.Error(), "Kerberos") {
				t.Errorf("error %q blames Kerberos for a Thrift answer", err)
			}
		})
	}
}

// failedCall dials addr with o and calls get_database, which must fail
// with a transport error (what callers reconnect on); it returns the
// error.
func failedCall(t *testing.T, addr string, o Options) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Dial(ctx, addr, o)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.GetDatabase(ctx, "sales")
	if err == nil {
		t.Fatal("the call succeeded")
	}
	var te thrift.TTransportException
	if !errors.As(err, &te) {
		t.Errorf("err = %#v is not a TTransportException", err)
	}
	return err
}

func TestSASLNegotiation(t *testing.T) {
	for _, tc := range []struct {
		b    []byte
		text string
		ok   bool
	}{
		{saslFrame(saslBad, "no"), "no", true},
		{saslFrame(saslError, "Invalid status -128")[:10], "Inval", true},
		{saslFrame(saslOK, "x"), "", false},            // not a refusal
		{[]byte{0x80, 1, 0, 2, 0, 0, 0, 4}, "", false}, // strict Thrift
		{[]byte{0, 0, 0, 12, 'g'}, "", false},          // non-strict Thrift
		{[]byte{saslError, 0xff, 0, 0, 0}, "", false},  // an absurd length
		{[]byte{saslError, 0}, "", false},
	} {
		if text, ok := saslNegotiation(tc.b); text != tc.text || ok != tc.ok {
			t.Errorf("saslNegotiation(%x) = %q, %v; want %q, %v", tc.b, text, ok, tc.text, tc.ok)
		}
	}
}
