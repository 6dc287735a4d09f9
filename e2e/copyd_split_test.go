package e2e

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/testenv"
	"github.com/hivedr/hivedr/schemas"
)

// splitConf is copydConf's YAML with range splitting on: split_size bytes,
// split_workers 3, and CONCAT allowed on the DR cluster.
func splitConf(t *testing.T, env *testenv.Env, c copydConf, splitSize int) string {
	t.Helper()
	b, err := os.ReadFile(c.write(t, env))
	if err != nil {
		t.Fatal(err)
	}
	y := string(b)
	dr := "webhdfs: " + env.Get(t, "HIVEDR_HDFS_DR_HTTP") + ", user: hivedr}"
	if !strings.Contains(y, "\ncopyd:\n") || strings.Count(y, dr) != 1 {
		t.Fatalf("copydConf's YAML changed shape; splitConf cannot add its keys:\n%s", y)
	}
	y = strings.Replace(y, "\ncopyd:\n", fmt.Sprintf("\ncopyd:\n  split_size: %d\n  split_workers: 3\n", splitSize), 1)
	y = strings.Replace(y, dr, strings.TrimSuffix(dr, "}")+", concat: true}", 1)
	return writeFile(t, "copyd-split.yaml", y)
}

// rangesRe finds, in a completion's verification, how many ranges the
// file was copied as.
var rangesRe = regexp.MustCompile(`copied as (\d+) ranges, up to (\d+) at a time`)

