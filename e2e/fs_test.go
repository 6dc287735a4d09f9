package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/testenv"
)

// fsStore is one store under TestFS, with the ways the test looks at it
// from outside the FS.
type fsStore struct {
	name string
	fs   fs.FS
	// root is the directory (or bucket prefix) the test writes under.
	root string
	// bigSizes are written besides the sizes every store gets.
	bigSizes []int
	// partSize is the S3 part size; a write of more starts a multipart
	// upload.
	partSize int
	// leftovers lists staging files, or multipart uploads, of loc still
	// in the store.
	leftovers func(t *testing.T, loc string) []string
	// extra holds store-specific subtests.
	extra map[string]func(t *testing.T)
}

// TestFS writes, reads, replaces and aborts files through each store of
// internal/fs on the real stack, and checks what each promises: nothing is
// visible before Commit; after it the size and the store's own CRC32C
// (COMPOSITE-CRC from the DataNodes, S3's full-object CRC32C) equal the
// bytes'; a replaced file shows its old content until Commit; Abort and
// Discard leave nothing behind; a Commit with the wrong CRC32C publishes
// nothing (on S3 the server itself refuses it).
func TestFS(t *testing.T) {
	env := testenv.Require(t)
	ctx := ctxFor(t, 10*time.Minute)
	run := uniq(t)

	stores := []fsStore{
		hdfsStore(t, env, testenv.Source, run),
		hdfsStore(t, env, testenv.DR, run),
		s3Store(t, ctx, env, run),
		localStore(t),
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Run("write", func(t *testing.T) { testFSWrite(t, ctx, st) })
			t.Run("replace", func(t *testing.T) { testFSReplace(t, ctx, st) })
			t.Run("abort", func(t *testing.T) { testFSAbort(t, ctx, st) })
			t.Run("discard", func(t *testing.T) { testFSDiscard(t, ctx, st) })
			t.Run("wrong-crc", func(t *testing.T) { testFSWrongCRC(t, ctx, st) })
			if _, ok := st.fs.(walker); ok {
				t.Run("walk", func(t *testing.T) { testFSWalk(t, ctx, st) })
			}
			if _, ok := st.fs.(fs.Splitter); ok {
				t.Run("split", func(t *testing.T) { testFSSplit(t, ctx, st) })
			}
			for name, f := range st.extra {
				t.Run(name, f)
			}
		})
	}
}

func hdfsStore(t *testing.T, env *testenv.Env, site testenv.Site, run string) fsStore {
	nn := env.Get(t, "HIVEDR_HDFS_"+string(site)+"_NAMENODE")
	h, err := fs.NewHDFS(fs.HDFSConfig{
		NameNodes: []string{nn},
		WebHDFS:   env.Get(t, "HIVEDR_HDFS_"+string(site)+"_HTTP"),
		User:      "hivedr",
		Concat:    true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	native := env.HDFS(t, site)
	dir := "/fstest/" + run
	t.Cleanup(func() { native.RemoveAll(dir) })
	return fsStore{
		name: "hdfs-" + strings.ToLower(string(site)),
		fs:   h,
		extra: map[string]func(t *testing.T){
			"split-blocks": func(t *testing.T) { testHDFSSplitBlocks(t, env, site, h, nn, dir) },
		},
		root:     "hdfs://" + nn + dir,
		bigSizes: []int{9<<20 + 3},
		leftovers: func(t *testing.T, loc string) []string {
			p := strings.TrimPrefix(loc, "hdfs://"+nn)
			infos, err := native.ReadDir(path.Dir(p))
			if err != nil {
				if errors.Is(err, os.ErrNotExist) {
					return nil
				}
				t.Fatalf("list %s: %v", path.Dir(p), err)
			}
			var left []string
			for _, fi := range infos {
				if fs.IsStagingName(fi.Name()) && strings.HasPrefix(fi.Name(), "."+path.Base(p)+".") {
					left = append(left, fi.Name())
				}
			}
			return left
		},
	}
}

func s3Store(t *testing.T, ctx context.Context, env *testenv.Env, run string) fsStore {
	const partSize = 8 << 20
	s, err := fs.NewS3(fs.S3Config{
		Endpoint:  env.Get(t, "HIVEDR_S3_ENDPOINT"),
		Region:    env.Get(t, "HIVEDR_S3_REGION"),
		AccessKey: env.Get(t, "HIVEDR_S3_ACCESS_KEY"),
		SecretKey: env.Get(t, "HIVEDR_S3_SECRET_KEY"),
		PathStyle: true,
		PartSize:  partSize,
	})
	if err != nil {
		t.Fatal(err)
	}
	client := env.S3(t)
	bucket := "fstest-" + run
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &bucket}); err != nil {
		t.Fatalf("create bucket %s: %v", bucket, err)
	}
	t.Cleanup(func() { emptyAndDeleteBucket(client, bucket) })
	root := "s3://" + bucket + "/fstest"
	return fsStore{
		extra: map[string]func(t *testing.T){
			"checksum-kinds": func(t *testing.T) { testS3ChecksumKinds(t, ctx, s, client, bucket, root) },
		},
		name:     "s3",
		fs:       s,
		root:     root,
		bigSizes: []int{20 << 20},
		partSize: partSize,
		leftovers: func(t *testing.T, loc string) []string {
			key := strings.TrimPrefix(loc, "s3://"+bucket+"/")
			out, err := client.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: &bucket, Prefix: &key})
			if err != nil {
				t.Fatalf("list multipart uploads of %s: %v", loc, err)
			}
			var left []string
			for _, u := range out.Uploads {
				if aws.ToString(u.Key) == key {
					left = append(left, aws.ToString(u.UploadId))
				}
			}
			return left
		},
	}
}

