package krb

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hivedr/hivedr/internal/krb/krbtest"

	"github.com/jcmturner/gokrb5/v8/client"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		c    Config
		want string // substring of the error; "" for none
	}{
		{Config{}, ""},
		{Config{Principal: "copyd@R", Keytab: "/k"}, ""},
		{Config{Principal: "copyd", Keytab: "/k"}, ""},
		{Config{Keytab: "/k"}, "keytab: set without a principal"},
		{Config{Principal: "copyd@R"}, "keytab: required with principal copyd@R"},
		{Config{Principal: "a@b@c", Keytab: "/k"}, `principal: "a@b@c" is not name@REALM`},
		{Config{Principal: "copyd@", Keytab: "/k"}, "is not name@REALM"},
	} {
		err := tc.c.Validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: err = %v, want %q", tc.c, err, tc.want)
		}
	}
}

func TestServicePrincipal(t *testing.T) {
	for pattern, want := range map[string]string{
		"nn/_HOST@EXAMPLE.COM": "nn/nn1.example.com@EXAMPLE.COM",
		"hive/meta@R":          "hive/meta@R",
		"HTTP/_HOST":           "HTTP/nn1.example.com",
	} {
		if got := ServicePrincipal(pattern, "NN1.Example.com"); got != want {
			t.Errorf("ServicePrincipal(%q) = %q, want %q", pattern, got, want)
		}
	}
}

