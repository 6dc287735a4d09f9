package main

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hivedr/hivedr/internal/krb/krbtest"

	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/krb"
	"github.com/hivedr/hivedr/internal/metrics"
)

// TestLoginDaemonRetries: a daemon whose keytab cannot be read yet starts
// with a client that will log in at its next use, and its metrics carry
// the failed login, labelled with the pipeline; a tool with the same file
// fails. A keytab holding another principal's keys stops the daemon too
// (krb.ErrRefused).
func TestLoginDaemonRetries(t *testing.T) {
	dir := t.TempDir()
	krb5 := filepath.Join(dir, "krb5.conf")
	if err := os.WriteFile(krb5, []byte("[libdefaults]\n  default_realm = EXAMPLE.COM\n[realms]\n  EXAMPLE.COM = {\n    kdc = 127.0.0.1:1\n  }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "copyd.keytab")
	conf := func(keytab string) *config.Config {
		return &config.Config{Kerberos: krb.Config{Principal: "copyd@EXAMPLE.COM", Keytab: keytab, Krb5Conf: krb5}}
	}
	log := slog.New(slog.DiscardHandler)

	if err := login(conf(missing), log, false); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("a tool without its keytab: err = %v, want one naming %s", err, missing)
	}
	c := conf(missing)
	if err := login(c, log, true); err != nil {
		t.Fatalf("a daemon without its keytab yet: %v, want it to start", err)
	}
	if c.KerberosClient() == nil {
		t.Fatal("the daemon's configuration has no Kerberos client")
	}
	defer c.KerberosClient().Close()
	reg, err := metrics.NewRegistry("copyd", "p1", withKerberos(registerers{}, c))
	if err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var failures float64 = -1
	for _, mf := range mfs {
		if mf.GetName() != "hivedr_kerberos_login_failures_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == metrics.PipelineLabel && l.GetValue() == "p1" {
					failures = m.GetCounter().GetValue()
				}
			}
		}
	}
	if failures != 1 {
		t.Errorf(`hivedr_kerberos_login_failures_total{pipeline="p1"} = %v, want 1`, failures)
	}

	other := filepath.Join(dir, "tailer.keytab")
	krbtest.WriteKeytab(t, other, "tailer", "EXAMPLE.COM", "pw", 1)
	if err := login(conf(other), log, true); !errors.Is(err, krb.ErrRefused) || !strings.Contains(err.Error(), "has no key for it") {
		t.Errorf("a daemon with another principal's keytab: err = %v, want krb.ErrRefused", err)
	}
}
