// Package krbtest holds helpers for tests of code that logs in with
// Kerberos keytabs.
package krbtest

import (
	"os"
	"testing"
	"time"

	"github.com/jcmturner/gokrb5/v8/iana/etypeID"
	"github.com/jcmturner/gokrb5/v8/keytab"
)

// WriteKeytab writes to path a keytab holding principal@realm's
// AES256-CTS-HMAC-SHA1-96 key derived from password, at key version
// kvno, as a rotation writes one: a new file renamed over the old.
func WriteKeytab(t testing.TB, path, principal, realm, password string, kvno uint8) {
	t.Helper()
	kt := keytab.New()
	if err := kt.AddEntry(principal, realm, password, time.Now(), kvno, etypeID.AES256_CTS_HMAC_SHA1_96); err != nil {
		t.Fatal(err)
	}
	b, err := kt.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".new", b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
}
