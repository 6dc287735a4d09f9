package testenv

import (
	"path/filepath"
	"testing"

	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/krb"
)

// TestPrincipal is the secured stack's principal for the tests' own
// clients (in the HDFS superuser group).
const TestPrincipal = "hivedr-test"

// The hivedr role principals of the secured stack (e2e/stack/services/kdc.sh).
const (
	TailerPrincipal  = "hivedr-tailer"
	CopydPrincipal   = "hivedr-copyd"
	ApplierPrincipal = "hivedr-applier"
	// OperatorPrincipal runs the operator's commands (status, verify,
	// bootstrap, drill, ...).
	OperatorPrincipal = "hivedr-operator"
)

// Keytab returns the path of the secured stack's keytab of principal (its
// name without realm, e.g. hivedr-copyd).
func (e *Env) Keytab(t testing.TB, principal string) string {
	return filepath.Join(e.Get(t, "HIVEDR_KRB_KEYTABS"), principal+".keytab")
}

// KrbConfig returns the kerberos configuration of principal (a name of the
// secured stack's realm) with its keytab.
func (e *Env) KrbConfig(t testing.TB, principal string) krb.Config {
	return krb.Config{Principal: principal + "@" + e.Get(t, "HIVEDR_KRB_REALM"), Keytab: e.Keytab(t, principal),
		Krb5Conf: e.Get(t, "HIVEDR_KRB5_CONF")}
}

// Krb returns principal logged in from its keytab, once per Env; closed
// when the test that called RequireSecure ends.
func (e *Env) Krb(t testing.TB, principal string) *krb.Client {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if kc, ok := e.krbs[principal]; ok {
		return kc
	}
	kc, err := krb.Login(e.KrbConfig(t, principal), nil)
	if err != nil {
		t.Fatalf("%v; %s", err, howToStartSecure)
	}
	if e.krbs == nil {
		e.krbs = map[string]*krb.Client{}
	}
	e.krbs[principal] = kc
	owner := e.owner
	if owner == nil {
		owner = t
	}
	owner.Cleanup(kc.Close)
	return kc
}

// HMSOptions returns the metastores' Dial options: SASL GSSAPI as the test
// principal on the secured stack, none on the plain one.
func (e *Env) HMSOptions(t testing.TB) hms.Options {
	if !e.secure {
		return hms.Options{}
	}
	return hms.Options{Kerberos: e.Krb(t, TestPrincipal), Principal: e.Get(t, "HIVEDR_HMS_PRINCIPAL")}
}

// HDFSConfig returns the fs configuration of the site's cluster, reached as
// kc on the secured stack (kc is ignored on the plain one, where the user
// is hivedr).
func (e *Env) HDFSConfig(t testing.TB, site Site, kc *krb.Client) fs.HDFSConfig {
	t.Helper()
	c := fs.HDFSConfig{NameNodes: []string{e.Get(t, "HIVEDR_HDFS_"+string(site)+"_NAMENODE")},
		WebHDFS: e.Get(t, "HIVEDR_HDFS_"+string(site)+"_HTTP")}
	if !e.secure {
		c.User = "hivedr"
		return c
	}
	c.NameNodePrincipal = e.Get(t, "HIVEDR_HDFS_NN_PRINCIPAL")
	c.HTTPPrincipal = e.Get(t, "HIVEDR_HDFS_HTTP_PRINCIPAL")
	c.DataTransferProtection = e.Get(t, "HIVEDR_HDFS_"+string(site)+"_PROTECTION")
	c.CAFile = e.Get(t, "HIVEDR_HDFS_CA_FILE")
	c.Kerberos = kc
	return c
}