func emptyAndDeleteBucket(c *s3.Client, bucket string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if ups, err := c.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: &bucket}); err == nil {
		for _, u := range ups.Uploads {
			c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &bucket, Key: u.Key, UploadId: u.UploadId})
		}
	}
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: &bucket})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			break
		}
		for _, o := range page.Contents {
			c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: o.Key})
		}
	}
	c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: &bucket})
}

func localStore(t *testing.T) fsStore {
	dir := t.TempDir()
	return fsStore{
		name: "local",
		fs:   fs.NewLocal(),
		root: filepath.Join(dir, "fstest"),
		leftovers: func(t *testing.T, loc string) []string {
			es, err := os.ReadDir(filepath.Dir(loc))
			if err != nil {
				if errors.Is(err, os.ErrNotExist) {
					return nil
				}
				t.Fatal(err)
			}
			var left []string
			for _, e := range es {
				if fs.IsStagingName(e.Name()) && strings.HasPrefix(e.Name(), "."+filepath.Base(loc)+".") {
					left = append(left, e.Name())
				}
			}
			return left
		},
	}
}

// fsWrite writes data to loc in uneven chunks, computing its CRC32C as it
// goes, as copyd does while streaming, and returns the writer unfinished.
func fsWrite(t *testing.T, ctx context.Context, st fsStore, loc string, data []byte) (fs.Writer, uint32) {
	t.Helper()
	w, err := st.fs.Create(ctx, loc, int64(len(data)))
	if err != nil {
		t.Fatalf("Create %s: %v", loc, err)
	}
	h := crc32.New(castagnoli)
	for rest, chunk := data, 1; len(rest) > 0; chunk = chunk*3%(1<<20) + 1 {
		k := min(len(rest), chunk)
		n, err := w.Write(rest[:k])
		if err != nil || n != k {
			t.Fatalf("Write %s: %d of %d bytes, %v", loc, n, k, err)
		}
		h.Write(rest[:k])
		rest = rest[k:]
	}
	return w, h.Sum32()
}

func mustNotExist(t *testing.T, ctx context.Context, st fsStore, loc, when string) {
	t.Helper()
	if fi, err := st.fs.Stat(ctx, loc); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%s: Stat(%s) = %+v, %v; want ErrNotExist", when, loc, fi, err)
	}
}

