package copyd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hivedr/hivedr/internal/acid"
	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/state"
	"github.com/hivedr/hivedr/internal/webhdfs"
	"github.com/hivedr/hivedr/schemas"
)

const (
	srcNN = "hdfs://src:8020"
	drNN  = "hdfs://dr:8020"
	cmDir = srcNN + "/cmroot"
)

// fakeClock is a clock whose Sleep advances it at once.
type fakeClock struct {
	mu    sync.Mutex
	t     time.Time
	slept time.Duration
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	c.slept += d
	return nil
}

type fixture struct {
	src, dr *memFS
	r       *memResolver
	e       *Engine
	m       *Metrics
	clock   *fakeClock
}

func newFixture(t *testing.T, mod func(*EngineConfig)) *fixture {
	t.Helper()
	f := &fixture{src: newMemFS(), dr: newMemFS(), m: NewMetrics(), clock: &fakeClock{t: time.Unix(1_800_000_000, 0)}}
	f.r = &memResolver{stores: map[string]fs.FS{srcNN: memSnapFS{memHexFS{f.src}}, drNN: f.dr}}
	cfg := EngineConfig{
		SourceRoots: []string{srcNN + "/warehouse/", srcNN + "/external"},
		CMRoots:     []string{cmDir},
		TargetRoots: []string{drNN + "/warehouse"},
		Retries:     3,
		Now:         f.clock.Now,
		Sleep:       f.clock.Sleep,
	}
	if mod != nil {
		mod(&cfg)
	}
	e, err := NewEngine(cfg, f.r, f.m)
	if err != nil {
		t.Fatal(err)
	}
	f.e = e
	return f
}

func task(name, checksum, cmRoot string) schemas.CopyTask {
	return schemas.CopyTask{
		TaskID: "7-" + name, EventID: 7, Database: "sales",
		SourceURI: srcNN + "/warehouse/sales.db/t/" + name,
		TargetURI: drNN + "/warehouse/sales.db/t/" + name,
		Checksum:  checksum, CMRoot: cmRoot,
	}
}

func randomBytes(n int) []byte {
	r := rand.New(rand.NewPCG(uint64(n), 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func crcHex(b []byte) string { return fmt.Sprintf("%08x", crcOf(b)) }

func hasCall(calls []string, prefix string) bool {
	for _, c := range calls {
		if strings.HasPrefix(c, prefix) {
			return true
		}
	}
	return false
}

func TestCopy(t *testing.T) {
	for _, n := range []int{0, 1, 100, 3<<20 + 17} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			f := newFixture(t, nil)
			data := randomBytes(n)
			tk := task("f", "", "")
			f.src.put(tk.SourceURI, data)
			c := f.e.Copy(context.Background(), tk)
			if c.Status != schemas.StatusCopied || c.Length != int64(n) || c.CRC32C == nil || *c.CRC32C != crcOf(data) ||
				c.Attempts != 1 || c.Error != "" || c.CopiedFrom != "" {
				t.Fatalf("completion %+v", c)
			}
			if c.Verification != "crc32c:source+target" {
				t.Errorf("verification %q", c.Verification)
			}
			if c.TaskID != tk.TaskID || c.EventID != 7 || c.Database != "sales" || c.SourceURI != tk.SourceURI || c.TargetURI != tk.TargetURI {
				t.Errorf("identity fields: %+v", c)
			}
			got, ok := f.dr.get(tk.TargetURI)
			if !ok || !bytes.Equal(got, data) {
				t.Fatalf("target holds %d bytes (%v), want %d", len(got), ok, n)
			}
			if len(f.dr.staged) != 0 {
				t.Errorf("staging left: %v", f.dr.staged)
			}
			if v := testutil.ToFloat64(f.m.files.WithLabelValues("COPIED")); v != 1 {
				t.Errorf("files copied metric %v", v)
			}
			if v := testutil.ToFloat64(f.m.bytes.WithLabelValues("COPIED")); v != float64(n) {
				t.Errorf("bytes copied metric %v", v)
			}
			if v := testutil.ToFloat64(f.m.inFlight); v != 0 {
				t.Errorf("in flight %v after the copy", v)
			}
		})
	}
}

func TestCopyWithEventChecksum(t *testing.T) {
	f := newFixture(t, nil)
	data := randomBytes(5000)
	tk := task("f", strings.ToUpper(crcHex(data)), cmDir)
	f.src.put(tk.SourceURI, data)
	c := f.e.Copy(context.Background(), tk)
	if c.Status != schemas.StatusCopied || c.Verification != "crc32c:source+event+target" {
		t.Fatalf("completion %+v", c)
	}
}

func TestSkipIdentical(t *testing.T) {
	f := newFixture(t, nil)
	data := randomBytes(1 << 20)
	tk := task("f", "", "")
	f.src.put(tk.SourceURI, data)
	f.dr.put(tk.TargetURI, data)
	c := f.e.Copy(context.Background(), tk)
	if c.Status != schemas.StatusSkippedIdentical || c.Length != 1<<20 || c.CRC32C == nil || *c.CRC32C != crcOf(data) {
		t.Fatalf("completion %+v", c)
	}
	if !strings.HasPrefix(c.Verification, "crc32c:source+target") {
		t.Errorf("verification %q", c.Verification)
	}
	for _, store := range []*memFS{f.src, f.dr} {
		for _, op := range []string{"open", "create", "write", "remove"} {
			if hasCall(store.callLog(), op) {
				t.Errorf("%s called while skipping: %v", op, store.callLog())
			}
		}
	}
	if v := testutil.ToFloat64(f.m.transferred); v != 0 {
		t.Errorf("%v bytes moved", v)
	}
	if v := testutil.ToFloat64(f.m.bytes.WithLabelValues("SKIPPED_IDENTICAL")); v != 1<<20 {
		t.Errorf("skipped bytes metric %v", v)
	}

	// Same length, other bytes: copied.
	other := randomBytes(1 << 20)
	other[0] ^= 0xff
	f.dr.put(tk.TargetURI, other)
	if c := f.e.Copy(context.Background(), tk); c.Status != schemas.StatusCopied {
		t.Fatalf("different target: %+v", c)
	}
}

func TestByteFlippedAfterChecksum(t *testing.T) {
	f := newFixture(t, nil)
	data := randomBytes(2 << 20)
	tk := task("f", "", "")
	f.src.put(tk.SourceURI, data)
	old := crcOf(data)
	f.src.files[tk.SourceURI][12345] ^= 0x01 // the store still reports the old checksum
	now := crcOf(f.src.files[tk.SourceURI])

	c := f.e.Copy(context.Background(), tk)
	if c.Status != schemas.StatusFailed || c.Attempts != 4 || c.CRC32C != nil || c.Length != -1 {
		t.Fatalf("completion %+v", c)
	}
	for _, want := range []string{fmt.Sprintf("%08x", old), fmt.Sprintf("%08x", now), "after 4 attempts", tk.SourceURI} {
		if !strings.Contains(c.Error, want) {
			t.Errorf("error %q does not say %q", c.Error, want)
		}
	}
	if _, ok := f.dr.get(tk.TargetURI); ok {
		t.Error("the flipped bytes reached the target")
	}
	if hasCall(f.dr.callLog(), "commit") {
		t.Error("a write was committed")
	}
	if len(f.dr.staged) != 0 {
		t.Errorf("staging left: %v", f.dr.staged)
	}
	if v := testutil.ToFloat64(f.m.retries); v != 3 {
		t.Errorf("retries metric %v", v)
	}
	if v := testutil.ToFloat64(f.m.files.WithLabelValues("FAILED")); v != 1 {
		t.Errorf("failed metric %v", v)
	}
}

