package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/colinmarc/hdfs/v2"

	"github.com/hivedr/hivedr/copyd"
	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/testenv"
	"github.com/hivedr/hivedr/schemas"
)

// TestSecureFileMetadataHDFS copies files from the source HDFS to the DR
// one with copyd.preserve on, as a stream and as ranges joined with CONCAT,
// and checks that the DR files have the source's owner (mapped to its DR
// name), group, permission bits and modification time. The stack's
// NameNodes refuse setOwner to anyone but their superuser (the user they
// run as) even with permission checks off, so copyd acts as that user
// here; as user hivedr the copy must fail saying so, and publish nothing.
// This runs on the plain stack, where the NameNode takes the user name
// the client gives; TestSecureFileMetadataKerberos runs the same on the
// secured stack, where it is the Kerberos principal that proved itself.
func TestSecureFileMetadataHDFS(t *testing.T) {
	env := testenv.Require(t)
	super := env.HDFSSuperuser()
	src, err := hdfs.NewClient(hdfs.ClientOptions{Addresses: []string{env.Get(t, "HIVEDR_HDFS_SRC_NAMENODE")}, User: super})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	fileMetadataHDFS(t, env, fileMetaIdentities{refused: "hivedr", srcAdmin: src, fs: func(asSuper bool) fs.Config {
		drUser := "hivedr"
		if asSuper {
			drUser = super
		}
		s, d := env.HDFSConfig(t, testenv.Source, nil), env.HDFSConfig(t, testenv.DR, nil)
		d.User = drUser
		return fs.Config{HDFS: []fs.HDFSConfig{s, d}}
	}})
}

// TestSecureFileMetadataKerberos is TestSecureFileMetadataHDFS on the
// secured stack's kerberized clusters: hivedr-test (in the NameNodes'
// superuser group) may keep the metadata on DR, and copyd's principal
// hivedr-copyd may not: its copy fails naming the principal, and
// publishes nothing.
func TestSecureFileMetadataKerberos(t *testing.T) {
	env := testenv.RequireSecure(t)
	copydKrb := env.Krb(t, testenv.CopydPrincipal)
	fileMetadataHDFS(t, env, fileMetaIdentities{refused: copydKrb.Principal(), srcAdmin: env.HDFS(t, testenv.Source),
		fs: func(asSuper bool) fs.Config {
			kc := copydKrb
			if asSuper {
				kc = env.Krb(t, testenv.TestPrincipal)
			}
			return fs.Config{HDFS: []fs.HDFSConfig{env.HDFSConfig(t, testenv.Source, kc), env.HDFSConfig(t, testenv.DR, kc)}, Kerberos: kc}
		}})
}

// fileMetaIdentities are who fileMetadataHDFS copies as: fs(true) may set
// owners on DR, fs(false), named refused in the NameNode's refusal, may
// not; srcAdmin gives the source files their metadata.
type fileMetaIdentities struct {
	fs       func(asSuper bool) fs.Config
	refused  string
	srcAdmin *hdfs.Client
}

