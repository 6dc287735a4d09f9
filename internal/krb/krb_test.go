package krb

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jcmturner/gokrb5/v8/iana/etypeID"
	"github.com/jcmturner/gokrb5/v8/keytab"
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
	kt := keytab.New()
	if err := kt.AddEntry("tailer", "EXAMPLE.COM", "pw", time.Now(), 1, etypeID.AES256_CTS_HMAC_SHA1_96); err != nil {
		t.Fatal(err)
	}
	b, err := kt.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	ktPath := filepath.Join(dir, "tailer.keytab")
	if err := os.WriteFile(ktPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Login(Config{Principal: "copyd", Keytab: ktPath, Krb5Conf: conf}, nil)
	if err == nil {
		t.Fatal("login with another principal's keytab succeeded")
	}
	for _, want := range []string{"copyd@EXAMPLE.COM", ktPath, "has no key for it", "tailer@EXAMPLE.COM"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	_, err = Login(Config{Principal: "copyd", Keytab: filepath.Join(dir, "missing.keytab"), Krb5Conf: conf}, nil)
	if err == nil || !strings.Contains(err.Error(), "missing.keytab") || !strings.Contains(err.Error(), "copyd@EXAMPLE.COM") {
		t.Errorf("missing keytab: err = %v", err)
	}
	_, err = Login(Config{Principal: "copyd", Keytab: ktPath, Krb5Conf: filepath.Join(dir, "none.conf")}, nil)
	if err == nil || !strings.Contains(err.Error(), "none.conf") {
		t.Errorf("missing krb5.conf: err = %v", err)
	}
}