func TestEventChecksumMismatchAtCopy(t *testing.T) {
	// The source store has no checksum, and the bytes differ from the
	// event's CRC32C: caught while streaming, never committed.
	f := newFixture(t, nil)
	f.src.noCRC = true
	data := randomBytes(1000)
	tk := task("f", "0badc0de", "")
	f.src.put(tk.SourceURI, data)
	c := f.e.Copy(context.Background(), tk)
	if c.Status != schemas.StatusFailed || !strings.Contains(c.Error, "0badc0de") || !strings.Contains(c.Error, crcHex(data)) {
		t.Fatalf("completion %+v", c)
	}
	if _, ok := f.dr.get(tk.TargetURI); ok {
		t.Error("bytes differing from the event's reached the target")
	}
}

func TestTargetStoreMismatch(t *testing.T) {
	f := newFixture(t, func(c *EngineConfig) { c.Retries = 1 })
	lie := uint32(0xdeadbeef)
	f.dr.lyingCRC = &lie
	data := randomBytes(4096)
	tk := task("f", "", "")
	f.src.put(tk.SourceURI, data)
	c := f.e.Copy(context.Background(), tk)
	if c.Status != schemas.StatusFailed || c.Attempts != 2 || !strings.Contains(c.Error, "deadbeef") || !strings.Contains(c.Error, crcHex(data)) {
		t.Fatalf("completion %+v", c)
	}
	if _, ok := f.dr.get(tk.TargetURI); ok {
		t.Error("a target found wrong after the commit was left in place")
	}
}

func TestNoChecksumFallback(t *testing.T) {
	for _, tc := range []struct {
		name         string
		srcNo, dstNo bool
		want         []string
	}{
		{"target store", false, true, []string{"crc32c:source; length+sampled-reread", "the target store gives no checksum"}},
		{"both stores", true, true, []string{"length+sampled-reread", "no checksum of the origin", "the target store gives no checksum"}},
		{"source store", true, false, []string{"crc32c:target; length+sampled-reread", "no checksum of the origin"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			f.src.noCRC, f.dr.noCRC = tc.srcNo, tc.dstNo
			data := randomBytes(1<<20 + 3)
			tk := task("f", "", "")
			f.src.put(tk.SourceURI, data)
			c := f.e.Copy(context.Background(), tk)
			if c.Status != schemas.StatusCopied || *c.CRC32C != crcOf(data) {
				t.Fatalf("completion %+v", c)
			}
			for _, w := range tc.want {
				if !strings.Contains(c.Verification, w) {
					t.Errorf("verification %q does not say %q", c.Verification, w)
				}
			}
			if !strings.Contains(c.Verification, "in 3 ranges") {
				t.Errorf("verification %q: want 3 ranges", c.Verification)
			}
		})
	}
	// Without checksums a same-length target is never taken as identical.
	f := newFixture(t, nil)
	f.src.noCRC, f.dr.noCRC = true, true
	tk := task("f", "", "")
	f.src.put(tk.SourceURI, []byte("abc"))
	f.dr.put(tk.TargetURI, []byte("abd"))
	if c := f.e.Copy(context.Background(), tk); c.Status != schemas.StatusCopied || c.Verification == "" {
		t.Fatalf("completion %+v", c)
	}
	if got, _ := f.dr.get(tk.TargetURI); string(got) != "abc" {
		t.Fatalf("target %q", got)
	}
}

func TestSampledRereadCatchesCorruption(t *testing.T) {
	// The target store has no checksum and its commit flips a byte: the
	// sampled re-read sees it, the bad file is removed, and the task fails.
	f := newFixture(t, func(c *EngineConfig) { c.Retries = 1 })
	f.dr.noCRC, f.dr.corruptAt = true, 5
	tk := task("f", "", "")
	f.src.put(tk.SourceURI, randomBytes(1000))
	c := f.e.Copy(context.Background(), tk)
	if c.Status != schemas.StatusFailed || c.Attempts != 2 || !strings.Contains(c.Error, "sampled re-read mismatch: byte 5 of "+tk.TargetURI) {
		t.Fatalf("completion %+v", c)
	}
	if _, ok := f.dr.get(tk.TargetURI); ok {
		t.Error("the corrupt target was left in place")
	}
}

func TestSampleRanges(t *testing.T) {
	for _, tc := range []struct {
		size int64
		want [][2]int64
	}{
		{0, nil},
		{1, [][2]int64{{0, 1}}},
		{3 * sampleSpan, [][2]int64{{0, 3 * sampleSpan}}},
		{1 << 20, [][2]int64{{0, sampleSpan}, {1<<19 - sampleSpan/2, sampleSpan}, {1<<20 - sampleSpan, sampleSpan}}},
	} {
		if got := sampleRanges(tc.size); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("sampleRanges(%d) = %v, want %v", tc.size, got, tc.want)
		}
	}
}

func TestSourceGoneCMRootHasIt(t *testing.T) {
	f := newFixture(t, nil)
	data := randomBytes(3000)
	sum := crcHex(data)
	tk := task("000000_0", sum, cmDir)
	cm := cmDir + "/000000_0_" + sum
	f.src.put(cm, data)
	c := f.e.Copy(context.Background(), tk)
	if c.Status != schemas.StatusCopied || c.CopiedFrom != cm || *c.CRC32C != crcOf(data) {
		t.Fatalf("completion %+v", c)
	}
	if !strings.Contains(c.Evidence, tk.SourceURI+": does not exist") || !strings.Contains(c.Verification, "event") {
		t.Errorf("evidence %q verification %q", c.Evidence, c.Verification)
	}
	if got, _ := f.dr.get(tk.TargetURI); !bytes.Equal(got, data) {
		t.Fatal("target does not hold the change-management copy")
	}
}

func TestSourceRewrittenCMRootHasIt(t *testing.T) {
	// A MD5-of-MD5 event checksum: the source's FileChecksum says it was
	// rewritten; the CM copy's says it holds the event's bytes.
	f := newFixture(t, nil)
	const sum = "00000200000000000000000077ac2bb5c4b4e7b8bd3e9fd4b6b9d6c9"
	const newer = "000002000000000000000000aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	old, now := randomBytes(3000), randomBytes(4000)
	tk := task("000000_0", sum, cmDir)
	cm := cmDir + "/000000_0_" + sum
	f.src.put(tk.SourceURI, now)
	f.src.fileSums[tk.SourceURI] = newer
	f.src.put(cm, old)
	f.src.fileSums[cm] = sum
	c := f.e.Copy(context.Background(), tk)
	if c.Status != schemas.StatusCopied || c.CopiedFrom != cm || *c.CRC32C != crcOf(old) {
		t.Fatalf("completion %+v", c)
	}
	if !strings.Contains(c.Evidence, "filechecksum "+newer+" differs from") || !strings.Contains(c.Verification, "filechecksum "+sum) {
		t.Errorf("evidence %q verification %q", c.Evidence, c.Verification)
	}
	// Unchanged source with the same FileChecksum: copied from the source.
	f.src.fileSums[tk.SourceURI] = sum
	f.dr.Remove(context.Background(), tk.TargetURI)
	if c := f.e.Copy(context.Background(), tk); c.Status != schemas.StatusCopied || c.CopiedFrom != "" || *c.CRC32C != crcOf(now) {
		t.Fatalf("completion %+v", c)
	}
}

