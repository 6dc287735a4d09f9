package e2e

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/hivedr/hivedr/internal/testenv"
	"github.com/hivedr/hivedr/schemas"
)

// TestCopydSnapshotFallback checks the last resort of a source that moved
// on: a file overwritten after its event is copied from the snapshot that
// still holds the event's bytes (the older of two snapshots, the newer
// holding the new bytes), and a file whose only snapshot holds other bytes
// completes SOURCE_GONE with the evidence, nothing written.
func TestCopydSnapshotFallback(t *testing.T) {
	env := testenv.Require(t)
	s := serde(t, env)
	f := newCopyFixture(t, env, s)
	src := env.HDFS(t, testenv.Source)
	web := env.WebHDFS(t, testenv.Source)
	srcNN := "hdfs://" + env.Get(t, "HIVEDR_HDFS_SRC_NAMENODE")
	drNN := "hdfs://" + env.Get(t, "HIVEDR_HDFS_DR_NAMENODE")
	snapDir := f.dir + "/snap"
	overwritten, dropped := "snap/part/000000_0", "snap/part/000001_0"

	// The event's bytes and checksums, as the metastore logged them.
	orig := f.file(overwritten, 3<<20+11)
	origSum := hdfsChecksumHex(t, env, f.dir+"/"+overwritten)
	f.file(dropped, 1<<20+5)
	droppedSum := hdfsChecksumHex(t, env, f.dir+"/"+dropped)
	rewrite := func(name string, b []byte) {
		t.Helper()
		if err := src.Remove(f.dir + "/" + name); err != nil {
			t.Fatal(err)
		}
		if b != nil {
			testenv.WriteHDFS(t, src, f.dir+"/"+name, b)
		}
	}
	// dropped is rewritten before snapshot s1, so s1 holds other bytes.
	rewrite(dropped, randomBytes(t, 1<<20+5))
	if err := web.AllowSnapshot(ctxFor(t, time.Minute), snapDir); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"s1", "s2"} {
		t.Cleanup(func() { _ = web.DeleteSnapshot(ctxFor(t, time.Minute), snapDir, name) })
	}
	if _, err := web.CreateSnapshot(ctxFor(t, time.Minute), snapDir, "s1"); err != nil {
		t.Fatal(err)
	}
	// After the event: overwritten gets other bytes of the same length
	// (an INSERT OVERWRITE), dropped goes; s2 sees that.
	other := append([]byte(nil), orig...)
	other[len(other)/2] ^= 0x01
	rewrite(overwritten, other)
	rewrite(dropped, nil)
	if _, err := web.CreateSnapshot(ctxFor(t, time.Minute), snapDir, "s2"); err != nil {
		t.Fatal(err)
	}

	f.task("overwritten", f.srcURI(overwritten), drNN+f.dir+"/"+overwritten, origSum)
	f.task("dropped", f.srcURI(dropped), drNN+f.dir+"/"+dropped, droppedSum)
	f.publish()
	cfg := copydConf{prefix: f.prefix, instance: "s" + uniq(t)}.write(t, env)
	p := startHivedr(t, "copyd", "copyd", "-config", cfg)
	got := f.waitCompletions(p, 2*time.Minute)
	p.stop(t)

	wantFrom := srcNN + snapDir + "/.snapshot/s1/part/000000_0"
	newer := srcNN + snapDir + "/.snapshot/s2/part/000000_0"
	if cs := got[f.tasks[0].TaskID]; len(cs) != 1 {
		t.Errorf("overwritten: %d completions", len(cs))
	} else if c := cs[0]; c.Status != schemas.StatusCopied || c.CopiedFrom != wantFrom ||
		c.Length != int64(len(orig)) || c.CRC32C == nil || *c.CRC32C != crcOf(orig) {
		t.Errorf("overwritten: %+v; want COPIED from %s with crc %08x", c, wantFrom, crcOf(orig))
	} else {
		for _, w := range []string{f.srcURI(overwritten) + ": ", "snapshot copy " + newer + ": ", "not used",
			"snapshot copy " + wantFrom + ": "} {
			if !strings.Contains(c.Evidence, w) {
				t.Errorf("overwritten: evidence %q does not say %q", c.Evidence, w)
			}
		}
		t.Logf("overwritten: verification %q; evidence %q", c.Verification, c.Evidence)
	}
	crc, n, err := env.HDFSCRC(t, testenv.DR).FileCRC32C(ctxFor(t, time.Minute), f.dir+"/"+overwritten)
	if err != nil || n != int64(len(orig)) || crc != crcOf(orig) {
		t.Errorf("overwritten on DR: %d bytes crc %08x (%v); want the original %d bytes crc %08x",
			n, crc, err, len(orig), crcOf(orig))
	}
	if bytes.Equal(orig, other) || crcOf(orig) == crcOf(other) {
		t.Fatal("the overwrite did not change the bytes")
	}

	if cs := got[f.tasks[1].TaskID]; len(cs) != 1 {
		t.Errorf("dropped: %d completions", len(cs))
	} else if c := cs[0]; c.Status != schemas.StatusSourceGone || c.CopiedFrom != "" ||
		!strings.Contains(c.Evidence, "snapshot copy "+srcNN+snapDir+"/.snapshot/s1/part/000001_0: ") ||
		!strings.Contains(c.Evidence, "differs from the event checksum "+droppedSum) {
		t.Errorf("dropped: %+v; want SOURCE_GONE with the snapshot's evidence", c)
	} else {
		t.Logf("dropped: evidence %q", c.Evidence)
	}
	if _, err := env.HDFS(t, testenv.DR).Stat(f.dir + "/" + dropped); err == nil {
		t.Error("dropped reached the DR cluster")
	}
}