func readRange(t *testing.T, ctx context.Context, st fsStore, loc string, off, n int64) []byte {
	t.Helper()
	r, err := st.fs.Open(ctx, loc, off, n)
	if err != nil {
		t.Fatalf("Open(%s, %d, %d): %v", loc, off, n, err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read %s [%d, +%d): %v", loc, off, n, err)
	}
	return b
}

// checkFile checks the size, the store's checksum and some of the bytes
// of loc against data.
func checkFile(t *testing.T, ctx context.Context, st fsStore, loc string, data []byte) {
	t.Helper()
	want := crc32.Checksum(data, castagnoli)
	fi, err := st.fs.Stat(ctx, loc)
	if err != nil {
		t.Fatalf("Stat %s: %v", loc, err)
	}
	if fi.Size != int64(len(data)) || fi.IsDir {
		t.Errorf("Stat %s = %+v, want a %d-byte file", loc, fi, len(data))
	}
	sum, ok, err := st.fs.Checksum(ctx, loc)
	if err != nil || !ok {
		t.Fatalf("Checksum %s = %+v, %v, %v", loc, sum, ok, err)
	}
	if sum.CRC32C != want {
		t.Errorf("Checksum %s = %08x (%s), want %08x", loc, sum.CRC32C, sum.Source, want)
	}
	size := int64(len(data))
	if size <= 1<<20 {
		if got := readRange(t, ctx, st, loc, 0, -1); !bytes.Equal(got, data) {
			t.Errorf("read %s: %d bytes differ from the %d written", loc, len(got), len(data))
		}
	}
	off, n := size/3, min(size-size/3, 1<<20+5)
	if got := readRange(t, ctx, st, loc, off, n); !bytes.Equal(got, data[off:off+n]) {
		t.Errorf("read %s [%d, +%d): %d bytes, not the ones written", loc, off, n, len(got))
	}
	if got := readRange(t, ctx, st, loc, size, -1); len(got) != 0 {
		t.Errorf("read %s from its end: %d bytes", loc, len(got))
	}
}

func testFSWrite(t *testing.T, ctx context.Context, st fsStore) {
	for _, size := range append([]int{0, 1, 3<<20 + 17}, st.bigSizes...) {
		loc := fmt.Sprintf("%s/write/d=1/f-%d", st.root, size)
		data := randomBytes(t, size)
		start := time.Now()
		w, crc := fsWrite(t, ctx, st, loc, data)
		mustNotExist(t, ctx, st, loc, "before Commit")
		if st.partSize > 0 && size > st.partSize && w.Staging() == "" {
			t.Errorf("%s: %d bytes written without a multipart upload", loc, size)
		}
		if err := w.Commit(ctx, crc); err != nil {
			t.Fatalf("Commit %s: %v", loc, err)
		}
		// HDFS and S3 check the published bytes themselves while committing;
		// a local filesystem does not.
		vs, vok := w.Verified()
		if wantOK := st.name != "local"; vok != wantOK || vok && vs.CRC32C != crc {
			t.Errorf("%s: Verified() = %+v, %v; want ok=%v with CRC32C %08x", loc, vs, vok, wantOK, crc)
		}
		t.Logf("%s: %d bytes in %v", loc, size, time.Since(start).Round(time.Millisecond))
		checkFile(t, ctx, st, loc, data)
		if left := st.leftovers(t, loc); len(left) > 0 {
			t.Errorf("%s: after Commit the store still holds %v", loc, left)
		}
		if err := w.Abort(ctx); err != nil {
			t.Errorf("Abort after Commit of %s: %v", loc, err)
		}
		checkFile(t, ctx, st, loc, data)
	}
	if _, err := st.fs.Open(ctx, st.root+"/write/missing", 0, -1); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open of a missing file = %v, want ErrNotExist", err)
	}
	if _, _, err := st.fs.Checksum(ctx, st.root+"/write/missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Checksum of a missing file = %v, want ErrNotExist", err)
	}
	loc := st.root + "/write/d=1/f-1"
	if err := st.fs.Remove(ctx, loc); err != nil {
		t.Fatalf("Remove %s: %v", loc, err)
	}
	mustNotExist(t, ctx, st, loc, "after Remove")
	if err := st.fs.Remove(ctx, loc); err != nil {
		t.Errorf("Remove of a removed file: %v", err)
	}
}