func TestSourceGoneNothing(t *testing.T) {
	for _, tc := range []struct {
		name     string
		checksum string
		cmRoot   string
		put      bool
		want     []string
	}{
		{"gone, cm missing", "0a0b0c0d", cmDir, false, []string{
			srcNN + "/warehouse/sales.db/t/f: does not exist",
			"change-management copy " + cmDir + "/f_0a0b0c0d: does not exist",
			"snapshots: none holds " + srcNN + "/warehouse/sales.db/t/f"}},
		{"gone, no cm root", "0a0b0c0d", "", false, []string{": does not exist", "names no change-management root", "snapshots: none holds"}},
		{"gone, no checksum", "", cmDir, false, []string{": does not exist", "no checksum",
			"snapshots: the event logged no checksum to check a snapshot copy by"}},
		{"rewritten, no cm", "0a0b0c0d", "", true, []string{"crc32c differs from the event checksum 0a0b0c0d", "snapshots: none holds"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			tk := task("f", tc.checksum, tc.cmRoot)
			if tc.put {
				f.src.put(tk.SourceURI, []byte("new bytes"))
			}
			c := f.e.Copy(context.Background(), tk)
			if c.Status != schemas.StatusSourceGone || c.Attempts != 1 || c.Length != -1 || c.CRC32C != nil {
				t.Fatalf("completion %+v", c)
			}
			for _, w := range tc.want {
				if !strings.Contains(c.Evidence, w) {
					t.Errorf("evidence %q does not say %q", c.Evidence, w)
				}
			}
			if hasCall(f.dr.callLog(), "create") {
				t.Error("a target was written")
			}
		})
	}
	// The CM copy is there but its bytes are not the event's.
	f := newFixture(t, nil)
	tk := task("f", "0a0b0c0d", cmDir)
	f.src.put(cmDir+"/f_0a0b0c0d", []byte("other"))
	if c := f.e.Copy(context.Background(), tk); c.Status != schemas.StatusSourceGone || !strings.Contains(c.Evidence, "crc32c differs from") {
		t.Fatalf("completion %+v", c)
	}
}

// snapPath is where the snapshot name of /warehouse holds the task's file.
func snapPath(tk schemas.CopyTask, name string) string {
	return strings.Replace(tk.SourceURI, "/warehouse/", "/warehouse/.snapshot/"+name+"/", 1)
}

func TestSnapshotHasIt(t *testing.T) {
	// Source gone, change-management copy missing; the newest snapshot
	// holds other bytes, an older one the event's.
	f := newFixture(t, nil)
	data := randomBytes(3000)
	tk := task("f", crcHex(data), cmDir)
	newest, older := snapPath(tk, "s2"), snapPath(tk, "s1")
	f.src.put(newest, []byte("rewritten before s2"))
	f.src.put(older, data)
	f.src.snaps[tk.SourceURI] = []string{newest, older}
	c := f.e.Copy(context.Background(), tk)
	if c.Status != schemas.StatusCopied || c.CopiedFrom != older || c.CRC32C == nil || *c.CRC32C != crcOf(data) || c.Attempts != 1 {
		t.Fatalf("completion %+v", c)
	}
	for _, w := range []string{
		tk.SourceURI + ": does not exist",
		"change-management copy " + cmDir + "/f_" + crcHex(data) + ": does not exist",
		"snapshot copy " + newest + ": 19 bytes",
		"crc32c differs from the event checksum",
		"not used: snapshot copy's checksum differs from the event's",
		"snapshot copy " + older + ": 3000 bytes, crc32c " + crcHex(data) + ", crc32c matches the event checksum",
	} {
		if !strings.Contains(c.Evidence, w) {
			t.Errorf("evidence %q does not say %q", c.Evidence, w)
		}
	}
	if c.Verification != "crc32c:source+event+target" {
		t.Errorf("verification %q", c.Verification)
	}
	if got, _ := f.dr.get(tk.TargetURI); !bytes.Equal(got, data) {
		t.Fatal("target does not hold the snapshot's bytes")
	}
	if !hasCall(f.src.callLog(), "stat "+cmDir) || hasCall(f.src.callLog(), "open "+newest) {
		t.Errorf("calls %v", f.src.callLog())
	}
}

func TestSnapshotHasItFileChecksum(t *testing.T) {
	// A MD5-of-MD5 event checksum and no change-management root: the
	// source was rewritten; the snapshot's FileChecksum is the event's.
	f := newFixture(t, nil)
	const sum = "00000200000000000000000077ac2bb5c4b4e7b8bd3e9fd4b6b9d6c9"
	old, now := randomBytes(3000), randomBytes(4000)
	tk := task("f", sum, "")
	snap := snapPath(tk, "s1")
	f.src.put(tk.SourceURI, now)
	f.src.fileSums[tk.SourceURI] = "000002000000000000000000aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	f.src.put(snap, old)
	f.src.snaps[tk.SourceURI] = []string{snap}
	c := f.e.Copy(context.Background(), tk)
	if c.Status != schemas.StatusSourceGone || !strings.Contains(c.Evidence, "cannot be compared") {
		// No FileChecksum recorded for the snapshot copy: not verifiable.
		t.Fatalf("unverifiable snapshot: completion %+v", c)
	}
	if hasCall(f.dr.callLog(), "create") {
		t.Fatal("an unverified snapshot copy was written")
	}
	f.src.fileSums[snap] = sum
	c = f.e.Copy(context.Background(), tk)
	if c.Status != schemas.StatusCopied || c.CopiedFrom != snap || *c.CRC32C != crcOf(old) ||
		!strings.Contains(c.Verification, "filechecksum "+sum) || !strings.Contains(c.Evidence, "names no change-management root") {
		t.Fatalf("completion %+v", c)
	}
}

func TestSnapshotDiffers(t *testing.T) {
	f := newFixture(t, nil)
	tk := task("f", "0a0b0c0d", cmDir)
	snap := snapPath(tk, "s1")
	f.src.put(snap, []byte("other bytes"))
	f.src.snaps[tk.SourceURI] = []string{snap}
	c := f.e.Copy(context.Background(), tk)
	if c.Status != schemas.StatusSourceGone || c.Length != -1 || c.CRC32C != nil || c.CopiedFrom != "" {
		t.Fatalf("completion %+v", c)
	}
	for _, w := range []string{
		tk.SourceURI + ": does not exist",
		cmDir + "/f_0a0b0c0d: does not exist",
		"snapshot copy " + snap + ": 11 bytes, crc32c " + crcHex([]byte("other bytes")) + ", crc32c differs from the event checksum 0a0b0c0d",
	} {
		if !strings.Contains(c.Evidence, w) {
			t.Errorf("evidence %q does not say %q", c.Evidence, w)
		}
	}
	if hasCall(f.dr.callLog(), "create") || hasCall(f.src.callLog(), "open") {
		t.Fatalf("bytes moved: source %v, target %v", f.src.callLog(), f.dr.callLog())
	}
}

