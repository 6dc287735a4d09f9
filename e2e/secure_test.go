package e2e

import (
	"bytes"
	"context"
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
	"github.com/hivedr/hivedr/internal/webhdfs"
	"github.com/hivedr/hivedr/schemas"
)

// TestSecureFileMetadataHDFS copies files from the source HDFS to the DR
// one with copyd.preserve on, as a stream and as ranges joined with CONCAT,
// and checks that the DR files have the source's owner (mapped to its DR
// name), group, permission bits and modification time (to the
// millisecond), that the directories the copies wrote into have their
// source directories' owner, group and mode (one made, one that existed
// with other metadata and was repaired), and that a file already
// identical on DR gets its metadata back without a copy. The stack's
// NameNodes refuse setOwner to anyone but their superuser (the user they
// run as) even with permission checks off, so copyd acts as that user
// here; as user hivedr a copy must fail saying so, for a file and for a
// directory, and publish nothing. This runs on the plain stack, where the
// NameNode takes the user name the client gives;
// TestSecureFileMetadataKerberos runs the same on the secured stack, where
// it is the Kerberos principal that proved itself.
func TestSecureFileMetadataHDFS(t *testing.T) {
	env := testenv.Require(t)
	super := env.HDFSSuperuser()
	admin := func(site testenv.Site) *hdfs.Client {
		c, err := hdfs.NewClient(hdfs.ClientOptions{Addresses: []string{env.Get(t, "HIVEDR_HDFS_"+string(site)+"_NAMENODE")}, User: super})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	fileMetadataHDFS(t, env, fileMetaIdentities{refused: "hivedr", srcAdmin: admin(testenv.Source), drAdmin: admin(testenv.DR),
		fs: func(asSuper bool) fs.Config {
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
		drAdmin: env.HDFS(t, testenv.DR),
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
// not; srcAdmin and drAdmin (superusers) give files and directories their
// metadata on each site.
type fileMetaIdentities struct {
	fs                func(asSuper bool) fs.Config
	refused           string
	srcAdmin, drAdmin *hdfs.Client
}

// hdfsMeta is what a file or directory keeps on HDFS.
type hdfsMeta struct {
	owner, group string
	perm         os.FileMode
	mtime        time.Time // zero: not compared (directories)
}

func (m hdfsMeta) String() string {
	s := fmt.Sprintf("%s:%s %04o", m.owner, m.group, m.perm)
	if !m.mtime.IsZero() {
		s += " " + m.mtime.UTC().Format("2006-01-02T15:04:05.000Z")
	}
	return s
}

// statMeta is the metadata of p on c; mtime only when withTime.
func statMeta(t *testing.T, c *hdfs.Client, p string, withTime bool) hdfsMeta {
	t.Helper()
	fi, err := c.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	hf := fi.(*hdfs.FileInfo)
	m := hdfsMeta{owner: hf.Owner(), group: hf.OwnerGroup(), perm: fi.Mode().Perm()}
	if withTime {
		m.mtime = fi.ModTime().UTC()
	}
	return m
}

// setMeta gives p on c (as a superuser) owner, group, mode and, through
// web (WebHDFS SETTIMES, to the millisecond), mtime.
func setMeta(t *testing.T, ctx context.Context, c *hdfs.Client, web *webhdfs.Client, p string, m hdfsMeta) {
	t.Helper()
	if err := c.Chown(p, m.owner, m.group); err != nil {
		t.Fatalf("chown %s: %v", p, err)
	}
	if err := c.Chmod(p, m.perm); err != nil {
		t.Fatalf("chmod %s: %v", p, err)
	}
	if !m.mtime.IsZero() {
		if err := web.SetModTime(ctx, p, m.mtime); err != nil {
			t.Fatalf("set mtime of %s: %v", p, err)
		}
	}
}

func fileMetadataHDFS(t *testing.T, env *testenv.Env, ids fileMetaIdentities) {
	ctx := ctxFor(t, 3*time.Minute)
	u := uniq(t)
	srcNN, drNN := env.Get(t, "HIVEDR_HDFS_SRC_NAMENODE"), env.Get(t, "HIVEDR_HDFS_DR_NAMENODE")
	keepAll := copyd.Preserve{Owner: true, Group: true, Perm: true, Times: true, Users: map[string]string{"etl": "etl_dr"}}
	engine := func(asSuper bool, keep copyd.Preserve) *copyd.Engine {
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
			Preserve: keep,
		}, r, nil)
		if err != nil {
			t.Fatal(err)
		}
		return eng
	}
	asSuper, asUser := engine(true, keepAll), engine(false, keepAll)
	src, dr, srcWeb, drWeb := ids.srcAdmin, ids.drAdmin, env.WebHDFS(t, testenv.Source), env.WebHDFS(t, testenv.DR)
	dir := "/securemeta/" + u
	t.Cleanup(func() { src.RemoveAll(dir); dr.RemoveAll(dir) })
	copyTask := func(name, p string) schemas.CopyTask {
		return schemas.CopyTask{TaskID: u + name, SourceURI: "hdfs://" + srcNN + p, TargetURI: "hdfs://" + drNN + p}
	}

	// Milliseconds: HDFS keeps them, and hivedr sets them with WebHDFS
	// SETTIMES (the native client's setTimes would cut them to seconds).
	mtime := time.Date(2025, 11, 5, 8, 30, 12, 345e6, time.UTC)
	write := func(t *testing.T, p string, size int, m hdfsMeta) {
		data := bytes.Repeat([]byte("metadata"), size/8+1)[:size]
		testenv.WriteHDFS(t, src, p, data)
		m.mtime = mtime
		setMeta(t, ctx, src, srcWeb, p, m)
	}
	mapped := func(m hdfsMeta) hdfsMeta {
		if m.owner == "etl" {
			m.owner = "etl_dr"
		}
		return m
	}
	check := func(t *testing.T, p string, want hdfsMeta) {
		t.Helper()
		if got := statMeta(t, dr, p, !want.mtime.IsZero()); got != want {
			t.Errorf("DR %s: %s, want %s", p, got, want)
		}
	}
	for _, tc := range []struct {
		name string
		size int
		meta hdfsMeta
	}{
		{"stream", 4096, hdfsMeta{owner: "etl", group: "analysts", perm: 0o640}},
		{"ranges", 3<<20 + 5, hdfsMeta{owner: "svc", group: "finance", perm: 0o600}}, // an unmapped user is kept
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := dir + "/" + tc.name
			write(t, p, tc.size, tc.meta)
			c := asSuper.Copy(ctx, copyTask(tc.name, p))
			if c.Status != schemas.StatusCopied {
				t.Fatalf("copy: %s %s", c.Status, c.Error)
			}
			want := mapped(tc.meta)
			want.mtime = mtime
			check(t, p, want)
			if fi, err := dr.Stat(p); err != nil || fi.Size() != int64(tc.size) {
				t.Fatalf("DR file %s: %v, %v; want %d bytes", p, fi, err, tc.size)
			}
		})
	}

	// A table directory the DR metastore made its own way, and a partition
	// directory copyd makes: both end with their source's metadata, and so
	// does the test's directory above them; the target root is left alone.
	t.Run("directories", func(t *testing.T) {
		tbl, part := dir+"/tbl", dir+"/tbl/dt=1"
		f := part + "/000000_0"
		write(t, f, 100, hdfsMeta{owner: "etl", group: "analysts", perm: 0o640})
		tblMeta, partMeta := hdfsMeta{owner: "etl", group: "finance", perm: 0o750}, hdfsMeta{owner: "svc", group: "finance", perm: 0o700}
		setMeta(t, ctx, src, srcWeb, tbl, tblMeta)
		setMeta(t, ctx, src, srcWeb, part, partMeta)
		if err := dr.MkdirAll(tbl, 0o755); err != nil {
			t.Fatal(err)
		}
		setMeta(t, ctx, dr, drWeb, tbl, hdfsMeta{owner: "hive", group: "hive", perm: 0o755})
		rootBefore := statMeta(t, dr, "/securemeta", false)
		c := asSuper.Copy(ctx, copyTask("dirs", f))
		if c.Status != schemas.StatusCopied || !strings.Contains(c.Verification, "1 made, 1 repaired") {
			t.Fatalf("copy: %s %s %q; want COPIED, one directory made and one repaired", c.Status, c.Error, c.Verification)
		}
		check(t, tbl, mapped(tblMeta))
		check(t, part, partMeta)
		check(t, dir, statMeta(t, src, dir, false))
		if got := statMeta(t, dr, "/securemeta", false); got != rootBefore {
			t.Errorf("the target root changed: %s, was %s", got, rootBefore)
		}
	})

	// A DR file identical to its source but with other metadata gets the
	// source's, without a copy.
	t.Run("identical", func(t *testing.T) {
		p := dir + "/stream"
		setMeta(t, ctx, dr, drWeb, p, hdfsMeta{owner: "hive", group: "hive", perm: 0o644, mtime: mtime.Add(-time.Hour).Truncate(time.Second)})
		c := asSuper.Copy(ctx, copyTask("identical", p))
		if c.Status != schemas.StatusSkippedIdentical || !strings.Contains(c.Verification, "metadata repaired (nothing copied): owner etl_dr, group analysts, permission 0640, mtime 2025-11-05T08:30:12.345Z") {
			t.Fatalf("copy: %s %s %q; want SKIPPED_IDENTICAL with the metadata repaired", c.Status, c.Error, c.Verification)
		}
		check(t, p, hdfsMeta{owner: "etl_dr", group: "analysts", perm: 0o640, mtime: mtime})
	})

	// Only the group: the owner stays the writer's (the NameNode would
	// take an empty owner for a name, so it is sent as it is).
	t.Run("group only", func(t *testing.T) {
		p := dir + "/grouponly"
		write(t, p, 100, hdfsMeta{owner: "etl", group: "analysts", perm: 0o640})
		c := engine(true, copyd.Preserve{Group: true}).Copy(ctx, copyTask("grouponly", p))
		if c.Status != schemas.StatusCopied {
			t.Fatalf("copy: %s %s", c.Status, c.Error)
		}
		got := statMeta(t, dr, p, false)
		if got.group != "analysts" || got.owner == "" || got.owner == "etl" || got.owner == "etl_dr" {
			t.Errorf("DR %s: %s; want group analysts and the writer as owner", p, got)
		}
	})

	t.Run("refused", func(t *testing.T) {
		p := dir + "/refused"
		write(t, p, 100, hdfsMeta{owner: "etl", group: "analysts", perm: 0o640})
		c := asUser.Copy(ctx, copyTask("refused", p))
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

	// A directory whose owner may not be set: the copy fails naming the
	// directory, before any file is written into it.
	t.Run("refused directory", func(t *testing.T) {
		d := dir + "/locked"
		p := d + "/000000_0"
		write(t, p, 100, hdfsMeta{owner: "etl", group: "analysts", perm: 0o640})
		setMeta(t, ctx, src, srcWeb, d, hdfsMeta{owner: "etl", group: "analysts", perm: 0o750})
		c := asUser.Copy(ctx, copyTask("locked", p))
		want := "keep metadata of directory hdfs://" + drNN + d + ": user " + ids.refused + " may not chown to etl_dr:analysts"
		if c.Status != schemas.StatusFailed || c.Attempts != 1 || !strings.Contains(c.Error, want) {
			t.Fatalf("copy as %s: %s after %d attempts %q; want FAILED at once saying %q", ids.refused, c.Status, c.Attempts, c.Error, want)
		}
		if infos, err := dr.ReadDir(d); err == nil && len(infos) > 0 {
			t.Fatalf("%d files written into %s after the refusal", len(infos), d)
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