// TestLoginWrongKeytab: a keytab without the principal's keys fails before
// any KDC is asked, naming the principal, the keytab and what it holds,
// and no key material.
func TestLoginWrongKeytab(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "krb5.conf")
	if err := os.WriteFile(conf, []byte("[libdefaults]\n  default_realm = EXAMPLE.COM\n[realms]\n  EXAMPLE.COM = {\n    kdc = 127.0.0.1:1\n  }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ktPath := filepath.Join(dir, "tailer.keytab")
	writeKeytabFile(t, ktPath, "tailer", 1)
	_, err := Login(Config{Principal: "copyd", Keytab: ktPath, Krb5Conf: conf}, nil)
	if err == nil {
		t.Fatal("login with another principal's keytab succeeded")
	}
	for _, want := range []string{"copyd@EXAMPLE.COM", ktPath, "has no key for it", "tailer@EXAMPLE.COM"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if !errors.Is(err, ErrRefused) {
		t.Errorf("another principal's keytab: %v is not ErrRefused", err)
	}
	// Files that cannot be read may be there at the next attempt: not
	// refused.
	_, err = Login(Config{Principal: "copyd", Keytab: filepath.Join(dir, "missing.keytab"), Krb5Conf: conf}, nil)
	if err == nil || !strings.Contains(err.Error(), "missing.keytab") || !strings.Contains(err.Error(), "copyd@EXAMPLE.COM") || errors.Is(err, ErrRefused) {
		t.Errorf("missing keytab: err = %v, want one naming the keytab and the principal, not ErrRefused", err)
	}
	_, err = Login(Config{Principal: "copyd", Keytab: ktPath, Krb5Conf: filepath.Join(dir, "none.conf")}, nil)
	if err == nil || !strings.Contains(err.Error(), "none.conf") || errors.Is(err, ErrRefused) {
		t.Errorf("missing krb5.conf: err = %v, want one naming it, not ErrRefused", err)
	}
}

// writeKeytabFile writes a keytab of name@EXAMPLE.COM with key version
// kvno to path, as a rotation would: a new file renamed over the old.
func writeKeytabFile(t *testing.T, path, name string, kvno uint8) {
	t.Helper()
	krbtest.WriteKeytab(t, path, name, "EXAMPLE.COM", "pw", kvno)
}

// fakeKDC stands in for the KDC exchanges of a Client: a login succeeds
// when the keytab the client read holds key version accept, and the TGT
// is valid until expire is set.
type fakeKDC struct {
	accept uint8
	expire bool
	logins []uint8 // the key version of each login attempt
}

func (k *fakeKDC) login(cl *client.Client) error {
	var kvno uint8
	for _, e := range cl.Credentials.Keytab().Entries {
		kvno = max(kvno, e.KVNO8)
	}
	k.logins = append(k.logins, kvno)
	if kvno != k.accept {
		return fmt.Errorf("KDC_ERR_PREAUTH_FAILED: key version %d is not the principal's", kvno)
	}
	return nil
}

func (k *fakeKDC) affirm(*client.Client) error {
	if k.expire {
		return errors.New("TGT expired and the keys in memory get no new one")
	}
	return nil
}

// TestLoginRetried: a first login whose keytab is missing fails naming the
// principal and the keytab, counts in the failure metric and is not kept:
// within the backoff the client answers with that error without trying,
// and once the backoff has passed and the file is there it logs in, in the
// same process. Then the key is rotated (a keytab of a new key version
// written over the file) and the TGT expires: the next use reads the new
// keytab and logs in with the new key, a new generation. Last, the KDC
// has a newer key than the file: the login is refused (ErrRefused),
// counted, and the one after the backoff takes the new file.
func TestLoginRetried(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "krb5.conf")
	if err := os.WriteFile(conf, []byte("[libdefaults]\n  default_realm = EXAMPLE.COM\n[realms]\n  EXAMPLE.COM = {\n    kdc = 127.0.0.1:1\n  }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ktPath := filepath.Join(dir, "copyd.keytab")
	kc, err := New(Config{Principal: "copyd", Keytab: ktPath, Krb5Conf: conf}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	now := time.Date(2026, 12, 6, 15, 0, 0, 0, time.UTC)
	kdc := &fakeKDC{accept: 1}
	kc.now = func() time.Time { return now }
	kc.kdcLogin, kc.affirm = kdc.login, kdc.affirm
	kc.retryMin, kc.retryMax = time.Second, 4*time.Second

	_, _, err = kc.Current()
	if err == nil || !strings.Contains(err.Error(), ktPath) || !strings.Contains(err.Error(), "copyd@EXAMPLE.COM") {
		t.Fatalf("login with no keytab: err = %v, want one naming %s and copyd@EXAMPLE.COM", err, ktPath)
	}
	if got := testutil.ToFloat64(kc.failures); got != 1 || errors.Is(err, ErrRefused) {
		t.Errorf("login failures = %v after one failed login (ErrRefused: %v), want 1 (false)", got, errors.Is(err, ErrRefused))
	}
	writeKeytabFile(t, ktPath, "copyd", 1)
	// Within the backoff: the last error, no attempt.
	now = now.Add(999 * time.Millisecond)
	if _, _, err := kc.Current(); err == nil || !strings.Contains(err.Error(), ktPath) || !strings.Contains(err.Error(), "next attempt in 1ms") {
		t.Errorf("within the backoff: err = %v, want the last failure and when the next attempt is", err)
	}
	if got := testutil.ToFloat64(kc.failures); got != 1 || len(kdc.logins) != 0 {
		t.Errorf("within the backoff: %v failures and %d logins at the KDC, want 1 and 0", got, len(kdc.logins))
	}
	now = now.Add(time.Millisecond)
	cl, gen, err := kc.Current()
	if err != nil || cl == nil {
		t.Fatalf("login once the keytab is there and the backoff passed: %v", err)
	}
	if kc.Principal() != "copyd@EXAMPLE.COM" || testutil.ToFloat64(kc.logins) != 1 || !slices.Equal(kdc.logins, []uint8{1}) {
		t.Errorf("logged in as %s, %v logins, KDC saw key versions %v; want copyd@EXAMPLE.COM, 1, [1]",
			kc.Principal(), testutil.ToFloat64(kc.logins), kdc.logins)
	}
	if again, g, err := kc.Current(); err != nil || again != cl || g != gen {
		t.Errorf("a second use with the TGT valid: client %p generation %d (%v), want %p %d", again, g, err, cl, gen)
	}

	// Rotation: the KDC takes only key version 2, the keytab is replaced,
	// the TGT expires.
	kdc.accept = 2
	writeKeytabFile(t, ktPath, "copyd", 2)
	kdc.expire = true
	cl2, gen2, err := kc.Current()
	kdc.expire = false
	if err != nil || cl2 == cl || gen2 == gen {
		t.Fatalf("after the rotation: client %p generation %d (%v), want a new client (not %p, %d)", cl2, gen2, err, cl, gen)
	}
	if !slices.Equal(kdc.logins, []uint8{1, 2}) || testutil.ToFloat64(kc.logins) != 2 || testutil.ToFloat64(kc.failures) != 1 {
		t.Errorf("after the rotation: KDC saw key versions %v, %v logins, %v failures; want [1 2], 2, 1",
			kdc.logins, testutil.ToFloat64(kc.logins), testutil.ToFloat64(kc.failures))
	}
	if kc.GoKrb5() != cl2 {
		t.Error("GoKrb5 does not return the new login's client")
	}

	// The KDC refuses the key (rotated there, the file not yet): refused,
	// counted, and retried after the backoff.
	kdc.accept, kdc.expire = 3, true
	if _, _, err := kc.Current(); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "KDC_ERR_PREAUTH_FAILED") {
		t.Errorf("a key the KDC refuses: err = %v, want ErrRefused with the KDC's error", err)
	}
	writeKeytabFile(t, ktPath, "copyd", 3)
	now = now.Add(time.Second)
	if _, g, err := kc.Current(); err != nil || g == gen2 {
		t.Errorf("once the new keytab is there: generation %d (%v), want a new login", g, err)
	}
	if !slices.Equal(kdc.logins, []uint8{1, 2, 2, 3}) || testutil.ToFloat64(kc.logins) != 3 || testutil.ToFloat64(kc.failures) != 2 {
		t.Errorf("after the refusal: KDC saw key versions %v, %v logins, %v failures; want [1 2 2 3], 3, 2",
			kdc.logins, testutil.ToFloat64(kc.logins), testutil.ToFloat64(kc.failures))
	}
}

// TestLoginBackoff: failed logins in a row wait twice as long each time,
// up to the cap.
func TestLoginBackoff(t *testing.T) {
	var got []time.Duration
	for n := 1; n <= 5; n++ {
		got = append(got, backoff(time.Second, 5*time.Second, n))
	}
	if want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}; !slices.Equal(got, want) {
		t.Errorf("backoff = %v, want %v", got, want)
	}
}
