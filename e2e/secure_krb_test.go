package e2e

import (
	"fmt"
	"hash/crc32"
	"strings"
	"testing"
	"time"

	"github.com/hivedr/hivedr/internal/hdfscrc"
	"github.com/hivedr/hivedr/internal/testenv"
)

// TestSecureKerberosChecksum writes files of several sizes (empty, within
// a block, across blocks) to both kerberized clusters and reads their
// COMPOSITE-CRC32C with internal/hdfscrc: block locations and tokens from
// WebHDFS over HTTPS with SPNEGO, then OP_BLOCK_CHECKSUM after a SASL
// DIGEST-MD5 handshake keyed by each block's access token (QOP auth). Each
// must equal Go's CRC-32C of the bytes. Asking a DataNode that offers
// authentication only for integrity must fail saying so, and a client
// that skips the SASL handshake must be refused by the DataNode. (The
// auth-int path, HMAC-wrapped messages, is unit-tested; the stack's
// clusters cannot offer it, see docs/security.md.)
func TestSecureKerberosChecksum(t *testing.T) {
	env := testenv.RequireSecure(t)
	ctx := ctxFor(t, 3*time.Minute)
	u := uniq(t)
	dir := "/securecrc/" + u
	table := crc32.MakeTable(crc32.Castagnoli)
	sizes := []int{0, 1000, 1<<20 + 4321, 3<<20 + 17} // the source's blocks are 1 MiB
	for _, site := range []testenv.Site{testenv.Source, testenv.DR} {
		c := env.HDFS(t, site)
		t.Cleanup(func() { c.RemoveAll(dir) })
		protections := []string{hdfscrc.ProtectionAuthentication}
		for _, n := range sizes {
			data := make([]byte, n)
			for i := range data {
				data[i] = byte(i*7 + n)
			}
			p := fmt.Sprintf("%s/f%d", dir, n)
			testenv.WriteHDFS(t, c, p, data)
			for _, prot := range protections {
				crc := env.HDFSCRC(t, site)
				crc.DataTransferProtection = prot
				got, length, err := crc.FileCRC32C(ctx, p)
				if err != nil {
					t.Fatalf("%s %s (%d bytes), %s: %v", site, p, n, prot, err)
				}
				if want := crc32.Checksum(data, table); got != want || length != int64(n) {
					t.Errorf("%s %s, %s: CRC %08x over %d bytes, want %08x over %d", site, p, prot, got, length, want, n)
				}
			}
		}
	}
	p := fmt.Sprintf("%s/f%d", dir, 1000)
	crc := env.HDFSCRC(t, testenv.DR)
	crc.DataTransferProtection = hdfscrc.ProtectionIntegrity
	if _, _, err := crc.FileCRC32C(ctx, p); err == nil || !strings.Contains(err.Error(), "offers QOP auth, not auth-int") {
		t.Errorf("integrity against the DR DataNode (authentication only): err = %v, want a QOP mismatch", err)
	}
	crc = env.HDFSCRC(t, testenv.DR)
	crc.DataTransferProtection = hdfscrc.ProtectionNone
	if _, _, err := crc.FileCRC32C(ctx, p); err == nil {
		t.Error("the kerberized DR DataNode answered a client that skipped the SASL handshake")
	}
}