func TestSnapshotOutsideRoots(t *testing.T) {
	// Snapshots of / are outside the roots (/warehouse, /external); a
	// candidate with a ".." segment is refused too. Neither is read.
	f := newFixture(t, nil)
	data := randomBytes(100)
	tk := task("f", crcHex(data), "")
	outside := srcNN + "/.snapshot/s1/warehouse/sales.db/t/f"
	dotdot := srcNN + "/warehouse/.snapshot/../../.snapshot/s1/warehouse/sales.db/t/f"
	other := "hdfs://other:8020/warehouse/.snapshot/s1/sales.db/t/f"
	for _, p := range []string{outside, dotdot, other} {
		f.src.put(p, data)
	}
	f.src.snaps[tk.SourceURI] = []string{outside, dotdot, other}
	c := f.e.Copy(context.Background(), tk)
	if c.Status != schemas.StatusSourceGone {
		t.Fatalf("completion %+v", c)
	}
	for _, p := range []string{outside, dotdot, other} {
		if !strings.Contains(c.Evidence, p) {
			t.Errorf("evidence %q does not name %s", c.Evidence, p)
		}
		for _, op := range []string{"stat ", "checksum ", "open "} {
			if hasCall(f.src.callLog(), op+p) {
				t.Errorf("%s%s called", op, p)
			}
		}
	}
	if !strings.Contains(c.Evidence, "outside the configured roots") || !strings.Contains(c.Evidence, `".." segment`) {
		t.Errorf("evidence %q", c.Evidence)
	}
}

func TestSnapshotNoFinder(t *testing.T) {
	// A store without snapshots: SOURCE_GONE as before, saying so.
	f := newFixture(t, nil)
	f.r.stores[srcNN] = memHexFS{f.src}
	tk := task("f", "0a0b0c0d", cmDir)
	c := f.e.Copy(context.Background(), tk)
	if c.Status != schemas.StatusSourceGone || !strings.Contains(c.Evidence, "snapshots: the source's store keeps none to look in") {
		t.Fatalf("completion %+v", c)
	}
	if hasCall(f.src.callLog(), "snapshots") {
		t.Fatal("snapshots looked in")
	}
}

func TestSnapshotListingErrors(t *testing.T) {
	data := randomBytes(100)
	// Transient: the attempt is made again.
	f := newFixture(t, nil)
	tk := task("f", crcHex(data), "")
	snap := snapPath(tk, "s1")
	f.src.put(snap, data)
	f.src.snaps[tk.SourceURI] = []string{snap}
	f.src.fault("snapshots", syscall.ECONNRESET)
	c := f.e.Copy(context.Background(), tk)
	if c.Status != schemas.StatusCopied || c.Attempts != 2 || c.CopiedFrom != snap {
		t.Fatalf("transient: completion %+v", c)
	}
	// Permanent: SOURCE_GONE, the error in the evidence.
	f = newFixture(t, nil)
	f.src.put(snap, data)
	f.src.snaps[tk.SourceURI] = []string{snap}
	f.src.fault("snapshots", &webhdfs.RemoteError{Op: "GETSNAPSHOTLIST", Path: "/warehouse", Status: 400,
		Exception: "IllegalArgumentException", Message: "No enum constant GETSNAPSHOTLIST"})
	c = f.e.Copy(context.Background(), tk)
	if c.Status != schemas.StatusSourceGone || c.Attempts != 1 || !strings.Contains(c.Evidence, "snapshots: could not be listed") ||
		!strings.Contains(c.Evidence, "No enum constant") {
		t.Fatalf("permanent: completion %+v", c)
	}
}

func TestSourceGoneTargetAlreadyHasIt(t *testing.T) {
	// Redelivered after the source was dropped: the target holds the
	// event's bytes already.
	f := newFixture(t, nil)
	data := randomBytes(100)
	tk := task("f", crcHex(data), cmDir)
	f.dr.put(tk.TargetURI, data)
	c := f.e.Copy(context.Background(), tk)
	if c.Status != schemas.StatusSkippedIdentical || c.Verification == "" || !strings.HasPrefix(c.Verification, "crc32c:event+target") {
		t.Fatalf("completion %+v", c)
	}
}

func TestConfinement(t *testing.T) {
	good := task("f", "", "")
	for _, tc := range []struct {
		name, source, target, want string
	}{
		{"source on another host", "hdfs://other:8020/warehouse/f", good.TargetURI, "hdfs://other:8020/warehouse/f"},
		{"source on another scheme", "s3://src:8020/warehouse/f", good.TargetURI, "s3://src:8020/warehouse/f"},
		{"source outside the roots", srcNN + "/etc/passwd", good.TargetURI, srcNN + "/etc/passwd"},
		{"source sibling of a root", srcNN + "/warehouse2/f", good.TargetURI, srcNN + "/warehouse2/f"},
		{"source dot-dot", srcNN + "/warehouse/../etc/passwd", good.TargetURI, srcNN + "/warehouse/../etc/passwd"},
		{"source relative", "warehouse/f", good.TargetURI, "warehouse/f"},
		{"source local path", "/warehouse/f", good.TargetURI, "/warehouse/f"},
		{"source empty", "", good.TargetURI, "source"},
		{"source with a query", srcNN + "/warehouse/f?x=1", good.TargetURI, srcNN + "/warehouse/f?x=1"},
		{"target on another host", good.SourceURI, "hdfs://other:8020/warehouse/f", "hdfs://other:8020/warehouse/f"},
		{"target outside the roots", good.SourceURI, drNN + "/elsewhere/f", drNN + "/elsewhere/f"},
		{"target dot-dot", good.SourceURI, drNN + "/warehouse/a/../../x", drNN + "/warehouse/a/../../x"},
		{"target relative", good.SourceURI, "x/f", "x/f"},
		{"target is the source cluster", good.SourceURI, srcNN + "/warehouse/f", srcNN + "/warehouse/f"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			f.src.put(good.SourceURI, []byte("x"))
			tk := good
			tk.SourceURI, tk.TargetURI = tc.source, tc.target
			c := f.e.Copy(context.Background(), tk)
			if c.Status != schemas.StatusFailed || c.Attempts != 0 || !strings.Contains(c.Error, tc.want) || !strings.Contains(c.Error, "refused") {
				t.Fatalf("completion %+v; want FAILED naming %q", c, tc.want)
			}
			if len(f.r.splits) != 0 || len(f.src.callLog()) != 0 || len(f.dr.callLog()) != 0 {
				t.Fatalf("stores were asked: splits %v, source %v, target %v", f.r.splits, f.src.callLog(), f.dr.callLog())
			}
		})
	}
}

