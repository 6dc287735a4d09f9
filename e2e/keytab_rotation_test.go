package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jcmturner/gokrb5/v8/keytab"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/krb"
	"github.com/hivedr/hivedr/internal/testenv"
)

// TestKeytabRotation: copyd starts before its keytab is there (a secret
// mounted late): it keeps running, says it is not logged in, naming the
// keytab, and counts the failure in hivedr_kerberos_login_failures_total;
// once the file appears it logs in, with no restart, and the first change
// replicates. Then the keys of the three daemons' principals are rotated
// on the secured stack's KDC while the pipeline runs: for each of
// hivedr-tailer, hivedr-copyd and hivedr-applier a new random key (a new
// kvno; the KDC keeps no old one) is exported to a new keytab, renamed over
// the one the daemon reads. The KDC must refuse a login with a copy of the
// old keytab. The roles' tickets last HIVEDR_KRB_ROLE_MAXLIFE (90 s) and
// are not renewable, so the keys the daemons read before stop getting
// tickets within that; a workload paced at one partition every 10 s keeps
// copyd asking for tickets (every WebHDFS request needs one) until its log
// says it logged in again with the new key version. A last change made
// after that replicates, the daemons never having been restarted.
func TestKeytabRotation(t *testing.T) {
	env := testenv.RequireSecure(t)
	ctx := ctxFor(t, 12*time.Minute)
	db := "kr_sales_" + uniq(t)
	src, dr := env.HMS(t, testenv.Source), env.HMS(t, testenv.DR)
	srcFS, drFS := pipelineFS(t, env)
	p := newSecurePipeline(t, env, []string{db}, currentEventID(t, ctx, src))
	w := wl.NewSource(src, srcFS, env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL"))
	p.startTail()
	p.startApply()
	// copyd's keytab is not there yet.
	late := filepath.Join(t.TempDir(), "copyd.keytab")
	copydMetrics := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	p.copyd = startHivedrEnv(t, "copyd", append(p.roleEnv["copyd"], "HIVEDR_KEYTAB="+late),
		"copyd", "-config", p.conf, "-state-dir", filepath.Join(p.state, "copyd"), "-metrics-addr", copydMetrics)
	copydMetric := func(name string) float64 {
		t.Helper()
		var v float64
		eventually(t, time.Minute, "copyd's "+name, func() bool {
			p.checkAlive()
			m, ok := scrape("http://" + copydMetrics + "/metrics")
			v = m[name]
			return ok
		})
		return v
	}
	eventually(t, time.Minute, "copyd to say it is not logged in", func() bool {
		p.checkAlive()
		out := p.copyd.out.String()
		return strings.Contains(out, `msg="kerberos: not logged in; trying again at the next use"`) && strings.Contains(out, late)
	})
	if n := copydMetric("hivedr_kerberos_login_failures_total"); n < 1 {
		t.Fatalf("copyd's hivedr_kerberos_login_failures_total = %v with its keytab missing, want at least 1", n)
	}
	copyFile(t, env.Keytab(t, testenv.CopydPrincipal), late)
	spec := wl.TableSpec{Columns: []string{"id bigint", "note string"}, PartitionKeys: []string{"dt"}}
	if err := w.CreateDatabase(ctx, db); err != nil {
		t.Fatal(err)
	}
	if err := w.CreateTable(ctx, db, "orders", spec); err != nil {
		t.Fatal(err)
	}
	day := 0
	addPartition := func() {
		t.Helper()
		day++
		if _, err := w.AddPartitions(ctx, db, "orders", [][]string{{fmt.Sprintf("2026-11-%02d", day)}}, 20); err != nil {
			t.Fatal(err)
		}
	}
	addPartition()
	p.converge(ctx, src, dr, srcFS, drFS, 3*time.Minute)
	if n := copydMetric("hivedr_kerberos_logins_total"); n < 1 {
		t.Errorf("copyd's hivedr_kerberos_logins_total = %v once its keytab appeared and the change replicated, want at least 1", n)
	}

	realm := env.Get(t, "HIVEDR_KRB_REALM")
	kvno := map[string]int{}
	for _, pr := range []string{testenv.TailerPrincipal, testenv.CopydPrincipal, testenv.ApplierPrincipal} {
		path := env.Keytab(t, pr)
		old := filepath.Join(t.TempDir(), pr+".keytab")
		copyFile(t, path, old)
		before := keytabVersion(t, path, pr)
		also := []string{}
		if pr == testenv.CopydPrincipal {
			also = append(also, late)
		}
		kvno[pr] = rotateKey(t, env, pr, also...)
		for i, k := range keytabSecrets(t, path) {
			p.secrets[fmt.Sprintf("key %d of the rotated %s", i, filepath.Base(path))] = k
		}
		if kvno[pr] <= before {
			t.Fatalf("%s: key version %d after the rotation, %d before; want a new one", pr, kvno[pr], before)
		}
		kc, err := krb.Login(krb.Config{Principal: pr + "@" + realm, Keytab: old, Krb5Conf: env.Get(t, "HIVEDR_KRB5_CONF")}, nil)
		if err == nil {
			kc.Close()
			t.Fatalf("%s: the KDC still takes the key of version %d after the rotation", pr, before)
		}
		t.Logf("%s: key version %d -> %d; the old key is refused: %v", pr, before, kvno[pr], err)
	}

	maxLife, err := time.ParseDuration(env.Get(t, "HIVEDR_KRB_ROLE_MAXLIFE"))
	if err != nil {
		t.Fatalf("HIVEDR_KRB_ROLE_MAXLIFE: %v", err)
	}
	rotated, paced := time.Now(), time.Now()
	eventually(t, 3*maxLife+time.Minute, fmt.Sprintf("copyd logged in again with key version %d", kvno[testenv.CopydPrincipal]), func() bool {
		p.checkAlive()
		if loggedInWith(p.copyd.out.String(), kvno[testenv.CopydPrincipal]) {
			return true
		}
		if time.Since(paced) >= 10*time.Second {
			addPartition()
			paced = time.Now()
		}
		return false
	})
	t.Logf("copyd logged in with the new key %s after the rotation", time.Since(rotated).Round(time.Second))
	addPartition()
	p.converge(ctx, src, dr, srcFS, drFS, 3*time.Minute)
	p.checkAliveOf(p.tail, p.copyd, p.apply)
	for _, pr := range []*proc{p.tail, p.copyd, p.apply} {
		// The tailer and the applier keep their metastore connections, so
		// they may not have needed a ticket since.
		t.Logf("%s: logged in again %d times, with the new key: %v", pr.name,
			strings.Count(pr.out.String(), `msg="kerberos: logged in again"`),
			loggedInWith(pr.out.String(), kvno["hivedr-"+roleName(pr.name)]))
	}
	p.daemonsPrintedNoSecret()
}

// loggedInWith reports whether a daemon's log (text format) says it
// logged in again from its keytab with key version kvno.
func loggedInWith(out string, kvno int) bool {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, `msg="kerberos: logged in again"`) && strings.HasSuffix(strings.TrimSpace(l), fmt.Sprintf(" kvno=%d", kvno)) {
			return true
		}
	}
	return false
}

