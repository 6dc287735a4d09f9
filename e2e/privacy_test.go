package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	wl "github.com/hivedr/hivedr/e2e/workload"
	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/hdfscrc"
	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/krb"
	"github.com/hivedr/hivedr/internal/location"
	"github.com/hivedr/hivedr/internal/testenv"
)

// The TestPrivacy* tests run on the privacy variant of the secured stack
// (`make stack-privacy-up`: HIVEDR_STACK_SECURE=1 HIVEDR_STACK_PRIVACY=1,
// state in .stack-privacy), where wire privacy is on everywhere it can be
// asked for: hadoop.rpc.protection=privacy on both HDFS clusters,
// dfs.encrypt.data.transfer with AES/CTR, and SASL QOP auth-conf on both
// metastores, on top of everything the secured stack does.

// requirePrivacy returns the privacy stack's environment: the env file in
// HIVEDR_PRIVACY_STACK_DIR, default .stack-privacy at the repository root.
func requirePrivacy(t *testing.T) *testenv.Env {
	t.Helper()
	dir := os.Getenv("HIVEDR_PRIVACY_STACK_DIR")
	if dir == "" {
		root, err := filepath.Abs("..")
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(root, ".stack-privacy")
	}
	t.Setenv("HIVEDR_SECURE_STACK_ENV", filepath.Join(dir, "env"))
	env := testenv.RequireSecure(t)
	if env.Get(t, "HIVEDR_STACK_PRIVACY") != "1" {
		t.Fatalf("%s is not the privacy stack's env file (no HIVEDR_STACK_PRIVACY=1); start it with make stack-privacy-up", env.Path)
	}
	return env
}

// TestPrivacyChecksums writes files of several sizes (empty, within a
// block, across blocks of either cluster) through hivedr's HDFS store to
// both clusters of the privacy stack, where every DataNode connection is
// encrypted (dfs.encrypt.data.transfer, AES/CTR, keyed by the NameNode's
// data encryption key) and every NameNode call too (RPC privacy). Each
// write's own verification (the staging file's COMPOSITE-CRC32C before
// the rename), each read back and each Checksum must match Go's CRC-32C
// of the bytes, so the source's and the DR's checksums of the same bytes
// are equal though their block sizes differ (1 MiB, 4 MiB).
func TestPrivacyChecksums(t *testing.T) {
	env := requirePrivacy(t)
	ctx := ctxFor(t, 4*time.Minute)
	kc := env.Krb(t, testenv.TestPrincipal)
	table := crc32.MakeTable(crc32.Castagnoli)
	dir := "/privacycrc/" + uniq(t)
	sizes := []int{0, 1000, 1<<20 + 4321, 5<<20 + 17}
	sums := map[testenv.Site][]uint32{}
	for _, site := range []testenv.Site{testenv.Source, testenv.DR} {
		conf := env.HDFSConfig(t, site, kc)
		if conf.DataTransferProtection != "privacy" {
			t.Fatalf("%s: data_transfer_protection %q on the privacy stack", site, conf.DataTransferProtection)
		}
		h, err := fs.NewHDFS(conf)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		nn := env.HDFS(t, site)
		t.Cleanup(func() { nn.RemoveAll(dir) })
		for _, n := range sizes {
			data := make([]byte, n)
			for i := range data {
				data[i] = byte(i*13 + n)
			}
			want := crc32.Checksum(data, table)
			loc := fmt.Sprintf("hdfs://%s%s/f%d", conf.NameNodes[0], dir, n)
			w, err := h.Create(ctx, loc, int64(n))
			if err != nil {
				t.Fatalf("%s: create %s: %v", site, loc, err)
			}
			if _, err := w.Write(data); err != nil {
				t.Fatalf("%s: write %s: %v", site, loc, err)
			}
			if err := w.Commit(ctx, want); err != nil {
				t.Fatalf("%s: commit %s (%d bytes): %v", site, loc, n, err)
			}
			if v, ok := w.Verified(); !ok || v.CRC32C != want {
				t.Errorf("%s %s: the write verified CRC %08x (checked %t), want %08x", site, loc, v.CRC32C, ok, want)
			}
			r, err := h.Open(ctx, loc, 0, -1)
			if err != nil {
				t.Fatalf("%s: open %s: %v", site, loc, err)
			}
			back, err := io.ReadAll(r)
			r.Close()
			if err != nil || !bytes.Equal(back, data) {
				t.Fatalf("%s %s: read back %d bytes (%v), want the %d written", site, loc, len(back), err, n)
			}
			sum, ok, err := h.Checksum(ctx, loc)
			if err != nil || !ok {
				t.Fatalf("%s: checksum %s: %v", site, loc, err)
			}
			if sum.CRC32C != want {
				t.Errorf("%s %s: COMPOSITE-CRC32C %08x, want %08x", site, loc, sum.CRC32C, want)
			}
			sums[site] = append(sums[site], sum.CRC32C)
		}
	}
	if fmt.Sprint(sums[testenv.Source]) != fmt.Sprint(sums[testenv.DR]) {
		t.Errorf("checksums of the same bytes: source %08x, DR %08x", sums[testenv.Source], sums[testenv.DR])
	}

	// The DataNodes encrypt and take the NameNode's data encryption key
	// only: a client with block tokens as credentials, and one asking for
	// authentication only, are refused.
	p := fmt.Sprintf("%s/f%d", dir, 1000)
	crc := env.HDFSCRC(t, testenv.Source) // no EncryptionKey: block tokens
	if _, _, err := crc.FileCRC32C(ctx, p); err == nil {
		t.Error("an encrypting DataNode took a block token as credentials")
	}
	crc.DataTransferProtection = hdfscrc.ProtectionAuthentication
	if _, _, err := crc.FileCRC32C(ctx, p); err == nil || !strings.Contains(err.Error(), "offers QOP auth-conf, not auth") {
		t.Errorf("authentication against an encrypting DataNode: err = %v, want a QOP mismatch", err)
	}
}