// TestProdCopydTargetMapped: with the path mapping given, a task's target
// must be its source's DR path (or the names the tailer gives a
// compaction's files there); another file under the target roots is
// refused before any store is asked.
func TestProdCopydTargetMapped(t *testing.T) {
	mapPath := func(src string) (string, error) {
		if !strings.HasPrefix(src, srcNN+"/") {
			return "", fmt.Errorf("%s: under no mapping", src)
		}
		return drNN + strings.TrimPrefix(src, srcNN), nil
	}
	base := "base_0000005_v0000123"
	for _, tc := range []struct {
		name, source, target, subdir string
		ok                           bool
	}{
		{"the mapping", "/warehouse/sales.db/t/f", "/warehouse/sales.db/t/f", "", true},
		{"the mapping, spelled otherwise", "/warehouse/sales.db/t/f", "/warehouse//sales.db/t/f", "", true},
		{"a compaction's staging name", "/warehouse/sales.db/t/" + base + "/bucket_0", "/warehouse/sales.db/t/" + acid.StagingName(base) + "/bucket_0", base, true},
		{"a compactor's directory as DR names it", "/warehouse/sales.db/t/" + base + "/bucket_0", "/warehouse/sales.db/t/" + acid.ReplicaName(base) + "/bucket_0", "", true},
		{"read from an HDFS snapshot", "/warehouse/sales.db/t/.snapshot/hivedr-b1/f", "/warehouse/sales.db/t/f", "", true},
		{"another table's file", "/warehouse/sales.db/t/f", "/warehouse/sales.db/other/f", "", false},
		{"a snapshot's path as the target", "/warehouse/sales.db/t/.snapshot/hivedr-b1/f", "/warehouse/sales.db/t/.snapshot/hivedr-b1/f", "", false},
		{"another name", "/warehouse/sales.db/t/f", "/warehouse/sales.db/t/g", "", false},
		{"the staging name of a directory the task is not in", "/warehouse/sales.db/t/f", "/warehouse/sales.db/" + acid.StagingName("t") + "/f", "x", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(c *EngineConfig) { c.MapPath = mapPath })
			data := []byte("x")
			tk := task("f", crcHex(data), "")
			tk.SourceURI, tk.TargetURI, tk.Subdir = srcNN+tc.source, drNN+tc.target, tc.subdir
			f.src.put(tk.SourceURI, data)
			c := f.e.Copy(context.Background(), tk)
			if tc.ok {
				if c.Status != schemas.StatusCopied {
					t.Fatalf("completion %+v, want COPIED", c)
				}
				return
			}
			if c.Status != schemas.StatusFailed || c.Attempts != 0 || !strings.Contains(c.Error, "not the DR path of source "+tk.SourceURI) {
				t.Fatalf("completion %+v; want FAILED naming the source and its mapping", c)
			}
			if len(f.src.callLog()) != 0 || len(f.dr.callLog()) != 0 {
				t.Fatalf("stores were asked: source %v, target %v", f.src.callLog(), f.dr.callLog())
			}
		})
	}
}

func TestCMRootOutsideRoots(t *testing.T) {
	f := newFixture(t, func(c *EngineConfig) { c.CMRoots = nil })
	tk := task("f", "0a0b0c0d", cmDir)
	c := f.e.Copy(context.Background(), tk)
	if c.Status != schemas.StatusFailed || c.Attempts != 1 || !strings.Contains(c.Error, cmDir+"/f_0a0b0c0d") || !strings.Contains(c.Error, "outside") {
		t.Fatalf("completion %+v", c)
	}
	if hasCall(f.src.callLog(), "stat "+cmDir) {
		t.Error("the change-management copy outside the roots was looked at")
	}
}

func TestTransientThenSuccess(t *testing.T) {
	for _, tc := range []struct {
		op  string
		err error
	}{
		{"open", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}},
		{"read", fmt.Errorf("read block: %w", syscall.ECONNRESET)},
		{"stat", context.DeadlineExceeded},
		{"create", errors.New("webhdfs: 503 Service Unavailable")},
	} {
		t.Run(tc.op, func(t *testing.T) {
			var logged bytes.Buffer
			f := newFixture(t, func(c *EngineConfig) {
				c.InitialBackoff = time.Second
				c.Logger = slog.New(slog.NewTextHandler(&logged, nil))
			})
			data := randomBytes(10000)
			tk := task("f", "", "")
			f.src.put(tk.SourceURI, data)
			if tc.op == "create" {
				f.dr.fault(tc.op, tc.err)
			} else {
				f.src.fault(tc.op, tc.err)
			}
			c := f.e.Copy(context.Background(), tk)
			if c.Status != schemas.StatusCopied || c.Attempts != 2 {
				t.Fatalf("completion %+v", c)
			}
			if f.clock.slept < 500*time.Millisecond || f.clock.slept > time.Second {
				t.Errorf("backed off %v; want 0.5-1 s", f.clock.slept)
			}
			if got, _ := f.dr.get(tk.TargetURI); !bytes.Equal(got, data) {
				t.Error("target bytes")
			}
			if v := testutil.ToFloat64(f.m.retries); v != 1 {
				t.Errorf("retries metric %v", v)
			}
			// The retry says why, naming the task, the files and the error.
			line := logged.String()
			for _, want := range []string{"copy attempt failed; retrying", "task=" + tk.TaskID, tk.SourceURI, "attempt=1", tc.err.Error()} {
				if !strings.Contains(line, want) {
					t.Errorf("retry log %q lacks %q", line, want)
				}
			}
			if len(f.dr.staged) != 0 {
				t.Errorf("staging left: %v", f.dr.staged)
			}
		})
	}
}

func TestPermanentErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"permission", fmt.Errorf("open %s: %w", srcNN+"/warehouse/sales.db/t/f", os.ErrPermission)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			tk := task("f", "", "")
			f.src.put(tk.SourceURI, []byte("abc"))
			f.src.fault("open", tc.err)
			c := f.e.Copy(context.Background(), tk)
			if c.Status != schemas.StatusFailed || c.Attempts != 1 || !strings.Contains(c.Error, tc.err.Error()) {
				t.Fatalf("completion %+v", c)
			}
		})
	}
	// A directory where the source should be.
	f := newFixture(t, nil)
	tk := task("d", "", "")
	f.src.put(tk.SourceURI+"/inner", []byte("x"))
	if c := f.e.Copy(context.Background(), tk); c.Status != schemas.StatusFailed || c.Attempts != 1 || !strings.Contains(c.Error, "directory") {
		t.Fatalf("completion %+v", c)
	}
	// Transient errors that never stop: all attempts made.
	f = newFixture(t, nil)
	tk = task("f", "", "")
	f.src.put(tk.SourceURI, []byte("abc"))
	f.src.fault("open", syscall.ECONNRESET, syscall.ECONNRESET, syscall.ECONNRESET, syscall.ECONNRESET)
	if c := f.e.Copy(context.Background(), tk); c.Status != schemas.StatusFailed || c.Attempts != 4 || !strings.Contains(c.Error, "after 4 attempts") {
		t.Fatalf("completion %+v", c)
	}
}