func testFSReplace(t *testing.T, ctx context.Context, st fsStore) {
	loc := st.root + "/replace/f"
	old := randomBytes(t, 1000)
	w, crc := fsWrite(t, ctx, st, loc, old)
	if err := w.Commit(ctx, crc); err != nil {
		t.Fatal(err)
	}
	sizes := []int{3<<20 + 17}
	if st.partSize > 0 {
		sizes = append(sizes, 2*st.partSize+1)
	}
	for _, size := range sizes {
		data := randomBytes(t, size)
		w, crc := fsWrite(t, ctx, st, loc, data)
		if got := readRange(t, ctx, st, loc, 0, -1); !bytes.Equal(got, old) {
			t.Fatalf("before Commit %s holds %d bytes, not its old content", loc, len(got))
		}
		if err := w.Commit(ctx, crc); err != nil {
			t.Fatalf("Commit over %s: %v", loc, err)
		}
		checkFile(t, ctx, st, loc, data)
		old = data
	}
}

func testFSAbort(t *testing.T, ctx context.Context, st fsStore) {
	size := 3<<20 + 17
	if st.partSize > 0 {
		size = 2*st.partSize + 3 // past two parts: the upload has started
	}
	for _, n := range []int{0, size} {
		loc := fmt.Sprintf("%s/abort/f-%d", st.root, n)
		w, _ := fsWrite(t, ctx, st, loc, randomBytes(t, n))
		if err := w.Abort(ctx); err != nil {
			t.Fatalf("Abort %s: %v", loc, err)
		}
		mustNotExist(t, ctx, st, loc, "after Abort")
		if left := st.leftovers(t, loc); len(left) > 0 {
			t.Errorf("after Abort of %s the store still holds %v", loc, left)
		}
		if err := w.Abort(ctx); err != nil {
			t.Errorf("second Abort of %s: %v", loc, err)
		}
		if err := w.Commit(ctx, 0); err == nil {
			t.Errorf("Commit of %s after Abort succeeded", loc)
		}
		mustNotExist(t, ctx, st, loc, "after Commit of an aborted write")
	}
}

// testFSDiscard leaves a write unfinished, as a crashed daemon would, and
// cleans it with Discard given only the path and the saved Staging value.
func testFSDiscard(t *testing.T, ctx context.Context, st fsStore) {
	size := 3<<20 + 17
	if st.partSize > 0 {
		size = st.partSize + 3
	}
	loc := st.root + "/discard/f"
	w, _ := fsWrite(t, ctx, st, loc, randomBytes(t, size))
	staging := w.Staging()
	if staging == "" {
		t.Fatalf("Staging of %s after %d bytes is empty", loc, size)
	}
	if left := st.leftovers(t, loc); len(left) != 1 {
		t.Fatalf("an unfinished write of %s leaves %v, want one leftover", loc, left)
	}
	if err := st.fs.Discard(ctx, loc, staging); err != nil {
		t.Fatalf("Discard(%s, %s): %v", loc, staging, err)
	}
	if left := st.leftovers(t, loc); len(left) > 0 {
		t.Errorf("after Discard of %s the store still holds %v", loc, left)
	}
	mustNotExist(t, ctx, st, loc, "after Discard")
	if err := st.fs.Discard(ctx, loc, staging); err != nil {
		t.Errorf("second Discard(%s, %s): %v", loc, staging, err)
	}

	// Discard of a write that was aborted.
	w2, _ := fsWrite(t, ctx, st, loc, randomBytes(t, size))
	staging2 := w2.Staging()
	if err := w2.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.fs.Discard(ctx, loc, staging2); err != nil {
		t.Errorf("Discard of an aborted write (%s): %v", staging2, err)
	}

	// Discard of a committed write's staging leaves the file alone.
	data := randomBytes(t, size)
	w3, crc := fsWrite(t, ctx, st, loc, data)
	staging3 := w3.Staging()
	if err := w3.Commit(ctx, crc); err != nil {
		t.Fatal(err)
	}
	if err := st.fs.Discard(ctx, loc, staging3); err != nil {
		t.Errorf("Discard of a committed write (%s): %v", staging3, err)
	}
	checkFile(t, ctx, st, loc, data)
}