// TestCopydSplitsLargeFiles runs `hivedr copyd` with a split size of 8 MiB
// on a 40 MiB file (and a 3 MiB one, which stays one stream) from the
// source HDFS (1 MiB blocks) to the DR HDFS (4 MiB blocks, ranges joined
// with CONCAT) and to S3 (ranges as parallel parts of one multipart
// upload). The bytes must be equal end to end, the completions must say
// the large file went as ranges, the DR file must be made of whole 4 MiB
// blocks, and no part file or upload may be left. Then a daemon is killed
// with SIGKILL in the middle of a split copy, leaving part files, and its
// restart must clean every one of them up and finish the copy. The kill
// fires on observed progress (part files on DR, a random share of the
// bytes streamed) and must leave both copies unfinished.
func TestCopydSplitsLargeFiles(t *testing.T) {
	env := testenv.Require(t)
	s := serde(t, env)
	f := newCopyFixture(t, env, s)
	bucket := "splittest-" + uniq(t)
	ctx := ctxFor(t, 5*time.Minute)
	if _, err := env.S3(t).CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { emptyAndDeleteBucket(env.S3(t), bucket) })
	drNN := "hdfs://" + env.Get(t, "HIVEDR_HDFS_DR_NAMENODE")
	const splitSize = 8 << 20
	sizes := map[string]int{"big": 40<<20 + 12345, "small": 3 << 20}
	for name, n := range sizes {
		f.file(name, n)
		f.task(name+"-hdfs", f.srcURI(name), drNN+f.dir+"/"+name, "")
		f.task(name+"-s3", f.srcURI(name), "s3://"+bucket+f.dir+"/"+name, "")
	}
	f.publish()

	cfg := splitConf(t, env, copydConf{prefix: f.prefix, instance: "s" + uniq(t), bucket: bucket, anyTarget: true}, splitSize)
	p := startHivedr(t, "copyd", "copyd", "-config", cfg)
	got := f.waitCompletions(p, 3*time.Minute)
	p.stop(t)

	for _, task := range f.tasks {
		cs := got[task.TaskID]
		if len(cs) != 1 {
			t.Errorf("task %s has %d completions", task.TaskID, len(cs))
			continue
		}
		c := cs[0]
		name, kind, _ := strings.Cut(task.TaskID[strings.IndexByte(task.TaskID, '-')+1:], "-")
		want := f.data[name]
		if c.Status != schemas.StatusCopied || c.Length != int64(len(want)) || c.CRC32C == nil || *c.CRC32C != crcOf(want) {
			t.Errorf("%s: %+v; want COPIED %d bytes crc %08x", task.TaskID, c, len(want), crcOf(want))
			continue
		}
		m := rangesRe.FindStringSubmatch(c.Verification)
		switch {
		case name == "big" && m == nil:
			t.Errorf("%s: verification %q does not say the file went as ranges (is copyd.split_size passed to the engine?)", task.TaskID, c.Verification)
		case name == "big" && m[1] != "5":
			t.Errorf("%s: %s ranges; want 5 of 8 MiB", task.TaskID, m[1])
		case name == "small" && m != nil:
			t.Errorf("%s: a file below the split size went as ranges: %q", task.TaskID, c.Verification)
		}
		if !strings.HasPrefix(c.Verification, "crc32c:source+target") {
			t.Errorf("%s: verification %q", task.TaskID, c.Verification)
		}
		t.Logf("%s: %s in %v", task.TaskID, c.Verification, c.Finished.Sub(c.Started).Round(time.Millisecond))
		var gotCRC uint32
		var err error
		if kind == "hdfs" {
			gotCRC, _, err = env.HDFSCRC(t, testenv.DR).FileCRC32C(ctx, f.dir+"/"+name)
		} else {
			gotCRC, err = s3CRC(t, env, bucket, strings.TrimPrefix(f.dir, "/")+"/"+name)
		}
		if err != nil || gotCRC != crcOf(want) {
			t.Errorf("%s: target CRC32C %08x (%v), want %08x", task.TaskID, gotCRC, err, crcOf(want))
		}
	}
	// The joined file is an ordinary one: whole DR blocks but the last.
	blocks, err := env.WebHDFS(t, testenv.DR).GetFileBlockLocations(ctx, f.dir+"/big")
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range blocks[:len(blocks)-1] {
		if b.Length != 4<<20 {
			t.Errorf("DR block %d of big: %d bytes, want 4 MiB", i, b.Length)
		}
	}
	checkNoLeftovers(t, env, bucket, f.dir)

	// kill -9 in the middle of a split copy, then a restart.
	f2 := newCopyFixture(t, env, s) // its own topics; the source files are f's
	f2.task("kill", f.srcURI("big"), drNN+f.dir+"/killed/big", "")
	f2.task("kill-s3", f.srcURI("big"), "s3://"+bucket+f.dir+"/killed/big", "")
	f2.publish()
	// 2 x 40 MiB at 16 MiB/s. The kill fires once part files are on DR
	// and the daemon has streamed a random 8 to 32 MiB of the 80 (its
	// metrics): less than one file, so neither copy can have finished.
	addr := "127.0.0.1:" + itoa(int64(freePort(t)))
	kcfg := splitConf(t, env, copydConf{prefix: f2.prefix, instance: "k" + uniq(t), bucket: bucket, bytesPerSecond: 16 << 20, metricsAddr: addr, anyTarget: true}, splitSize)
	p = startHivedr(t, "copyd (to be killed)", "copyd", "-config", kcfg)
	at := 8<<20 + testRand(t).IntN(24<<20)
	var left []string
	poll(t, 2*time.Minute, 5*time.Millisecond, fmt.Sprintf("part files of the split copy on DR and %d bytes streamed", at), func() bool {
		if p.exited() {
			t.Fatalf("copyd exited on its own:\n%s", tail(p.out.String(), 40))
		}
		m, ok := scrape("http://" + addr + "/metrics")
		if !ok || m["hivedr_copyd_transferred_bytes_total"] < float64(at) || m["hivedr_copyd_tasks_in_flight"] < 1 {
			return false
		}
		left = stagingNames(t, env, f.dir+"/killed")
		return len(left) >= 2
	})
	p.kill9()
	left = stagingNames(t, env, f.dir+"/killed")
	uploads := s3Uploads(t, env, bucket, strings.TrimPrefix(f.dir, "/")+"/killed/")
	t.Logf("after kill -9: staging files on DR %v, multipart uploads %d", left, uploads)
	if len(left) < 2 {
		t.Fatalf("after the kill DR holds staging files %v; want the part files of an unfinished split copy", left)
	}
	if n := len(f2.completions()); n == len(f2.tasks) {
		t.Fatal("the copies finished before the kill")
	} else if n > 0 {
		t.Fatalf("%d of the 2 copies completed before the kill, which came after %d bytes streamed: want none (the kill mid-copy)", n, at)
	}
	p = startHivedr(t, "copyd after kill", "copyd", "-config", kcfg)
	got = f2.waitCompletions(p, 3*time.Minute)
	p.stop(t)
	for _, task := range f2.tasks {
		cs := got[task.TaskID]
		if len(cs) != 1 || cs[0].Status != schemas.StatusCopied || *cs[0].CRC32C != crcOf(f.data["big"]) {
			t.Errorf("%s after the restart: %+v", task.TaskID, cs)
		}
	}
	if crc, _, err := env.HDFSCRC(t, testenv.DR).FileCRC32C(ctx, f.dir+"/killed/big"); err != nil || crc != crcOf(f.data["big"]) {
		t.Errorf("killed/big on DR: crc %08x (%v)", crc, err)
	}
	checkNoLeftovers(t, env, bucket, f.dir)
	checkNoLeftovers(t, env, bucket, f.dir+"/killed")
}

// stagingNames lists the staging files in the DR directory dir.
func stagingNames(t *testing.T, env *testenv.Env, dir string) []string {
	t.Helper()
	infos, err := env.HDFS(t, testenv.DR).ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, fi := range infos {
		if fs.IsStagingName(fi.Name()) {
			out = append(out, fi.Name())
		}
	}
	return out
}

// s3Uploads counts the multipart uploads in progress under prefix.
func s3Uploads(t *testing.T, env *testenv.Env, bucket, prefix string) int {
	t.Helper()
	out, err := env.S3(t).ListMultipartUploads(context.Background(), &s3.ListMultipartUploadsInput{Bucket: &bucket, Prefix: &prefix})
	if err != nil {
		t.Fatalf("list multipart uploads: %v", err)
	}
	return len(out.Uploads)
}

// checkNoLeftovers fails the test if the DR directory dir holds staging
// files or the bucket has uploads in progress under dir.
func checkNoLeftovers(t *testing.T, env *testenv.Env, bucket, dir string) {
	t.Helper()
	if left := stagingNames(t, env, dir); len(left) > 0 {
		t.Errorf("staging files left on DR in %s: %v", dir, left)
	}
	if n := s3Uploads(t, env, bucket, strings.TrimPrefix(dir, "/")+"/"); n > 0 {
		t.Errorf("%d multipart uploads left in s3://%s/%s", n, bucket, dir)
	}
}