// TestSourceGoneMidCopy: a source file there when the attempt looked and
// gone when it opened it (dropped, overwritten, cleaned under the copy)
// is looked for again: the next attempt finds it nowhere and completes
// SOURCE_GONE, not FAILED; one whose open only said so (the file still
// there) is copied by the next attempt.
func TestSourceGoneMidCopy(t *testing.T) {
	f := newFixture(t, nil)
	tk := task("f", "", "")
	f.src.put(tk.SourceURI, []byte("abc"))
	f.src.goneAt["open"] = tk.SourceURI
	c := f.e.Copy(context.Background(), tk)
	if c.Status != schemas.StatusSourceGone || c.Attempts != 2 || c.Error != "" {
		t.Fatalf("removed between look and open: completion %+v, want SOURCE_GONE at the second attempt", c)
	}
	if _, ok := f.dr.get(tk.TargetURI); ok || len(f.dr.staged) != 0 {
		t.Errorf("DR holds %s or staging %v after SOURCE_GONE", tk.TargetURI, f.dr.staged)
	}

	f = newFixture(t, nil)
	f.src.put(tk.SourceURI, []byte("abc"))
	f.src.fault("open", fmt.Errorf("open %s: %w", tk.SourceURI, fs.ErrNotExist))
	c = f.e.Copy(context.Background(), tk)
	if c.Status != schemas.StatusCopied || c.Attempts != 2 {
		t.Fatalf("open said not found, file still there: completion %+v, want COPIED at the second attempt", c)
	}
	if b, _ := f.dr.get(tk.TargetURI); string(b) != "abc" {
		t.Errorf("DR holds %q, want abc", b)
	}
}

func TestRetryable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{syscall.ECONNRESET, true},
		{&net.OpError{Op: "read", Err: syscall.ETIMEDOUT}, true},
		{errors.New("something odd"), true},
		{&mismatchError{"x"}, true},
		{&fs.ChecksumError{Location: "/x"}, true},
		{fmt.Errorf("x: %w", fs.ErrNotExist), false},
		{&vanishedError{fmt.Errorf("x: %w", fs.ErrNotExist)}, true},
		{fmt.Errorf("x: %w", os.ErrPermission), false},
		{permanent(errors.New("refused")), false},
		{context.Canceled, false},
		{httpErr(503), true},
		{httpErr(429), true},
		{httpErr(403), false},
		{httpErr(404), false},
	} {
		if got := retryable(tc.err); got != tc.want {
			t.Errorf("retryable(%v) = %v", tc.err, got)
		}
	}
}

type httpErr int

func (h httpErr) Error() string       { return fmt.Sprintf("HTTP %d", int(h)) }
func (h httpErr) HTTPStatusCode() int { return int(h) }

func TestBackoff(t *testing.T) {
	for attempt, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 10: 30 * time.Second} {
		for range 50 {
			d := backoff(attempt, time.Second, 30*time.Second)
			if d < want/2 || d > want {
				t.Fatalf("backoff(%d) = %v, want in [%v, %v]", attempt, d, want/2, want)
			}
		}
	}
}

func TestThrottledCopyRate(t *testing.T) {
	const rate = 256 << 10
	f := newFixture(t, func(c *EngineConfig) { c.BytesPerSecond = rate })
	data := randomBytes(2 << 20)
	tk := task("f", "", "")
	f.src.put(tk.SourceURI, data)
	c := f.e.Copy(context.Background(), tk)
	if c.Status != schemas.StatusCopied {
		t.Fatalf("completion %+v", c)
	}
	secs := c.Finished.Sub(c.Started).Seconds()
	want := float64(len(data)) / rate
	if got := float64(len(data)) / secs; got > rate*1.1 || got < rate*0.9 {
		t.Fatalf("copied at %.0f B/s in %.2f s (want %.2f s); limit %d B/s", got, secs, want, rate)
	}
	if w := testutil.ToFloat64(f.m.throttleWait); w < want*0.8 {
		t.Errorf("throttle wait metric %v s", w)
	}
}

func TestStagingLog(t *testing.T) {
	log := &stagingLog{}
	f := newFixture(t, func(c *EngineConfig) { c.Staging = log; c.Retries = 0 })
	tk := task("f", "", "")
	f.src.put(tk.SourceURI, []byte("abc"))
	if c := f.e.Copy(context.Background(), tk); c.Status != schemas.StatusCopied {
		t.Fatalf("completion %+v", c)
	}
	f.src.put(task("f2", "", "").SourceURI, []byte("abc"))
	f.dr.fault("write", syscall.EIO)
	if c := f.e.Copy(context.Background(), task("f2", "", "")); c.Status != schemas.StatusFailed {
		t.Fatalf("completion %+v", c)
	}
	want := []string{
		"begin 7-f " + tk.TargetURI + " " + tk.TargetURI + ".staging-1",
		"end 7-f " + tk.TargetURI + " " + tk.TargetURI + ".staging-1",
		"begin 7-f2 " + drNN + "/warehouse/sales.db/t/f2 " + drNN + "/warehouse/sales.db/t/f2.staging-2",
		"end 7-f2 " + drNN + "/warehouse/sales.db/t/f2 " + drNN + "/warehouse/sales.db/t/f2.staging-2",
	}
	if fmt.Sprint(log.events) != fmt.Sprint(want) {
		t.Fatalf("staging log\n%s\nwant\n%s", strings.Join(log.events, "\n"), strings.Join(want, "\n"))
	}
}

type stagingLog struct{ events []string }

func (l *stagingLog) Begin(ctx context.Context, id, loc, s string) error {
	l.events = append(l.events, "begin "+id+" "+loc+" "+s)
	return nil
}

func (l *stagingLog) End(ctx context.Context, id, loc, s string) error {
	l.events = append(l.events, "end "+id+" "+loc+" "+s)
	return nil
}

func (l *stagingLog) Pending() ([]state.Staging, error) { return nil, nil }