// TestPrivacyPipeline runs the whole pipeline on the privacy stack, each
// daemon as its own role: the tailer reads the source metastore over SASL
// QOP auth-conf, copyd copies over encrypted data transfer with RPC
// privacy on both clusters and verifies each copy's COMPOSITE-CRC32C over
// encrypted connections too, the applier writes the DR metastore over
// auth-conf. The scenario's workload must converge, the applier's group
// catch up to the ends of the event topics, and hivedr verify (as the
// operator) find nothing. The test's own metastore connections must have
// negotiated auth-conf, and one insisting on auth is refused: the
// metastores offer nothing weaker.
func TestPrivacyPipeline(t *testing.T) {
	env := requirePrivacy(t)
	u := uniq(t)
	db1, db2 := "pp_sales_"+u, "pp_archive_"+u
	ctx := ctxFor(t, 15*time.Minute)
	src, dr := env.HMS(t, testenv.Source), env.HMS(t, testenv.DR)
	for site, c := range map[testenv.Site]*hms.Client{testenv.Source: src, testenv.DR: dr} {
		if c.QOP() != krb.QOPAuthConf {
			t.Fatalf("%s metastore: SASL QOP %q negotiated, want auth-conf", site, c.QOP())
		}
	}
	// The metastores offer nothing weaker: a client insisting on auth
	// is refused before any Thrift call.
	weak := env.HMSOptions(t)
	weak.QOP = krb.QOPAuth
	if c, err := hms.Dial(ctx, env.Get(t, "HIVEDR_HMS_SRC"), weak); !errors.Is(err, krb.ErrSecurityLayer) {
		if err == nil {
			c.Close()
		}
		t.Fatalf("a client insisting on QOP auth: err = %v, want no security layer in common", err)
	}
	srcFS, drFS := pipelineFS(t, env)
	p := newSecurePipeline(t, env, []string{db1, db2}, currentEventID(t, ctx, src))
	started := time.Now()
	p.startAll()
	root := location.MustParse(env.Get(t, "HIVEDR_HMS_SRC_EXTERNAL"))
	w := wl.NewSource(src, restrictedFS{HDFS: srcFS, root: root}, root.String())
	for _, st := range scenario(db1, db2) {
		if err := st.run(ctx, w); err != nil {
			t.Fatalf("workload step %q: %v", st.name, err)
		}
	}
	p.converge(ctx, src, dr, srcFS, drFS, 4*time.Minute)
	eventually(t, 2*time.Minute, "applier group committed to the end of the event topics", func() bool { return p.caughtUp(ctx) })
	t.Logf("converged %s after the daemons started", time.Since(started).Round(time.Second))
	v := p.runVerify("-sample", "1")
	if v.code != 0 || len(v.findings) != 0 || v.summary.Diverged != 0 || v.summary.Tables == 0 {
		t.Fatalf("hivedr verify as the operator exited %d, summary %+v, findings %v:\n%s", v.code, v.summary, v.findings, v.raw)
	}
	p.noSecretIn("hivedr verify", v.raw)
	p.daemonsPrintedNoSecret()
}
