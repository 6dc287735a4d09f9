package hms

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/internal/testcerts"
)

// fakeMetastore answers get_database with a database of the name asked;
// every other call is left to the nil interface it embeds.
type fakeMetastore struct {
	hive_metastore.ThriftHiveMetastore
}

func (fakeMetastore) GetDatabase(_ context.Context, name string) (*hive_metastore.Database, error) {
	return &hive_metastore.Database{Name: name, LocationUri: "hdfs://nn/warehouse/" + name + ".db"}, nil
}

// serveThrift answers Thrift calls on c, as a metastore without SASL does,
// until the client closes it.
func serveThrift(c net.Conn) {
	trans := thrift.NewTBufferedTransport(thrift.NewTSocketFromConnConf(c, &thrift.TConfiguration{}), 64<<10)
	proto := thrift.NewTBinaryProtocolConf(trans, &thrift.TConfiguration{})
	p := hive_metastore.NewThriftHiveMetastoreProcessor(fakeMetastore{})
	for {
		if ok, err := p.Process(context.Background(), proto, proto); !ok || err != nil {
			return
		}
	}
}

// tlsMetastore serves Thrift over TLS with the test server certificate
// (for 127.0.0.1 and localhost), one connection, on a local port.
func tlsMetastore(t *testing.T, certs testcerts.Files) string {
	return acceptOne(t, func(c net.Conn) {
		tc := tls.Server(c, certs.Server(tls.NoClientCert))
		if err := tc.Handshake(); err != nil {
			return
		}
		serveThrift(tc)
	})
}

// clientTLS is the TLS configuration trusting the CA in the PEM file ca.
func clientTLS(t *testing.T, ca, serverName string) *tls.Config {
	t.Helper()
	pem, err := os.ReadFile(ca)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("%s holds no certificate", ca)
	}
	return &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12}
}

func dialOpts(tc *tls.Config) Options {
	return Options{TLS: tc, TLSKey: "applier.metastore_tls", PrincipalKey: "applier.metastore_principal",
		ConnectTimeout: 10 * time.Second, SocketTimeout: 10 * time.Second}
}

