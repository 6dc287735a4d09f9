package e2e

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"hash/crc32"
	"testing"
	"time"

	"github.com/colinmarc/hdfs/v2"

	"github.com/hivedr/hivedr/internal/hdfscrc"
	"github.com/hivedr/hivedr/internal/testenv"
)

// hdfscrcSites are the two clusters of the local stack; their default
// block sizes differ (1 MiB on the source, 4 MiB on DR).
var hdfscrcSites = []testenv.Site{testenv.Source, testenv.DR}

// TestHDFSCompositeCRC writes the same files to both clusters and checks
// that hdfscrc's COMPOSITE-CRC32C of each copy is the CRC-32C of its bytes,
// whatever the block layout, while WebHDFS's MD5-of-MD5-of-CRC32C file
// checksum of a multi-block file differs between the clusters: that
// checksum depends on the block size, so it cannot verify a copy between
// them, and is why hivedr computes COMPOSITE-CRC32C itself.
func TestHDFSCompositeCRC(t *testing.T) {
	env := testenv.Require(t)
	ctx := ctxFor(t, 3*time.Minute)
	dir := "/hdfscrctest/" + uniq(t)
	files := []struct {
		name string
		size int
	}{
		{"empty", 0},
		{"one-byte", 1},
		{"one-mib", 1 << 20},
		{"three-mib-17", 3<<20 + 17},
		{"nine-mib", 9 << 20},
	}
	// Block counts per site, from the stack's block sizes.
	wantBlocks := map[string][2]int{
		"empty": {0, 0}, "one-byte": {1, 1}, "one-mib": {1, 1},
		"three-mib-17": {4, 1}, "nine-mib": {9, 3},
	}

	// The same bytes go to both clusters.
	data := make([][]byte, len(files))
	for i, f := range files {
		data[i] = randomBytes(t, f.size)
	}

	md5s := map[testenv.Site]map[string]string{}
	for si, site := range hdfscrcSites {
		fs := env.HDFS(t, site)
		web := env.WebHDFS(t, site)
		crcs := hdfscrc.New(env.Get(t, "HIVEDR_HDFS_"+string(site)+"_HTTP"), "hivedr", nil)
		md5s[site] = map[string]string{}
		if err := fs.MkdirAll(dir, 0o755); err != nil {
			t.Fatalf("%s: mkdir %s: %v", site, dir, err)
		}
		for i, f := range files {
			path := dir + "/" + f.name
			writeHDFSFile(t, fs, path, data[i])

			blocks, err := web.GetFileBlockLocations(ctx, path)
			if err != nil {
				t.Fatalf("%s: %v", site, err)
			}
			if want := wantBlocks[f.name][si]; len(blocks) != want {
				t.Errorf("%s: %s has %d blocks, want %d (block size of the stack changed?)", site, path, len(blocks), want)
			}

			start := time.Now()
			crc, n, err := crcs.FileCRC32C(ctx, path)
			if err != nil {
				t.Fatalf("%s: FileCRC32C: %v", site, err)
			}
			took := time.Since(start)
			want := crc32.Checksum(data[i], castagnoli)
			if crc != want || n != int64(f.size) {
				t.Errorf("%s: %s: FileCRC32C = %08x, length %d; CRC-32C of the bytes %08x, length %d", site, path, crc, n, want, f.size)
			}

			sum, err := web.GetFileChecksum(ctx, path)
			if err != nil {
				t.Fatalf("%s: %v", site, err)
			}
			md5s[site][f.name] = fmt.Sprintf("%s:%x", sum.Algorithm, sum.Bytes)
			t.Logf("%-3s %-13s %8d bytes %d blocks: composite CRC32C %08x (%v); WebHDFS %s",
				site, f.name, f.size, len(blocks), crc, took.Round(time.Microsecond), md5s[site][f.name])
		}
	}

	// A file still being written is refused, not checksummed half-way.
	fs := env.HDFS(t, testenv.Source)
	open := dir + "/open"
	w, err := fs.Create(open)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data[3]); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	crcs := hdfscrc.New(env.Get(t, "HIVEDR_HDFS_SRC_HTTP"), "hivedr", nil)
	if _, _, err := crcs.FileCRC32C(ctx, open); !errors.Is(err, hdfscrc.ErrUnderConstruction) {
		t.Errorf("FileCRC32C of a file being written: %v, want ErrUnderConstruction", err)
	} else {
		t.Logf("file being written: %v", err)
	}
	if err := w.Close(); err != nil && !errors.Is(err, hdfs.ErrReplicating) {
		t.Fatal(err)
	}

	// The byte-identical multi-block copies have different WebHDFS checksums.
	src, dr := md5s[testenv.Source]["nine-mib"], md5s[testenv.DR]["nine-mib"]
	if src == dr {
		t.Errorf("WebHDFS checksums of the 9 MiB file are equal on both clusters (%s); expected MD5-of-MD5 checksums that depend on the block size", src)
	}
}

// BenchmarkHDFSCompositeCRC measures FileCRC32C of a 9 MiB file on each
// cluster: 9 blocks on the source, 3 on DR.
func BenchmarkHDFSCompositeCRC(b *testing.B) {
	env := testenv.Require(b)
	data := make([]byte, 9<<20)
	if _, err := rand.Read(data); err != nil {
		b.Fatal(err)
	}
	want := crc32.Checksum(data, castagnoli)
	dir := fmt.Sprintf("/hdfscrcbench/%d", time.Now().UnixNano())
	for _, site := range hdfscrcSites {
		b.Run(string(site), func(b *testing.B) {
			fs := env.HDFS(b, site)
			if err := fs.MkdirAll(dir, 0o755); err != nil {
				b.Fatal(err)
			}
			path := dir + "/nine-mib"
			writeHDFSFile(b, fs, path, data)
			crcs := hdfscrc.New(env.Get(b, "HIVEDR_HDFS_"+string(site)+"_HTTP"), "hivedr", nil)
			ctx := context.Background()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				crc, _, err := crcs.FileCRC32C(ctx, path)
				if err != nil {
					b.Fatal(err)
				}
				if crc != want {
					b.Fatalf("FileCRC32C = %08x, want %08x", crc, want)
				}
			}
		})
	}
}

// writeHDFSFile creates path with the cluster's default block size and
// writes data to it. Like Hadoop's client, it retries Close while the
// NameNode has not yet seen the last block replicated.
func writeHDFSFile(tb testing.TB, fs *hdfs.Client, path string, data []byte) {
	tb.Helper()
	w, err := fs.Create(path)
	if err != nil {
		tb.Fatalf("create %s: %v", path, err)
	}
	if len(data) > 0 { // writing nothing would still allocate a block
		if _, err := w.Write(data); err != nil {
			tb.Fatalf("write %s: %v", path, err)
		}
	}
	poll(tb, 2*time.Minute, 20*time.Millisecond, "the NameNode to accept the close of "+path, func() bool {
		err := w.Close()
		if err != nil && !errors.Is(err, hdfs.ErrReplicating) {
			tb.Fatalf("close %s: %v", path, err)
		}
		return err == nil
	})
}