// testFSWrongCRC commits with a CRC32C the bytes do not have: nothing is
// published. On S3 it is the server that refuses.
func testFSWrongCRC(t *testing.T, ctx context.Context, st fsStore) {
	sizes := []int{1, 3<<20 + 17}
	if st.partSize > 0 {
		sizes = append(sizes, 2*st.partSize+5)
	}
	for _, size := range sizes {
		loc := fmt.Sprintf("%s/wrong-crc/f-%d", st.root, size)
		w, crc := fsWrite(t, ctx, st, loc, randomBytes(t, size))
		err := w.Commit(ctx, crc^0x00100000)
		var ce *fs.ChecksumError
		if !errors.As(err, &ce) {
			t.Fatalf("Commit of %s with a wrong CRC32C = %v, want a ChecksumError", loc, err)
		}
		if st.partSize > 0 && (ce.HasGot || !strings.Contains(ce.Detail, "refused by S3")) {
			// The S3 writer never compares locally: the server is sent
			// the wrong value and must refuse it itself.
			t.Errorf("Commit of %s was not refused by the server: %v", loc, err)
		}
		t.Logf("refused as it should be: %v", err)
		mustNotExist(t, ctx, st, loc, "after a refused Commit")
		if err := w.Abort(ctx); err != nil {
			t.Fatalf("Abort after a refused Commit of %s: %v", loc, err)
		}
		if left := st.leftovers(t, loc); len(left) > 0 {
			t.Errorf("after Abort of %s the store still holds %v", loc, left)
		}
	}
}

// testS3ChecksumKinds checks that Checksum reports only a full-object
// CRC32C: an object written by another client with no CRC32C, or as a
// multipart upload with a COMPOSITE CRC32C ("<crc of part crcs>-<parts>",
// not the CRC32C of the bytes), has none to give.
func testS3ChecksumKinds(t *testing.T, ctx context.Context, f fs.FS, c *s3.Client, bucket, root string) {
	key := strings.TrimPrefix(root, "s3://"+bucket+"/") + "/kinds/"
	data := randomBytes(t, 6<<20)

	plain := key + "plain"
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{
		Bucket: &bucket, Key: &plain, Body: bytes.NewReader(data[:100]),
		ChecksumAlgorithm: s3types.ChecksumAlgorithmSha256,
	}); err != nil {
		t.Fatal(err)
	}
	if sum, ok, err := f.Checksum(ctx, "s3://"+bucket+"/"+plain); err != nil || ok {
		t.Errorf("Checksum of an object without CRC32C = %+v, %v, %v; want not ok", sum, ok, err)
	}

	composite := key + "composite"
	up, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket: &bucket, Key: &composite,
		ChecksumAlgorithm: s3types.ChecksumAlgorithmCrc32c, ChecksumType: s3types.ChecksumTypeComposite,
	})
	if err != nil {
		t.Fatal(err)
	}
	var parts []s3types.CompletedPart
	for i, b := range [][]byte{data[:5<<20], data[5<<20:]} {
		n := int32(i + 1)
		out, err := c.UploadPart(ctx, &s3.UploadPartInput{
			Bucket: &bucket, Key: &composite, UploadId: up.UploadId, PartNumber: &n,
			Body: bytes.NewReader(b), ChecksumAlgorithm: s3types.ChecksumAlgorithmCrc32c,
		})
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, s3types.CompletedPart{ETag: out.ETag, PartNumber: &n, ChecksumCRC32C: out.ChecksumCRC32C})
	}
	if _, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: &bucket, Key: &composite, UploadId: up.UploadId,
		MultipartUpload: &s3types.CompletedMultipartUpload{Parts: parts},
	}); err != nil {
		t.Fatal(err)
	}
	head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &bucket, Key: &composite, ChecksumMode: s3types.ChecksumModeEnabled})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("composite object: CRC32C %q, type %q", aws.ToString(head.ChecksumCRC32C), head.ChecksumType)
	if sum, ok, err := f.Checksum(ctx, "s3://"+bucket+"/"+composite); err != nil || ok {
		t.Errorf("Checksum of a COMPOSITE-CRC32C object = %+v, %v, %v; want not ok", sum, ok, err)
	}
	if fi, err := f.Stat(ctx, "s3://"+bucket+"/"+composite); err != nil || fi.Size != int64(len(data)) {
		t.Errorf("Stat = %+v, %v", fi, err)
	}
}

// splitSize is the split size TestFS's split writes use.
const splitSize = 8 << 20