func TestInterrupted(t *testing.T) {
	f := newFixture(t, nil)
	tk := task("f", "", "")
	f.src.put(tk.SourceURI, []byte("abc"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f.src.fault("stat", syscall.ECONNRESET)
	c := f.e.Copy(ctx, tk)
	if c.Status != schemas.StatusFailed || c.Attempts != 1 || !strings.Contains(c.Error, "interrupted") {
		t.Fatalf("completion %+v", c)
	}
}

type panicResolver struct{}

func (panicResolver) Split(string) (fs.FS, string, error) { panic("boom") }

func TestNeverPanics(t *testing.T) {
	e, err := NewEngine(EngineConfig{SourceRoots: []string{"/a"}, TargetRoots: []string{"/b"}}, panicResolver{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := e.Copy(context.Background(), schemas.CopyTask{TaskID: "x", SourceURI: "/a/f", TargetURI: "/b/f"})
	if c.Status != schemas.StatusFailed || !strings.Contains(c.Error, "boom") || c.Finished.IsZero() {
		t.Fatalf("completion %+v", c)
	}
}

func TestNewEngineChecks(t *testing.T) {
	r := &memResolver{}
	for _, cfg := range []EngineConfig{
		{TargetRoots: []string{"/b"}},
		{SourceRoots: []string{"/a"}},
		{SourceRoots: []string{"a"}, TargetRoots: []string{"/b"}},
		{SourceRoots: []string{"/a/../b"}, TargetRoots: []string{"/b"}},
		{SourceRoots: []string{"/a"}, TargetRoots: []string{"/b"}, Retries: -1},
		{SourceRoots: []string{"/a"}, TargetRoots: []string{"/b"}, BytesPerSecond: -1},
	} {
		if _, err := NewEngine(cfg, r, nil); err == nil {
			t.Errorf("NewEngine(%+v) accepted", cfg)
		}
	}
	if _, err := NewEngine(EngineConfig{SourceRoots: []string{"/a"}, TargetRoots: []string{"/b"}}, nil, nil); err == nil {
		t.Error("NewEngine without a resolver accepted")
	}
}

func TestMetricsRegister(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	if err := NewMetrics().Register(reg); err == nil {
		t.Fatal("registered twice")
	}
}

// localResolver serves local paths with the fs package's Local.
type localResolver struct{ l fs.FS }

func (r localResolver) Split(loc string) (fs.FS, string, error) { return r.l, loc, nil }

func TestLocalFS(t *testing.T) {
	dir := t.TempDir()
	src, dst, outside := filepath.Join(dir, "src"), filepath.Join(dir, "dst"), filepath.Join(dir, "outside")
	for _, d := range []string{src, dst, outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	e, err := NewEngine(EngineConfig{SourceRoots: []string{src}, TargetRoots: []string{"file://" + dst}, Retries: 1},
		localResolver{fs.NewLocal()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, n := range []int{0, 1, 1<<20 + 5} {
		data := randomBytes(n)
		name := fmt.Sprintf("f%d", n)
		if err := os.WriteFile(filepath.Join(src, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		tk := schemas.CopyTask{TaskID: name, SourceURI: "file://" + filepath.Join(src, name), TargetURI: filepath.Join(dst, "t", name)}
		c := e.Copy(ctx, tk)
		if c.Status != schemas.StatusCopied || c.Length != int64(n) || *c.CRC32C != crcOf(data) {
			t.Fatalf("%d bytes: %+v", n, c)
		}
		if got, err := os.ReadFile(filepath.Join(dst, "t", name)); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%d bytes: target %d bytes, %v", n, len(got), err)
		}
		if c := e.Copy(ctx, tk); c.Status != schemas.StatusSkippedIdentical {
			t.Fatalf("%d bytes again: %+v", n, c)
		}
	}
	// A symbolic link inside the root pointing outside it is not followed.
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	c := e.Copy(ctx, schemas.CopyTask{TaskID: "link", SourceURI: filepath.Join(src, "link"), TargetURI: filepath.Join(dst, "link")})
	if c.Status != schemas.StatusFailed || !strings.Contains(c.Error, "symbolic link") {
		t.Fatalf("symlink: %+v", c)
	}
	if _, err := os.Lstat(filepath.Join(dst, "link")); err == nil {
		t.Fatal("the symlink's target was copied")
	}
	entries, _ := os.ReadDir(filepath.Join(dst, "t"))
	for _, en := range entries {
		if fs.IsStagingName(en.Name()) {
			t.Errorf("staging file left: %s", en.Name())
		}
	}
}

// newSplitFixture is newFixture with a DR store that takes ranges (units
// of unit bytes) and a split size.
func newSplitFixture(t *testing.T, splitSize, unit int64, mod func(*EngineConfig)) *fixture {
	t.Helper()
	f := newFixture(t, func(c *EngineConfig) {
		c.SplitSize = splitSize
		if mod != nil {
			mod(c)
		}
	})
	f.r.stores[drNN] = memSplitFS{memFS: f.dr, unit: unit}
	return f
}

func countCalls(calls []string, prefix string) int {
	n := 0
	for _, c := range calls {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

func TestSplitCopy(t *testing.T) {
	for _, tc := range []struct {
		name          string
		size          int
		split, unit   int64
		workers       int
		wantRanges    int
		wantOpenCalls int
	}{
		{"even", 4 << 20, 1 << 20, 256 << 10, 0, 4, 4},
		{"ragged", 5<<20 + 17, 1 << 20, 256 << 10, 2, 5, 5}, // the last 17 bytes join the last range
		{"ragged-large-rest", 5<<20 + 300<<10, 1 << 20, 256 << 10, 2, 6, 6},
		{"units-larger-than-split", 10<<20 + 1, 1 << 20, 4 << 20, 3, 3, 3},
		{"one-range", 1 << 20, 1 << 20, 256 << 10, 0, 0, 1}, // not larger than the split size: one stream
		{"off", 5 << 20, 0, 256 << 10, 0, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := &stagingLog{}
			f := newSplitFixture(t, tc.split, tc.unit, func(c *EngineConfig) { c.Staging = log; c.SplitWorkers = tc.workers })
			data := randomBytes(tc.size)
			tk := task("f", crcHex(data), "")
			f.src.put(tk.SourceURI, data)
			c := f.e.Copy(context.Background(), tk)
			if c.Status != schemas.StatusCopied || c.Length != int64(len(data)) || c.CRC32C == nil || *c.CRC32C != crcOf(data) || c.Attempts != 1 {
				t.Fatalf("completion %+v", c)
			}
			if got, _ := f.dr.get(tk.TargetURI); !bytes.Equal(got, data) {
				t.Fatal("target bytes differ")
			}
			calls := f.dr.callLog()
			if n := countCalls(calls, "writerange "+tk.TargetURI); n != tc.wantRanges {
				t.Errorf("%d ranges written, want %d: %v", n, tc.wantRanges, calls)
			}
			if n := countCalls(f.src.callLog(), "open "+tk.SourceURI); n != tc.wantOpenCalls {
				t.Errorf("source opened %d times, want %d", n, tc.wantOpenCalls)
			}
			split := strings.Contains(c.Verification, fmt.Sprintf("copied as %d ranges, up to ", tc.wantRanges))
			if split != (tc.wantRanges > 0) || !strings.HasPrefix(c.Verification, "crc32c:source+event+target") {
				t.Errorf("verification %q", c.Verification)
			}
			if len(f.dr.staged) != 0 {
				t.Errorf("staging left: %v", f.dr.staged)
			}
			// Every range's staging was recorded before the write and
			// cleared after it.
			begins, ends := 0, 0
			for _, ev := range log.events {
				switch {
				case strings.HasPrefix(ev, "begin "):
					begins++
				case strings.HasPrefix(ev, "end "):
					ends++
				}
			}
			if want := max(tc.wantRanges, 1); begins != want || ends != want {
				t.Errorf("staging log %v: want %d begins and ends", log.events, want)
			}
		})
	}
}

// TestSplitRangeFails: one range failing fails the attempt as a whole
// (the other ranges are cancelled, the write aborted, every staging
// cleared, nothing published), and the retry copies the file.
func TestSplitRangeFails(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(f *fixture)
	}{
		{"target-range", func(f *fixture) { f.dr.fault("writerange 2", syscall.ECONNRESET) }},
		{"source-read", func(f *fixture) { f.src.fault("read", syscall.ECONNRESET) }},
		{"source-open", func(f *fixture) { f.src.fault("open", syscall.ECONNRESET) }},
		{"join", func(f *fixture) { f.dr.fault("join", errors.New("webhdfs CONCAT: HTTP 503")) }},
		{"join-checksum", func(f *fixture) {
			f.dr.fault("join", &fs.ChecksumError{Location: "x", Want: 1, Got: 2, HasGot: true})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, retries := range []int{0, 1} {
				log := &stagingLog{}
				f := newSplitFixture(t, 1<<20, 256<<10, func(c *EngineConfig) { c.Staging = log; c.Retries = retries })
				data := randomBytes(5<<20 + 3)
				tk := task("f", "", "")
				f.src.put(tk.SourceURI, data)
				tc.fault(f)
				c := f.e.Copy(context.Background(), tk)
				if retries == 0 {
					if c.Status != schemas.StatusFailed || c.Attempts != 1 {
						t.Fatalf("completion %+v; want FAILED after one attempt", c)
					}
					if _, ok := f.dr.get(tk.TargetURI); ok {
						t.Error("a file was published by a failed split copy")
					}
					if !hasCall(f.dr.callLog(), "abort "+tk.TargetURI) {
						t.Error("the split write was not aborted")
					}
				} else {
					if c.Status != schemas.StatusCopied || c.Attempts != 2 || *c.CRC32C != crcOf(data) {
						t.Fatalf("completion %+v; want COPIED on the second attempt", c)
					}
					if got, _ := f.dr.get(tk.TargetURI); !bytes.Equal(got, data) {
						t.Fatal("target bytes differ")
					}
				}
				if len(f.dr.staged) != 0 {
					t.Errorf("staging left: %v", f.dr.staged)
				}
				open := map[string]int{}
				for _, ev := range log.events {
					kind, rest, _ := strings.Cut(ev, " ")
					if kind == "begin" {
						open[rest]++
					} else {
						open[rest]--
					}
				}
				for s, n := range open {
					if n != 0 {
						t.Errorf("staging %s begun but not ended (%d)", s, n)
					}
				}
				t.Logf("retries %d: %s %s", retries, c.Status, c.Error)
			}
		})
	}
}

// TestSplitUnsupportedFallsBack: a store that finds at the commit that it
// cannot join ranges (an HDFS NameNode refusing CONCAT) gets the file as
// one stream, in the same attempt.
func TestSplitUnsupportedFallsBack(t *testing.T) {
	f := newSplitFixture(t, 1<<20, 256<<10, func(c *EngineConfig) { c.Retries = 0 })
	data := randomBytes(3 << 20)
	tk := task("f", "", "")
	f.src.put(tk.SourceURI, data)
	f.dr.fault("join", fmt.Errorf("webhdfs CONCAT: %w", fs.ErrSplitUnsupported))
	c := f.e.Copy(context.Background(), tk)
	if c.Status != schemas.StatusCopied || c.Attempts != 1 || strings.Contains(c.Verification, "ranges") {
		t.Fatalf("completion %+v; want COPIED as one stream in one attempt", c)
	}
	if got, _ := f.dr.get(tk.TargetURI); !bytes.Equal(got, data) {
		t.Fatal("target bytes differ")
	}
	calls := f.dr.callLog()
	if !hasCall(calls, "abort "+tk.TargetURI) || !hasCall(calls, "create "+tk.TargetURI) {
		t.Errorf("want the split write aborted and a stream created: %v", calls)
	}
	if len(f.dr.staged) != 0 {
		t.Errorf("staging left: %v", f.dr.staged)
	}
}

// TestSplitSourceChanged: ranges whose combined CRC32C is not the source
// store's (the source rewritten under the copy) publish nothing.
func TestSplitSourceChanged(t *testing.T) {
	f := newSplitFixture(t, 1<<20, 256<<10, func(c *EngineConfig) { c.Retries = 0 })
	data := randomBytes(3 << 20)
	tk := task("f", "", "")
	f.src.put(tk.SourceURI, data)
	f.src.mu.Lock()
	f.src.files[tk.SourceURI][2<<20+5] ^= 1 // behind the store's checksum
	f.src.mu.Unlock()
	c := f.e.Copy(context.Background(), tk)
	if c.Status != schemas.StatusFailed || !strings.Contains(c.Error, "CRC32C mismatch") {
		t.Fatalf("completion %+v", c)
	}
	if _, ok := f.dr.get(tk.TargetURI); ok || len(f.dr.staged) != 0 {
		t.Errorf("published or left staging: %v", f.dr.staged)
	}
}

func TestExactReader(t *testing.T) {
	from := candidate{loc: "hdfs://src/f"}
	from.Size = 10
	for _, tc := range []struct {
		src  string
		want int64
		err  string
	}{
		{"abcde", 5, ""},
		{"abcdef", 5, "more than"},
		{"abcd", 5, "read 4 bytes"},
	} {
		h := crc32.New(castagnoli)
		x := &exactReader{r: strings.NewReader(tc.src), h: h, want: tc.want, from: from, rg: fs.Range{Off: 0, Len: tc.want}}
		b, err := io.ReadAll(x)
		var me *mismatchError
		switch {
		case tc.err == "" && (err != nil || string(b) != tc.src || h.Sum32() != crcOf([]byte(tc.src))):
			t.Errorf("%q: %q, %v", tc.src, b, err)
		case tc.err != "" && (!errors.As(err, &me) || !strings.Contains(err.Error(), tc.err) || int64(len(b)) > tc.want):
			t.Errorf("%q: %q, %v; want a mismatch saying %q", tc.src, b, err, tc.err)
		}
	}
}

func TestNewEngineSplitChecks(t *testing.T) {
	r := &memResolver{stores: map[string]fs.FS{}}
	base := EngineConfig{SourceRoots: []string{srcNN + "/w"}, TargetRoots: []string{drNN + "/w"}}
	for _, mod := range []func(*EngineConfig){
		func(c *EngineConfig) { c.SplitSize = -1 },
		func(c *EngineConfig) { c.SplitWorkers = -1 },
	} {
		cfg := base
		mod(&cfg)
		if _, err := NewEngine(cfg, r, nil); err == nil {
			t.Errorf("NewEngine(%+v) accepted", cfg)
		}
	}
	e, err := NewEngine(base, r, nil)
	if err != nil || e.cfg.SplitWorkers != config.DefaultSplitWorkers {
		t.Fatalf("defaults: %v %+v", err, e)
	}
}

// TestSplitAdapts: a split copy runs SplitWorkers ranges at once when the
// engine is otherwise idle, and one at a time (range after range, no
// streams added) when the engine already runs SplitWorkers streams.
func TestSplitAdapts(t *testing.T) {
	for _, busy := range []bool{false, true} {
		f := newSplitFixture(t, 1<<20, 256<<10, func(c *EngineConfig) { c.SplitWorkers = 3 })
		sfs := memSplitFS{memFS: f.dr, unit: 256 << 10, delay: 30 * time.Millisecond, active: new(atomic.Int32), maxActive: new(atomic.Int32)}
		f.r.stores[drNN] = sfs
		data := randomBytes(6 << 20)
		tk := task("f", "", "")
		f.src.put(tk.SourceURI, data)
		if busy {
			f.e.streams.Add(3) // three other copies streaming
		}
		c := f.e.Copy(context.Background(), tk)
		if c.Status != schemas.StatusCopied || *c.CRC32C != crcOf(data) {
			t.Fatalf("busy=%v: completion %+v", busy, c)
		}
		want := int32(3)
		if busy {
			want = 1
		}
		if got := sfs.maxActive.Load(); got != want || !strings.Contains(c.Verification, fmt.Sprintf("6 ranges, up to %d at a time", want)) {
			t.Errorf("busy=%v: %d ranges at once, verification %q; want %d", busy, got, c.Verification, want)
		}
		if busy {
			f.e.streams.Add(-3)
		}
		if n := f.e.streams.Load(); n != 0 {
			t.Errorf("busy=%v: %d streams counted after the copy", busy, n)
		}
	}
}
