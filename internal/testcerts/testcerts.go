// Package testcerts makes a throwaway CA, with a server certificate for
// 127.0.0.1 and localhost and a client certificate it signed, as PEM
// files, for tests of TLS code.
package testcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Files are the paths of the PEM files Write made.
type Files struct {
	CA                     string
	ServerCert, ServerKey  string // for 127.0.0.1 and localhost
	ClientCert, ClientKey  string // CN=hivedr
	OtherCA                string // a CA that signed none of them
	serverPair, clientPair tls.Certificate
	pool                   *x509.CertPool
}

// Write makes the CA and certificates in a directory of t's.
func Write(t testing.TB) Files {
	t.Helper()
	dir := t.TempDir()
	file := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	sign := func(tmpl, parent *x509.Certificate, pub, signer any) []byte {
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
		if err != nil {
			t.Fatal(err)
		}
		return der
	}
	now := time.Now()
	ca := func(serial int64, name string) (*x509.Certificate, *ecdsa.PrivateKey, []byte) {
		k := newKey()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name}, IsCA: true,
			BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour)}
		return tmpl, k, sign(tmpl, tmpl, &k.PublicKey, k)
	}
	caTmpl, caKey, caDER := ca(1, "testcerts CA")
	_, _, otherDER := ca(2, "another CA")
	leaf := func(serial int64, name string, usage x509.ExtKeyUsage, ips []net.IP, dns []string) (certPath, keyPath string, pair tls.Certificate) {
		k := newKey()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name}, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: ips, DNSNames: dns, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour)}
		der := sign(tmpl, caTmpl, &k.PublicKey, caKey)
		keyDER, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		certPath, keyPath = file(name+".pem", "CERTIFICATE", der), file(name+".key", "PRIVATE KEY", keyDER)
		if pair, err = tls.LoadX509KeyPair(certPath, keyPath); err != nil {
			t.Fatal(err)
		}
		return certPath, keyPath, pair
	}
	f := Files{CA: file("ca.pem", "CERTIFICATE", caDER), OtherCA: file("other-ca.pem", "CERTIFICATE", otherDER), pool: x509.NewCertPool()}
	f.ServerCert, f.ServerKey, f.serverPair = leaf(3, "server", x509.ExtKeyUsageServerAuth, []net.IP{net.IPv4(127, 0, 0, 1)}, []string{"localhost"})
	f.ClientCert, f.ClientKey, f.clientPair = leaf(4, "hivedr", x509.ExtKeyUsageClientAuth, nil, nil)
	cert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	f.pool.AddCert(cert)
	return f
}

// Server is the TLS configuration of a server with the server
// certificate, verifying client certificates against the CA as auth says.
func (f Files) Server(auth tls.ClientAuthType) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{f.serverPair}, ClientCAs: f.pool, ClientAuth: auth, MinVersion: tls.VersionTLS12}
}