// fsWriteSplit writes data to loc through the store's Splitter, all ranges
// at once, and returns the writer unfinished with the data's CRC32C. With
// skip >= 0, range skip is not written.
func fsWriteSplit(t *testing.T, ctx context.Context, st fsStore, loc string, data []byte, skip int) (fs.SplitWriter, uint32) {
	t.Helper()
	w, ok, err := st.fs.(fs.Splitter).CreateSplit(ctx, loc, int64(len(data)), splitSize)
	if err != nil || !ok {
		t.Fatalf("CreateSplit %s (%d bytes): %v, %v", loc, len(data), ok, err)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(w.Ranges()))
	for i, r := range w.Ranges() {
		if i == skip {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = w.WriteRange(ctx, i, bytes.NewReader(data[r.Off:r.Off+r.Len]))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("WriteRange %d of %s: %v", i, loc, err)
		}
	}
	return w, crc32.Checksum(data, castagnoli)
}

// testFSSplit writes files as ranges in parallel (fs.Splitter) and checks
// what a split write promises, as the other subtests do for Create: nothing
// visible before Commit, the whole file with the store's own CRC32C after
// it, no staging left after Commit, Abort or Discard, and a wrong CRC32C
// refused.
func testFSSplit(t *testing.T, ctx context.Context, st fsStore) {
	size := 5*splitSize + 12345
	data := randomBytes(t, size)

	loc := st.root + "/split/f"
	start := time.Now()
	w, crc := fsWriteSplit(t, ctx, st, loc, data, -1)
	if n := len(w.Ranges()); n < 5 {
		t.Errorf("%d bytes in ranges of %d: %d ranges", size, splitSize, n)
	}
	mustNotExist(t, ctx, st, loc, "before Commit")
	if left := st.leftovers(t, loc); st.name != "s3" && len(left) != len(w.Ranges()) {
		t.Errorf("before Commit %s has staging %v, want one per range (%d)", loc, left, len(w.Ranges()))
	}
	if err := w.Commit(ctx, crc); err != nil {
		t.Fatalf("Commit %s: %v", loc, err)
	}
	t.Logf("%s: %d bytes in %d ranges in %v", loc, size, len(w.Ranges()), time.Since(start).Round(time.Millisecond))
	if vs, ok := w.Verified(); !ok || vs.CRC32C != crc {
		t.Errorf("Verified() = %+v, %v; want %08x", vs, ok, crc)
	}
	checkFile(t, ctx, st, loc, data)
	if left := st.leftovers(t, loc); len(left) > 0 {
		t.Errorf("after Commit %s still has %v", loc, left)
	}
	if err := w.Abort(ctx); err != nil {
		t.Errorf("Abort after Commit: %v", err)
	}
	checkFile(t, ctx, st, loc, data)

	// The same size as one stream, for comparison.
	start = time.Now()
	sw, scrc := fsWrite(t, ctx, st, st.root+"/split/stream", data)
	if err := sw.Commit(ctx, scrc); err != nil {
		t.Fatal(err)
	}
	t.Logf("the same %d bytes as one stream in %v", size, time.Since(start).Round(time.Millisecond))

	// A range given too few or too many bytes is refused.
	w, _ = fsWriteSplit(t, ctx, st, st.root+"/split/short", data, 0)
	r0 := w.Ranges()[0]
	if err := w.WriteRange(ctx, 0, bytes.NewReader(data[:r0.Len-1])); err == nil {
		t.Error("a short range was accepted")
	}
	if err := w.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	w, _ = fsWriteSplit(t, ctx, st, st.root+"/split/long", data, 0)
	if err := w.WriteRange(ctx, 0, bytes.NewReader(data[:r0.Len+1])); err == nil {
		t.Error("a long range was accepted")
	}
	if err := w.Abort(ctx); err != nil {
		t.Fatal(err)
	}

	// Abort, with a range never written, and again after a failed Commit.
	loc = st.root + "/split/aborted"
	w, _ = fsWriteSplit(t, ctx, st, loc, data, 2)
	if err := w.Commit(ctx, crc); err == nil {
		t.Error("Commit with a range missing succeeded")
	}
	if err := w.Abort(ctx); err != nil {
		t.Fatalf("Abort %s: %v", loc, err)
	}
	mustNotExist(t, ctx, st, loc, "after Abort")
	if left := st.leftovers(t, loc); len(left) > 0 {
		t.Errorf("after Abort of %s the store still holds %v", loc, left)
	}

	// A wrong CRC32C publishes nothing.
	loc = st.root + "/split/wrong-crc"
	w, crc = fsWriteSplit(t, ctx, st, loc, data, -1)
	err := w.Commit(ctx, crc^1)
	var ce *fs.ChecksumError
	if !errors.As(err, &ce) {
		t.Fatalf("Commit of %s with a wrong CRC32C = %v, want a ChecksumError", loc, err)
	}
	t.Logf("refused as it should be: %v", err)
	mustNotExist(t, ctx, st, loc, "after a refused Commit")
	if err := w.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	if left := st.leftovers(t, loc); len(left) > 0 {
		t.Errorf("after Abort of %s the store still holds %v", loc, left)
	}

	// A crash mid-write: Discard of each recorded staging cleans up.
	loc = st.root + "/split/crashed"
	w, _ = fsWriteSplit(t, ctx, st, loc, data, 1)
	if left := st.leftovers(t, loc); len(left) == 0 {
		t.Fatalf("an unfinished split write of %s leaves nothing to clean", loc)
	}
	for _, s := range w.Stagings() {
		if err := st.fs.Discard(ctx, loc, s); err != nil {
			t.Fatalf("Discard(%s, %s): %v", loc, s, err)
		}
	}
	if left := st.leftovers(t, loc); len(left) > 0 {
		t.Errorf("after Discard of %s the store still holds %v", loc, left)
	}
	mustNotExist(t, ctx, st, loc, "after Discard")
}

