package fs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
)

// fakeS3 is an S3 endpoint (path-style) that records the requests that
// create objects, PutObject and CreateMultipartUpload, with their headers,
// takes part uploads and completions, and refuses every request with
// AccessDenied when deny is set.
type fakeS3 struct {
	mu   sync.Mutex
	deny bool
	reqs []s3Request
}

type s3Request struct {
	op     string // PutObject, CreateMultipartUpload, UploadPart, CompleteMultipartUpload, AbortMultipartUpload
	path   string
	header http.Header
}

func (f *fakeS3) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	q := r.URL.Query()
	op := "?"
	switch {
	case r.Method == http.MethodPut && q.Has("uploadId"):
		op = "UploadPart"
	case r.Method == http.MethodPut:
		op = "PutObject"
	case r.Method == http.MethodPost && q.Has("uploads"):
		op = "CreateMultipartUpload"
	case r.Method == http.MethodPost && q.Has("uploadId"):
		op = "CompleteMultipartUpload"
	case r.Method == http.MethodDelete && q.Has("uploadId"):
		op = "AbortMultipartUpload"
	}
	f.mu.Lock()
	f.reqs = append(f.reqs, s3Request{op: op, path: r.URL.Path, header: r.Header.Clone()})
	deny := f.deny
	f.mu.Unlock()
	if deny {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message><RequestId>r1</RequestId></Error>`)
		return
	}
	switch op {
	case "PutObject", "UploadPart":
		w.Header().Set("ETag", `"etag"`)
	case "CreateMultipartUpload":
		fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><InitiateMultipartUploadResult><Bucket>b</Bucket><Key>k</Key><UploadId>up-1</UploadId></InitiateMultipartUploadResult>`)
	case "CompleteMultipartUpload":
		fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><CompleteMultipartUploadResult><Bucket>b</Bucket><Key>k</Key><ETag>"etag-2"</ETag></CompleteMultipartUploadResult>`)
	case "AbortMultipartUpload":
		w.WriteHeader(http.StatusNoContent)
	default:
		http.Error(w, "unexpected "+r.Method+" "+r.URL.String(), http.StatusBadRequest)
	}
}

func (f *fakeS3) requests(op string) []s3Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []s3Request
	for _, r := range f.reqs {
		if r.op == op {
			out = append(out, r)
		}
	}
	return out
}

// writeS3 writes size bytes to loc through s and commits them.
func writeS3(ctx context.Context, s *S3, loc string, size int) error {
	data := bytes.Repeat([]byte("s"), size)
	w, err := s.Create(ctx, loc, int64(size))
	if err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		w.Abort(ctx)
		return err
	}
	if err := w.Commit(ctx, crc32.Checksum(data, castagnoli)); err != nil {
		w.Abort(ctx)
		return err
	}
	return nil
}

const (
	sseHeader    = "X-Amz-Server-Side-Encryption"
	sseKeyHeader = "X-Amz-Server-Side-Encryption-Aws-Kms-Key-Id"
	aclHeader    = "X-Amz-Acl"
)

// TestS3ObjectSettingsSent checks that the configured SSE, KMS key and
// canned ACL go out on every request that creates an object: PutObject
// (a file smaller than a part) and CreateMultipartUpload (a larger one),
// and that nothing is sent that was not configured. The stack's S3 server
// accepts these headers but applies none of them, so only a fake can see
// them.
func TestS3ObjectSettingsSent(t *testing.T) {
	const key = "arn:aws:kms:eu-west-1:111122223333:key/0d1e2f"
	for _, tc := range []struct {
		name             string
		sse, kmsKey, acl string
		want             map[string]string // header -> value; "" must be absent
	}{
		{"SSE-KMS with a key and an ACL", SSEKMS, key, "bucket-owner-full-control",
			map[string]string{sseHeader: "aws:kms", sseKeyHeader: key, aclHeader: "bucket-owner-full-control"}},
		{"SSE-S3 only", SSES3, "", "", map[string]string{sseHeader: "AES256", sseKeyHeader: "", aclHeader: ""}},
		{"nothing configured", "", "", "", map[string]string{sseHeader: "", sseKeyHeader: "", aclHeader: ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := &fakeS3{}
			srv := httptest.NewServer(fake)
			defer srv.Close()
			s, err := NewS3(S3Config{Endpoint: srv.URL, AccessKey: "AKIDFAKE", SecretKey: "fake-secret", PathStyle: true,
				PartSize: MinS3PartSize, SSE: tc.sse, SSEKMSKeyID: tc.kmsKey, ACL: tc.acl})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if err := writeS3(ctx, s, "s3://b/small", 1000); err != nil {
				t.Fatal(err)
			}
			if err := writeS3(ctx, s, "s3://b/large", MinS3PartSize+7); err != nil {
				t.Fatal(err)
			}
			for _, op := range []string{"PutObject", "CreateMultipartUpload"} {
				reqs := fake.requests(op)
				if len(reqs) != 1 {
					t.Fatalf("%d %s requests, want 1", len(reqs), op)
				}
				for h, want := range tc.want {
					if got := reqs[0].header.Get(h); got != want {
						t.Errorf("%s %s: %s = %q, want %q", op, reqs[0].path, h, got, want)
					}
				}
			}
			if n := len(fake.requests("CompleteMultipartUpload")); n != 1 {
				t.Errorf("%d CompleteMultipartUpload requests, want 1", n)
			}
		})
	}
}

// TestS3ObjectSettingsRefused: S3 refusing (403 AccessDenied) a write
// that carries the configured settings fails it at once, with an error
// naming the settings, that copyd takes as permanent (it wraps
// os.ErrPermission, and the HTTP 403), for a PutObject and a
// CreateMultipartUpload alike; neither is sent twice.
func TestS3ObjectSettingsRefused(t *testing.T) {
	const key = "alias/dr-warehouse"
	fake := &fakeS3{deny: true}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	s, err := NewS3(S3Config{Endpoint: srv.URL, AccessKey: "AKIDFAKE", SecretKey: "fake-secret", PathStyle: true,
		PartSize: MinS3PartSize, SSE: SSEKMS, SSEKMSKeyID: key, ACL: "private"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		loc, op string
		size    int
	}{
		{"s3://b/small", "PutObject", 1000},
		{"s3://b/large", "CreateMultipartUpload", MinS3PartSize + 7},
	} {
		err := writeS3(ctx, s, tc.loc, tc.size)
		var se *S3SettingsError
		var sc interface{ HTTPStatusCode() int }
		switch {
		case !errors.As(err, &se):
			t.Errorf("%s: err = %v, want an *S3SettingsError", tc.op, err)
		case !strings.Contains(err.Error(), tc.loc) || !strings.Contains(err.Error(), "sse aws:kms, sse_kms_key_id "+key+", acl private") ||
			!strings.Contains(err.Error(), "AccessDenied"):
			t.Errorf("%s: %q does not name the location, the settings and S3's answer", tc.op, err)
		case !errors.Is(err, os.ErrPermission) || !errors.As(err, &sc) || sc.HTTPStatusCode() != http.StatusForbidden:
			t.Errorf("%s: %v does not wrap os.ErrPermission and the HTTP 403", tc.op, err)
		}
		if n := len(fake.requests(tc.op)); n != 1 {
			t.Errorf("%s sent %d times, want once (no retry of a refusal)", tc.op, n)
		}
	}

	// Without settings, a refusal is S3's own, not blamed on them.
	plain, err := NewS3(S3Config{Endpoint: srv.URL, AccessKey: "AKIDFAKE", SecretKey: "fake-secret", PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	err = writeS3(ctx, plain, "s3://b/plain", 10)
	var se *S3SettingsError
	if err == nil || errors.As(err, &se) || !strings.Contains(err.Error(), "AccessDenied") {
		t.Errorf("refused without settings: %v; want S3's AccessDenied, not a settings error", err)
	}
}
