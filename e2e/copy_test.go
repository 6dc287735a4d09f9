package e2e

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/hivedr/hivedr/internal/testenv"
)

// TestCopyCommand runs `hivedr copy` (copyd.CopyTree with the engine; what
// e2e/bench/bench-copy.sh measures) from a source HDFS directory to the DR
// HDFS: every file of the tree, nested ones and an empty one included,
// arrives whole at its path below the target, and the summary counts
// them; run again, every file is skipped as identical.
func TestCopyCommand(t *testing.T) {
	env := testenv.Require(t)
	u := uniq(t)
	conf := copydConf{prefix: "copy" + u}.write(t, env)
	srcFS, drFS := env.HDFS(t, testenv.Source), env.HDFS(t, testenv.DR)
	srcDir, dstDir := "/copytest/"+u+"/tree", "/copytest/"+u+"/copy"
	files := map[string][]byte{
		"a":            randomBytes(t, 1<<20+7),
		"d/b":          randomBytes(t, 100),
		"d/e/f/c":      randomBytes(t, 3<<20),
		"empty":        nil,
		"dt=1/part-00": randomBytes(t, 4096),
	}
	for name, b := range files {
		testenv.WriteHDFS(t, srcFS, srcDir+"/"+name, b)
	}
	// Spelled as an operator may write it: what the walk lists is
	// canonical, and the targets are still the same paths below dst.
	src := "hdfs://" + env.Get(t, "HIVEDR_HDFS_SRC_NAMENODE") + strings.Replace(srcDir, "/tree", "//tree/", 1)
	dst := "hdfs://" + env.Get(t, "HIVEDR_HDFS_DR_NAMENODE") + dstDir + "/"

	run := func(want string) {
		t.Helper()
		p := startHivedr(t, "copy", "copy", "-config", conf, "-workers", "3", src, dst)
		if code := p.wait(t, 3*time.Minute); code != 0 {
			t.Fatalf("hivedr copy exited %d:\n%s", code, p.out.String())
		}
		if out := p.out.String(); !strings.Contains(out, want) {
			t.Fatalf("hivedr copy printed no %q:\n%s", want, out)
		}
	}
	run(fmt.Sprintf("copied %d files", len(files)))
	for name, want := range files {
		got, err := drFS.ReadFile(dstDir + "/" + name)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s on the DR: %d bytes (%v), want the source's %d", name, len(got), err, len(want))
		}
	}
	run(fmt.Sprintf("(SKIPPED_IDENTICAL=%d)", len(files)))
}

// TestCopyS3SecretKeyFile runs `hivedr copy` to the stack's S3 with the
// endpoint's secret in filesystems.s3[].secret_key_file (as a mounted
// Kubernetes Secret gives it): the file arrives; with a wrong secret in
// the file the copy fails, so the file is what signs the requests.
func TestCopyS3SecretKeyFile(t *testing.T) {
	env := testenv.Require(t)
	u := uniq(t)
	bucket := "copykey-" + u
	if _, err := env.S3(t).CreateBucket(ctxFor(t, time.Minute), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	base, err := os.ReadFile(copydConf{prefix: "copykey" + u, bucket: bucket}.write(t, env))
	if err != nil {
		t.Fatal(err)
	}
	sk := env.Get(t, "HIVEDR_S3_SECRET_KEY")
	if strings.Count(string(base), "secret_key: "+sk+",") != 1 {
		t.Fatalf("copydConf's YAML changed shape; cannot give its S3 secret as a file:\n%s", base)
	}
	keyFile := writeFile(t, "s3-secret", sk+"\n")
	conf := writeFile(t, "copy-s3key.yaml", strings.Replace(string(base), "secret_key: "+sk+",", "secret_key_file: "+keyFile+",", 1))
	data := randomBytes(t, 70000)
	srcDir := "/copytest/" + u + "/tree"
	testenv.WriteHDFS(t, env.HDFS(t, testenv.Source), srcDir+"/f", data)
	src := "hdfs://" + env.Get(t, "HIVEDR_HDFS_SRC_NAMENODE") + srcDir
	run := func(dst string) (int, string) {
		p := startHivedr(t, "copy", "copy", "-config", conf, src, dst)
		return p.wait(t, 3*time.Minute), p.out.String()
	}
	if code, out := run("s3://" + bucket + "/copytest/" + u + "/a"); code != 0 {
		t.Fatalf("hivedr copy with secret_key_file exited %d:\n%s", code, out)
	}
	if crc, err := s3CRC(t, env, bucket, "copytest/"+u+"/a/f"); err != nil || crc != crcOf(data) {
		t.Fatalf("the S3 copy: crc %08x (%v), want %08x", crc, err, crcOf(data))
	}
	if err := os.WriteFile(keyFile, []byte("not-the-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out := run("s3://" + bucket + "/copytest/" + u + "/b"); code == 0 {
		t.Fatalf("hivedr copy with a wrong secret in secret_key_file exited 0:\n%s", out)
	}
}