// testHDFSSplitBlocks checks that a file written as ranges and joined
// with CONCAT is an ordinary HDFS file: every block but the last full.
func testHDFSSplitBlocks(t *testing.T, env *testenv.Env, site testenv.Site, h *fs.HDFS, nn, dir string) {
	ctx := ctxFor(t, 5*time.Minute)
	st := fsStore{fs: h}
	data := randomBytes(t, 3*splitSize+1)
	loc := "hdfs://" + nn + dir + "/split-blocks/f"
	w, crc := fsWriteSplit(t, ctx, st, loc, data, -1)
	if err := w.Commit(ctx, crc); err != nil {
		t.Fatal(err)
	}
	p := dir + "/split-blocks/f"
	fi, err := env.HDFS(t, site).Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	bs := int64(fi.Sys().(interface{ GetBlocksize() uint64 }).GetBlocksize())
	blocks, err := env.WebHDFS(t, site).GetFileBlockLocations(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	var off int64
	for i, b := range blocks {
		if b.Offset != off || (i < len(blocks)-1 && b.Length != bs) {
			t.Errorf("block %d of %s: offset %d length %d; want offset %d, length %d", i, p, b.Offset, b.Length, off, bs)
		}
		off += b.Length
	}
	if off != int64(len(data)) {
		t.Errorf("%s: blocks cover %d bytes, want %d", p, off, len(data))
	}
	t.Logf("%s: %d ranges joined into %d blocks of %d bytes", p, len(w.Ranges()), len(blocks), bs)
}

// testFSWalk: Walk lists every file under a directory, nested ones too,
// with its size, and nothing beside it; a missing directory is
// ErrNotExist. (The tailer lists external tables' directories with it.)
func testFSWalk(t *testing.T, ctx context.Context, st fsStore) {
	w := st.fs.(walker)
	want := map[string]int64{}
	for i, name := range []string{"walk/d/a", "walk/d/sub/b", "walk/d/sub/deeper/c", "walk/dx/not-under-d"} {
		loc := st.root + "/" + name
		data := randomBytes(t, 10*(i+1))
		wr, crc := fsWrite(t, ctx, st, loc, data)
		if err := wr.Commit(ctx, crc); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(name, "dx/") {
			want[loc] = int64(len(data))
		}
	}
	got := map[string]int64{}
	if err := w.Walk(ctx, st.root+"/walk/d", func(loc string, size int64) error { got[loc] = size; return nil }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Walk listed %v, want %v", got, want)
	}
	if err := w.Walk(ctx, st.root+"/walk/missing", func(string, int64) error { return nil }); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Walk of a missing directory = %v, want ErrNotExist", err)
	}
}

type walker interface {
	Walk(ctx context.Context, loc string, fn func(location string, size int64) error) error
}