func fileMetadataHDFS(t *testing.T, env *testenv.Env, ids fileMetaIdentities) {
	ctx := ctxFor(t, 3*time.Minute)
	u := uniq(t)
	srcNN, drNN := env.Get(t, "HIVEDR_HDFS_SRC_NAMENODE"), env.Get(t, "HIVEDR_HDFS_DR_NAMENODE")
	engine := func(asSuper bool) *copyd.Engine {
		c := ids.fs(asSuper)
		c.HDFS[1].Concat = true
		r, err := fs.NewRouter(c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		eng, err := copyd.NewEngine(copyd.EngineConfig{
			SourceRoots: []string{"hdfs://" + srcNN + "/securemeta/"}, TargetRoots: []string{"hdfs://" + drNN + "/securemeta/"},
			SplitSize: 1 << 20, SplitWorkers: 2, Retries: 1, InitialBackoff: time.Millisecond,
			Preserve: copyd.Preserve{Owner: true, Group: true, Perm: true, Times: true,
				Users: map[string]string{"etl": "etl_dr"}},
		}, r, nil)
		if err != nil {
			t.Fatal(err)
		}
		return eng
	}
	asSuper, asUser := engine(true), engine(false)
	src, dr := ids.srcAdmin, env.HDFS(t, testenv.DR)
	dir := "/securemeta/" + u
	t.Cleanup(func() { src.RemoveAll(dir); dr.RemoveAll(dir) })

	// Whole seconds: the native client (colinmarc/hdfs) reads and sets
	// modification times to the second, though HDFS keeps milliseconds.
	mtime := time.Date(2025, 11, 5, 8, 30, 12, 0, time.UTC)
	write := func(t *testing.T, p string, size int, owner, group string, perm os.FileMode) {
		data := bytes.Repeat([]byte("metadata"), size/8+1)[:size]
		testenv.WriteHDFS(t, src, p, data)
		for _, err := range []error{src.Chown(p, owner, group), src.Chmod(p, perm), src.Chtimes(p, mtime, mtime)} {
			if err != nil {
				t.Fatalf("set source metadata of %s: %v", p, err)
			}
		}
	}
	for _, tc := range []struct {
		name        string
		size        int
		owner, want string
		group       string
		perm        os.FileMode
	}{
		{"stream", 4096, "etl", "etl_dr", "analysts", 0o640},
		{"ranges", 3<<20 + 5, "svc", "svc", "finance", 0o600}, // an unmapped user is kept
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := dir + "/" + tc.name
			write(t, p, tc.size, tc.owner, tc.group, tc.perm)
			c := asSuper.Copy(ctx, schemas.CopyTask{TaskID: u + tc.name, SourceURI: "hdfs://" + srcNN + p, TargetURI: "hdfs://" + drNN + p})
			if c.Status != schemas.StatusCopied {
				t.Fatalf("copy: %s %s", c.Status, c.Error)
			}
			fi, err := dr.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			hf := fi.(*hdfs.FileInfo)
			if hf.Owner() != tc.want || hf.OwnerGroup() != tc.group || fi.Mode().Perm() != tc.perm || !fi.ModTime().Equal(mtime) {
				t.Fatalf("DR file %s: owner %s group %s mode %04o mtime %s; want %s %s %04o %s", p, hf.Owner(), hf.OwnerGroup(),
					fi.Mode().Perm(), fi.ModTime().UTC(), tc.want, tc.group, tc.perm, mtime)
			}
			if fi.Size() != int64(tc.size) {
				t.Fatalf("DR file %s has %d bytes, want %d", p, fi.Size(), tc.size)
			}
		})
	}

	t.Run("refused", func(t *testing.T) {
		p := dir + "/refused"
		write(t, p, 100, "etl", "analysts", 0o640)
		c := asUser.Copy(ctx, schemas.CopyTask{TaskID: u + "refused", SourceURI: "hdfs://" + srcNN + p, TargetURI: "hdfs://" + drNN + p})
		if c.Status != schemas.StatusFailed || !strings.Contains(c.Error, "user "+ids.refused+" may not chown to etl_dr:analysts") ||
			!strings.Contains(c.Error, "superuser") {
			t.Fatalf("copy as %s: %s %q; want FAILED saying %[1]s may not chown", ids.refused, c.Status, c.Error)
		}
		if c.Attempts != 1 {
			t.Fatalf("a refusal was retried: %d attempts", c.Attempts)
		}
		if _, err := dr.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("DR file %s after a refused copy: %v; want none", p, err)
		}
		infos, _ := dr.ReadDir(path.Dir(p))
		for _, fi := range infos {
			if fs.IsStagingName(fi.Name()) {
				t.Fatalf("staging file %s left behind", fi.Name())
			}
		}
	})
}

// TestSecureFileMetadataS3 writes objects through the S3 FS with a canned
// ACL and with SSE-S3, as one put and as a multipart upload. The stack's
// S3 server (versitygw) takes both headers on PutObject and
// CreateMultipartUpload but neither encrypts nor reports SSE back
// (HeadObject has no x-amz-server-side-encryption), so this checks only
// that writes carrying them are accepted whole; that AWS applies them is
// not tested here.
func TestSecureFileMetadataS3(t *testing.T) {
	env := testenv.Require(t)
	ctx := ctxFor(t, 2*time.Minute)
	bucket := "securemeta-" + uniq(t)
	client := env.S3(t)
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &bucket}); err != nil {
		t.Fatalf("create bucket %s: %v", bucket, err)
	}
	t.Cleanup(func() { emptyAndDeleteBucket(client, bucket) })
	for _, tc := range []struct {
		name string
		cfg  func(*fs.S3Config)
	}{
		{"acl", func(c *fs.S3Config) { c.ACL = "private" }},
		{"sse-s3", func(c *fs.S3Config) { c.SSE = fs.SSES3 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fs.S3Config{Endpoint: env.Get(t, "HIVEDR_S3_ENDPOINT"), Region: env.Get(t, "HIVEDR_S3_REGION"),
				AccessKey: env.Get(t, "HIVEDR_S3_ACCESS_KEY"), SecretKey: env.Get(t, "HIVEDR_S3_SECRET_KEY"), PathStyle: true,
				PartSize: fs.MinS3PartSize}
			tc.cfg(&c)
			s, err := fs.NewS3(c)
			if err != nil {
				t.Fatal(err)
			}
			for _, size := range []int{1000, fs.MinS3PartSize + 7} {
				loc := fmt.Sprintf("s3://%s/%s/%d", bucket, tc.name, size)
				data := bytes.Repeat([]byte("x"), size)
				w, err := s.Create(ctx, loc, int64(size))
				if err != nil {
					t.Fatal(err)
				}
				if _, err := w.Write(data); err != nil {
					t.Fatal(err)
				}
				if err := w.Commit(ctx, crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli))); err != nil {
					t.Fatalf("commit %s with %s: %v", loc, tc.name, err)
				}
				key := fmt.Sprintf("%s/%d", tc.name, size)
				head, err := client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &bucket, Key: &key})
				if err != nil {
					t.Fatal(err)
				}
				if aws.ToInt64(head.ContentLength) != int64(size) {
					t.Fatalf("%s: %d bytes, want %d", loc, aws.ToInt64(head.ContentLength), size)
				}
				t.Logf("%s: %d bytes, server-side encryption reported %q", loc, size, head.ServerSideEncryption)
			}
		})
	}
}