// rotateKey gives principal (a name of the secured stack's realm) a new
// random key on the KDC, as an administrator rotating it would: kadmin
// exports it to a new keytab (a new key version; the KDC keeps no old
// one), which is renamed over the principal's keytab and copied over each
// of also the same way. It returns the new key version.
func rotateKey(t *testing.T, env *testenv.Env, principal string, also ...string) int {
	t.Helper()
	conf := env.Get(t, "HIVEDR_KRB5_CONF")
	kdcDir := filepath.Dir(conf)
	path := env.Keytab(t, principal)
	tmp := path + ".rotating"
	os.Remove(tmp)
	cmd := exec.Command("kadmin.local", "-r", env.Get(t, "HIVEDR_KRB_REALM"), "-q",
		fmt.Sprintf("ktadd -k %s %s@%s", tmp, principal, env.Get(t, "HIVEDR_KRB_REALM")))
	cmd.Env = append(os.Environ(), "KRB5_CONFIG="+conf, "KRB5_KDC_PROFILE="+filepath.Join(kdcDir, "kdc.conf"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kadmin.local ktadd %s: %v\n%s", principal, err, out)
	}
	for _, p := range also {
		copyFile(t, tmp, p)
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	return keytabVersion(t, path, principal)
}

// keytabVersion is the highest key version of principal in the keytab at
// path.
func keytabVersion(t *testing.T, path, principal string) int {
	t.Helper()
	kt, err := keytab.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	v := -1
	for _, e := range kt.Entries {
		if strings.Join(e.Principal.Components, "/") == principal {
			v = max(v, int(e.KVNO))
		}
	}
	if v < 0 {
		t.Fatalf("keytab %s holds no key of %s", path, principal)
	}
	return v
}

// copyFile writes the content of the file at from over to (mode 0600)
// as a rotation does: to a new file renamed over to.
func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to+".new", b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(to+".new", to); err != nil {
		t.Fatal(err)
	}
}
