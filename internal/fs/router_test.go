package fs

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

func testRouter(t *testing.T) *Router {
	t.Helper()
	r, err := NewRouter(Config{
		Local: true,
		HDFS: []HDFSConfig{
			{NameNodes: []string{"127.0.0.1:18020"}, WebHDFS: "127.0.0.1:18070", User: "hivedr"},
			{NameNodes: []string{"dr-nn:8020"}, WebHDFS: "dr-nn:9870", User: "hivedr"},
			{Authority: "prodns", NameNodes: []string{"nn1:8020", "nn2:8020"}, WebHDFS: "nn1:9870", User: "hive"},
		},
		S3: []S3Config{
			{Endpoint: "http://127.0.0.1:19000", AccessKey: "a", SecretKey: "s", PathStyle: true, Buckets: []string{"dr-bucket"}},
			{Region: "eu-west-1"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestRouterSplit(t *testing.T) {
	r := testRouter(t)
	for _, c := range []struct {
		loc, path string
		fs        func(FS) bool
	}{
		{"hdfs://127.0.0.1:18020/warehouse/t/f", "hdfs://127.0.0.1:18020/warehouse/t/f",
			func(f FS) bool { h, ok := f.(*HDFS); return ok && h.authority == "127.0.0.1:18020" }},
		{"hdfs://DR-NN/warehouse//t/", "hdfs://dr-nn:8020/warehouse/t",
			func(f FS) bool { h, ok := f.(*HDFS); return ok && h.authority == "dr-nn:8020" }},
		{"hdfs://dr-nn:8020/warehouse/t", "hdfs://dr-nn:8020/warehouse/t",
			func(f FS) bool { h, ok := f.(*HDFS); return ok && h.authority == "dr-nn:8020" }},
		// A nameservice configured without a port matches locations
		// written with or without the default port.
		{"hdfs://prodns/w/f", "hdfs://prodns:8020/w/f",
			func(f FS) bool { h, ok := f.(*HDFS); return ok && h.authority == "prodns:8020" }},
		{"hdfs://ProdNS:8020/w/f", "hdfs://prodns:8020/w/f",
			func(f FS) bool { h, ok := f.(*HDFS); return ok && h.authority == "prodns:8020" }},
		{"s3://dr-bucket/w/t/f", "s3://dr-bucket/w/t/f",
			func(f FS) bool { return f == r.s3["dr-bucket"] }},
		{"s3a://other/w/f", "s3://other/w/f",
			func(f FS) bool { return f == r.s3Default }},
		{"S3N://DR-Bucket/w//f", "s3://dr-bucket/w/f",
			func(f FS) bool { return f == r.s3["dr-bucket"] }},
		{"/tmp/x//y", "/tmp/x/y", func(f FS) bool { _, ok := f.(*Local); return ok }},
		{"file:///tmp/x", "/tmp/x", func(f FS) bool { _, ok := f.(*Local); return ok }},
		{"file:/tmp/x", "/tmp/x", func(f FS) bool { _, ok := f.(*Local); return ok }},
		{"file://localhost/tmp/x/", "/tmp/x", func(f FS) bool { _, ok := f.(*Local); return ok }},
	} {
		f, p, err := r.Split(c.loc)
		if err != nil {
			t.Errorf("Split(%s): %v", c.loc, err)
			continue
		}
		if p != c.path || !c.fs(f) {
			t.Errorf("Split(%s) = %T %s, want path %s", c.loc, f, p, c.path)
		}
	}
	if r.s3["dr-bucket"] == r.s3Default {
		t.Error("two endpoints share one client")
	}
}

func TestRouterRefuses(t *testing.T) {
	r := testRouter(t)
	for _, loc := range []string{
		"hdfs://unknown:8020/f",
		"hdfs://127.0.0.1:18021/f",
		"gs://bucket/f",
		"s3://bucket-only",
		"s3:///key",
		"relative/path",
		"hdfs://127.0.0.1:18020/a/../b",
		"file://remote/tmp/x",
		"hdfs://127.0.0.1:18020/f?x=1",
		"hdfs://127.0.0.1/f", // the cluster is 127.0.0.1:18020, not :8020
		"hdfs://prodns:8021/f",
		"hdfs:///f",
		"viewfs://prodns/f",
	} {
		if _, _, err := r.Split(loc); err == nil || !strings.Contains(err.Error(), loc) {
			t.Errorf("Split(%q) = %v, want an error naming it", loc, err)
		}
	}

	noLocal, err := NewRouter(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := noLocal.Split("/tmp/x"); err == nil {
		t.Error("Split of a local path without local enabled succeeded")
	}
	if _, _, err := noLocal.Split("s3://b/k"); err == nil {
		t.Error("Split of an s3 location with no endpoint succeeded")
	}
}

func TestRouterConfigErrors(t *testing.T) {
	hdfsOK := HDFSConfig{NameNodes: []string{"nn:8020"}, WebHDFS: "nn:9870", User: "u"}
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{HDFS: []HDFSConfig{{WebHDFS: "nn:9870", User: "u"}}}, "hdfs[0].namenodes"},
		{Config{HDFS: []HDFSConfig{{NameNodes: []string{"nn"}, WebHDFS: "nn:9870", User: "u"}}}, "hdfs[0].namenodes[0]"},
		{Config{HDFS: []HDFSConfig{hdfsOK, {NameNodes: []string{"nn:8020"}, User: "u"}}}, "hdfs[1].webhdfs"},
		{Config{HDFS: []HDFSConfig{{NameNodes: []string{"nn:8020"}, WebHDFS: "nn:9870"}}}, "hdfs[0].user"},
		{Config{HDFS: []HDFSConfig{hdfsOK, hdfsOK}}, "hdfs[1]: authority nn:8020"},
		// One authority spelled two ways is configured twice.
		{Config{HDFS: []HDFSConfig{{Authority: "NN", NameNodes: []string{"a:8020"}, WebHDFS: "a:9870", User: "u"}, hdfsOK}}, "hdfs[1]: authority nn:8020"},
		{Config{HDFS: []HDFSConfig{{Authority: "u@ns1", NameNodes: []string{"nn:8020"}, WebHDFS: "nn:9870", User: "u"}}}, "hdfs[0].authority"},
		{Config{HDFS: []HDFSConfig{{Authority: "ns1:x", NameNodes: []string{"nn:8020"}, WebHDFS: "nn:9870", User: "u"}}}, "hdfs[0].authority"},
		{Config{S3: []S3Config{{}, {}}}, "s3[1].buckets"},
		{Config{S3: []S3Config{{Buckets: []string{"a"}}, {Buckets: []string{"b", "a"}}}}, "s3[1].buckets[1]"},
		{Config{S3: []S3Config{{PartSize: 1 << 20}}}, "s3[0].part_size"},
		{Config{S3: []S3Config{{AccessKey: "a"}}}, "s3[0].access_key"},
		{Config{S3: []S3Config{{Endpoint: "127.0.0.1:19000"}}}, "s3[0].endpoint"},
		{Config{S3: []S3Config{{Buckets: []string{"a/b"}}}}, "s3[0].buckets[0]"},
	} {
		_, err := NewRouter(c.cfg)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("NewRouter(%+v) = %v, want an error starting %q", c.cfg, err, c.want)
		}
	}
}

func TestStagingNames(t *testing.T) {
	name, err := stagingName("part-00000.orc")
	if err != nil {
		t.Fatal(err)
	}
	if !IsStagingName(name) || !isStagingFor("/w/t/part-00000.orc", "/w/t/"+name) {
		t.Errorf("%s is not recognised as a staging name", name)
	}
	if isStagingFor("/w/t/part-00001.orc", "/w/t/"+name) || isStagingFor("/w/u/part-00000.orc", "/w/t/"+name) {
		t.Errorf("%s is taken for another file's staging name", name)
	}
	for _, n := range []string{"part-0", ".part-0.staging", ".hivedr-0123456789abcdef.staging", ".x.hivedr-0123456789abcdef"} {
		if IsStagingName(n) {
			t.Errorf("IsStagingName(%q) = true", n)
		}
	}
}

func TestCRC32CEncoding(t *testing.T) {
	// The x-amz-checksum-crc32c of "hello" is base64 of its big-endian
	// CRC32C, 0x9a71bb4c.
	if got := encodeCRC32C(crcOf([]byte("hello"))); got != "mnG7TA==" {
		t.Errorf("encodeCRC32C = %s", got)
	}
	if c, err := decodeCRC32C("mnG7TA=="); err != nil || c != 0x9a71bb4c {
		t.Errorf("decodeCRC32C = %08x, %v", c, err)
	}
	if _, err := decodeCRC32C("mnG7TA==-3"); err == nil {
		t.Error("decodeCRC32C accepted a composite checksum")
	}
}

func TestS3ConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		c   S3Config
		err string
	}{
		{S3Config{SSE: SSES3, ACL: "bucket-owner-full-control"}, ""},
		{S3Config{SSE: SSEKMS, SSEKMSKeyID: "alias/dr"}, ""},
		{S3Config{SSE: "aes"}, "sse: \"aes\" is not AES256"},
		{S3Config{SSE: SSES3, SSEKMSKeyID: "k"}, "sse_kms_key_id: given with sse \"AES256\""},
		{S3Config{ACL: "world"}, "acl: \"world\" is not a canned ACL"},
		{S3Config{Profile: "dr"}, ""},
		{S3Config{Anonymous: true}, ""},
		{S3Config{Profile: "dr", AccessKey: "a", SecretKey: "s"}, "profile: not with access_key"},
		{S3Config{Anonymous: true, AccessKey: "a", SecretKey: "s"}, "anonymous: not with access_key or profile"},
		{S3Config{Anonymous: true, Profile: "dr"}, "anonymous: not with access_key or profile"},
		{S3Config{AccessKey: "a", SecretKeyFile: "/run/secrets/s3"}, ""},
		{S3Config{AccessKey: "a", SecretKey: "s", SecretKeyFile: "/run/secrets/s3"}, "secret_key, secret_key_file: give one, not both"},
		{S3Config{SecretKeyFile: "/run/secrets/s3"}, "access_key, secret_key (or secret_key_file): give both or neither"},
		{S3Config{AccessKey: "a"}, "access_key, secret_key (or secret_key_file): give both or neither"},
	} {
		c := tt.c
		c.EnsureDefaults()
		err := c.Validate()
		if (tt.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("Validate(%+v) = %v, want %q", tt.c, err, tt.err)
		}
	}
}

// TestProdS3SecretKeyFile: the secret is read from its file, again once the
// credentials have expired (a key rotated in place), and an unreadable
// or empty file is an error naming it.
func TestProdS3SecretKeyFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(file, []byte("first\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := secretFileCredentials{accessKey: "AK", file: file, now: func() time.Time { return now }}
	cache := aws.NewCredentialsCache(p)
	ctx := context.Background()
	c, err := cache.Retrieve(ctx)
	if err != nil || c.AccessKeyID != "AK" || c.SecretAccessKey != "first" || !c.CanExpire {
		t.Fatalf("first: %+v %v", c, err)
	}
	if err := os.WriteFile(file, []byte("second"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err := p.Retrieve(ctx); err != nil || c.SecretAccessKey != "second" || !c.Expires.Equal(now.Add(secretFileTTL)) {
		t.Fatalf("after the rotation: %+v %v, want the new secret, expiring in %s", c, err, secretFileTTL)
	}
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Retrieve(ctx); err == nil || !strings.Contains(err.Error(), file) {
		t.Errorf("an empty file: %v, want an error naming it", err)
	}
	p.file = filepath.Join(t.TempDir(), "missing")
	if _, err := p.Retrieve(ctx); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("a missing file: %v, want an error naming it", err)
	}
}