// TestTLSMetastore: with the CA that signed the metastore's certificate
// the client verifies it (under the dialed host, or server_name) and
// calls the metastore over TLS; a CA that did not sign it, a name the
// certificate does not carry, or a metastore that does not speak TLS fail
// the dial with an error that names the address, the key to fix, and
// what is wrong.
func TestTLSMetastore(t *testing.T) {
	certs := testcerts.Write(t)
	for _, tc := range []struct {
		name   string
		host   string // dialed
		ca     string
		server string         // server_name
		plain  func(net.Conn) // the metastore speaks plain Thrift
		want   []string
	}{
		{name: "the CA, by IP", host: "127.0.0.1", ca: certs.CA},
		{name: "the CA, by name", host: "localhost", ca: certs.CA},
		{name: "server_name", host: "127.0.0.1", ca: certs.CA, server: "localhost"},
		{name: "another CA", host: "127.0.0.1", ca: certs.OtherCA,
			want: []string{"not signed by a CA hivedr trusts", "set applier.metastore_tls.ca_file"}},
		{name: "a name the certificate lacks", host: "127.0.0.1", ca: certs.CA, server: "hms.prod",
			want: []string{"not for the name hms.prod", "applier.metastore_tls.server_name"}},
		{name: "a metastore without TLS that closes", host: "127.0.0.1", ca: certs.CA, plain: func(c net.Conn) { c.Read(make([]byte, 5)) },
			want: []string{"did not answer with TLS", "metastore.use.SSL=true", "remove applier.metastore_tls"}},
		{name: "a metastore without TLS that waits", host: "127.0.0.1", ca: certs.CA, plain: serveThrift,
			want: []string{"no TLS answer in time", "metastore.use.SSL=true", "remove applier.metastore_tls"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var addr string
			if tc.plain != nil {
				addr = acceptOne(t, tc.plain)
			} else {
				addr = tlsMetastore(t, certs)
			}
			_, port, _ := net.SplitHostPort(addr)
			addr = net.JoinHostPort(tc.host, port)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			o := dialOpts(clientTLS(t, tc.ca, tc.server))
			o.ConnectTimeout = 2 * time.Second // a handshake never answered
			c, err := Dial(ctx, addr, o)
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				db, err := c.GetDatabase(ctx, "sales")
				if err != nil || db.Name != "sales" {
					t.Fatalf("get_database over TLS = %+v, %v", db, err)
				}
				return
			}
			if err == nil {
				c.Close()
				t.Fatal("the dial succeeded")
			}
			t.Log(err)
			for _, w := range append(tc.want, "hive metastore "+addr) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestTLSDialRefused: a metastore that is not there fails the dial as
// without TLS, blaming no certificate.
func TestTLSDialRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	certs := testcerts.Write(t)
	_, err = Dial(context.Background(), addr, dialOpts(clientTLS(t, certs.CA, "")))
	if err == nil || !strings.Contains(err.Error(), "connection refused") || strings.Contains(err.Error(), "TLS") {
		t.Fatalf("err = %v; want the refused connection, without TLS advice", err)
	}
}

// TestPlainToTLSMetastore: a connection without TLS to a metastore that
// serves TLS fails its first call naming the TLS key: for sure when the
// metastore answers with a TLS alert (as Go's and Java's TLS servers do),
// as a possibility beside Kerberos when it closes without a word. Over
// TLS, the key is not suggested.
func TestPlainToTLSMetastore(t *testing.T) {
	certs := testcerts.Write(t)
	says := func(t *testing.T, err error, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q does not say %q", err, w)
			}
		}
	}
	o := dialOpts(nil)

	for name, addr := range map[string]string{
		"a Go TLS server":   tlsMetastore(t, certs),
		"a Java TLS server": serveOnce(t, []byte{21, 3, 3, 0, 2, 2, 10}), // fatal unexpected_message
	} {
		err := failedCall(t, addr, o)
		var tr *TLSRequiredError
		if !errors.As(err, &tr) {
			t.Fatalf("%s: err = %v; want a TLSRequiredError", name, err)
		}
		says(t, err, "hive metastore "+addr, "answered the first call with a TLS alert", "metastore.use.SSL=true", "set applier.metastore_tls")
	}

	err := failedCall(t, serveOnce(t, nil), o)
	var se *SASLRequiredError
	if !errors.As(err, &se) || se.Sure {
		t.Fatalf("err = %v; want an unsure SASLRequiredError", err)
	}
	says(t, err, "may serve TLS (metastore.use.SSL=true)", "set applier.metastore_tls", "set applier.metastore_principal")

	// The same closing over TLS is no hint to turn TLS on.
	over := acceptOne(t, func(c net.Conn) {
		tc := tls.Server(c, certs.Server(tls.NoClientCert))
		if tc.Handshake() == nil {
			tc.Read(make([]byte, 5))
		}
	})
	err = failedCall(t, over, dialOpts(clientTLS(t, certs.CA, "")))
	if !errors.As(err, &se) || strings.Contains(err.Error(), "metastore_tls") {
		t.Errorf("err = %v; want a SASLRequiredError that does not suggest TLS", err)
	}
}

// TestSASLToTLSMetastore: the SASL negotiation of a connection without
// TLS, answered with a TLS alert, says the metastore serves TLS.
func TestSASLToTLSMetastore(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	defer server.Close()
	tr := newSASLTransport(thrift.NewTSocketFromConnConf(client, &thrift.TConfiguration{}), nil, "hive/meta@R", "", 1<<20)
	tr.tlsKey = "source.metastore_tls"
	go server.Write([]byte{21, 3, 3, 0, 2, 2, 10})
	_, _, err := tr.readNegotiation()
	if err == nil || !strings.Contains(err.Error(), "it serves TLS") || !strings.Contains(err.Error(), "set source.metastore_tls") {
		t.Fatalf("err = %v; want it to say the metastore serves TLS and name the key", err)
	}
}

// TestTLSErrorDials: options whose TLS settings could not be read fail
// the dial rather than connect without TLS.
func TestTLSErrorDials(t *testing.T) {
	addr := acceptOne(t, serveThrift)
	bad := errors.New("source.metastore_tls.ca_file: open /nowhere/ca.pem: no such file or directory")
	_, err := Dial(context.Background(), addr, Options{TLSError: bad})
	if !errors.Is(err, bad) || !strings.Contains(err.Error(), addr) {
		t.Fatalf("err = %v; want %v, naming %s", err, bad, addr)
	}
}
