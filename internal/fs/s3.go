package fs

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/hivedr/hivedr/internal/location"
)

// S3 is the FS of one S3 endpoint, for all the buckets it serves.
// Locations are s3://bucket/key (s3a:// and s3n:// are taken as s3://).
//
// Objects appear whole or not at all: a file smaller than a part is one
// PutObject, a larger one a multipart upload completed by Commit. Either
// way the caller's CRC32C goes with the final request as the object's
// full-object CRC32C, and the server refuses the write if the bytes it
// received do not have it.
//
// It is safe for concurrent use.
type S3 struct {
	client        *s3.Client
	partSize      int64
	partsInFlight int
	parts         sync.Pool // *[]byte of capacity partSize
	// put is what every object written gets: SSE and canned ACL.
	sse      types.ServerSideEncryption
	sseKeyID *string
	acl      types.ObjectCannedACL
}

var _ FS = (*S3)(nil)

// NewS3 returns the FS of the endpoint c describes. It does not connect.
func NewS3(c S3Config) (*S3, error) {
	c, err := c.withDefaults()
	if err != nil {
		return nil, err
	}
	opts := s3.Options{
		Region:       c.Region,
		UsePathStyle: c.PathStyle,
		HTTPClient:   &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()},
	}
	if c.Endpoint != "" {
		opts.BaseEndpoint = aws.String(c.Endpoint)
	}
	switch {
	case c.SecretKeyFile != "":
		opts.Credentials = aws.NewCredentialsCache(secretFileCredentials{accessKey: c.AccessKey, file: c.SecretKeyFile})
	case c.AccessKey != "":
		opts.Credentials = credentials.NewStaticCredentialsProvider(c.AccessKey, c.SecretKey, "")
	case c.Anonymous:
		opts.Credentials = aws.AnonymousCredentials{}
	default:
		if opts.Credentials, err = defaultCredentials(c); err != nil {
			return nil, err
		}
	}
	s, err := NewS3WithClient(s3.New(opts), c.PartSize, c.PartsInFlight)
	if err != nil {
		return nil, err
	}
	s.sse, s.acl = types.ServerSideEncryption(c.SSE), types.ObjectCannedACL(c.ACL)
	if c.SSEKMSKeyID != "" {
		s.sseKeyID = aws.String(c.SSEKMSKeyID)
	}
	return s, nil
}

// secretFileCredentials are an access key with its secret read from a
// file. They expire after secretFileTTL, so a credentials cache reads the
// file again then: a secret rotated in place is used within that time.
type secretFileCredentials struct {
	accessKey, file string
	now             func() time.Time // time.Now when nil
}

// secretFileTTL is how long a secret read from its file is used.
const secretFileTTL = time.Minute

// Retrieve reads the secret.
func (p secretFileCredentials) Retrieve(ctx context.Context) (aws.Credentials, error) {
	b, err := os.ReadFile(p.file)
	if err != nil {
		return aws.Credentials{}, fmt.Errorf("s3 secret_key_file: %w", err)
	}
	secret := strings.TrimSpace(string(b))
	if secret == "" {
		return aws.Credentials{}, fmt.Errorf("s3 secret_key_file %s: empty", p.file)
	}
	now := time.Now
	if p.now != nil {
		now = p.now
	}
	return aws.Credentials{AccessKeyID: p.accessKey, SecretAccessKey: secret, Source: "secret_key_file",
		CanExpire: true, Expires: now().Add(secretFileTTL)}, nil
}

// defaultCredentials is the AWS SDK's default credential chain for c
// (see S3Config.AccessKey), cached and refreshed before expiry. Loading it
// reads only the environment and the shared files; the credentials
// themselves are fetched on the first request, with its context.
func defaultCredentials(c S3Config) (aws.CredentialsProvider, error) {
	opts := []func(*awsconfig.LoadOptions) error{awsconfig.WithRegion(c.Region)}
	if c.Profile != "" {
		opts = append(opts, awsconfig.WithSharedConfigProfile(c.Profile))
	}
	cfg, err := awsconfig.LoadDefaultConfig(context.Background(), opts...)
	if err != nil {
		return nil, fmt.Errorf("s3 %s: AWS default credential chain: %w", c.Endpoint, err)
	}
	return cfg.Credentials, nil
}

// NewS3WithClient returns the FS of the endpoint client talks to, with
// the part size and parts in flight of S3Config (0 for their defaults).
func NewS3WithClient(client *s3.Client, partSize int64, partsInFlight int) (*S3, error) {
	c, err := S3Config{PartSize: partSize, PartsInFlight: partsInFlight}.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &S3{client: client, partSize: c.PartSize, partsInFlight: c.PartsInFlight}
	s.parts.New = func() any {
		b := make([]byte, 0, s.partSize)
		return &b
	}
	return s, nil
}

// s3Path splits loc into bucket and key.
func s3Path(loc string) (bucket, key string, err error) {
	l, err := location.Parse(loc)
	if err != nil {
		return "", "", err
	}
	if l.Scheme != location.SchemeS3 { // s3a and s3n parse as s3
		return "", "", fmt.Errorf("location %s is not an s3:// location", loc)
	}
	key = strings.TrimPrefix(l.Path, "/")
	if key == "" {
		return "", "", fmt.Errorf("location %s: want s3://bucket/key", loc)
	}
	return l.Authority, key, nil
}

// apiCode returns the S3 error code of err, or "".
func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func isNotFound(err error) bool {
	var nf *types.NotFound
	var nk *types.NoSuchKey
	return errors.As(err, &nf) || errors.As(err, &nk) || apiCode(err) == "NotFound" || apiCode(err) == "NoSuchKey"
}

func s3Error(op, loc string, err error) error {
	if isNotFound(err) {
		return fmt.Errorf("%s %s: %w", op, loc, ErrNotExist)
	}
	return fmt.Errorf("%s %s: %w", op, loc, err)
}

// Stat implements FS.
func (s *S3) Stat(ctx context.Context, loc string) (FileInfo, error) {
	bucket, key, err := s3Path(loc)
	if err != nil {
		return FileInfo{}, err
	}
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &bucket, Key: &key})
	if err != nil {
		return FileInfo{}, s3Error("stat", loc, err)
	}
	return FileInfo{Size: aws.ToInt64(out.ContentLength), ModTime: aws.ToTime(out.LastModified)}, nil
}

// Open implements FS with a ranged GetObject.
func (s *S3) Open(ctx context.Context, loc string, off, n int64) (io.ReadCloser, error) {
	bucket, key, err := s3Path(loc)
	if err != nil {
		return nil, err
	}
	if off < 0 {
		return nil, fmt.Errorf("open %s: negative offset %d", loc, off)
	}
	in := &s3.GetObjectInput{Bucket: &bucket, Key: &key}
	switch {
	case n == 0:
		// An empty range cannot be asked for; check the object exists.
		if _, err := s.Stat(ctx, loc); err != nil {
			return nil, err
		}
		return io.NopCloser(strings.NewReader("")), nil
	case n > 0:
		in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", off, off+n-1))
	case off > 0:
		in.Range = aws.String(fmt.Sprintf("bytes=%d-", off))
	}
	out, err := s.client.GetObject(ctx, in)
	if err != nil {
		if apiCode(err) == "InvalidRange" {
			// The range starts at or past the end (an empty object has
			// no byte 0): nothing to read, if the object is there.
			if _, err := s.Stat(ctx, loc); err != nil {
				return nil, err
			}
			return io.NopCloser(strings.NewReader("")), nil
		}
		return nil, s3Error("open", loc, err)
	}
	return out.Body, nil
}

// Checksum implements FS: the object's full-object CRC32C, as stored with
// it. ok is false for an object stored without one, or with a composite
// CRC32C of its parts ("<crc>-<parts>"), which is not the CRC32C of the
// whole object.
func (s *S3) Checksum(ctx context.Context, loc string) (Checksum, bool, error) {
	bucket, key, err := s3Path(loc)
	if err != nil {
		return Checksum{}, false, err
	}
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{
		Bucket: &bucket, Key: &key, ChecksumMode: types.ChecksumModeEnabled,
	})
	if err != nil {
		return Checksum{}, false, s3Error("checksum", loc, err)
	}
	v := aws.ToString(out.ChecksumCRC32C)
	if v == "" || out.ChecksumType == types.ChecksumTypeComposite || strings.Contains(v, "-") {
		return Checksum{}, false, nil
	}
	if out.ChecksumType != "" && out.ChecksumType != types.ChecksumTypeFullObject {
		return Checksum{}, false, nil
	}
	crc, err := decodeCRC32C(v)
	if err != nil {
		return Checksum{}, false, fmt.Errorf("checksum %s: %w", loc, err)
	}
	return Checksum{CRC32C: crc, Source: "s3-full-object-crc32c"}, true, nil
}

// encodeCRC32C is the x-amz-checksum-crc32c form of crc: base64 of its
// four big-endian bytes.
func encodeCRC32C(crc uint32) string {
	return base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint32(nil, crc))
}

func decodeCRC32C(s string) (uint32, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != 4 {
		return 0, fmt.Errorf("CRC32C %q is not base64 of 4 bytes", s)
	}
	return binary.BigEndian.Uint32(b), nil
}

// isChecksumRefusal reports whether err is the server refusing a write
// because the bytes do not have the checksum sent with them.
func isChecksumRefusal(err error) bool {
	switch apiCode(err) {
	case "BadDigest", "InvalidDigest", "XAmzContentChecksumMismatch":
		return true
	}
	return false
}

// Create implements FS. A file smaller than a part is one PutObject at
// Commit, and nothing is sent before. A larger one is a multipart upload,
// started by Create when size says so (else when the first part is full).
// size, when known, sizes the buffer of a small file and the parts of a
// huge one.
// ctx bounds the whole write: the part uploads run under it until Commit
// or Abort.
func (s *S3) Create(ctx context.Context, loc string, size int64) (Writer, error) {
	bucket, key, err := s3Path(loc)
	if err != nil {
		return nil, err
	}
	partSize := s.partSizeFor(size)
	w := &s3Writer{
		fs: s, loc: loc, bucket: bucket, key: key, partSize: partSize,
		sem: make(chan struct{}, s.partsInFlight),
	}
	w.ctx, w.cancel = context.WithCancel(ctx)
	if size >= 0 && size < partSize {
		w.buf = make([]byte, 0, size)
		return w, nil
	}
	if size >= 0 {
		// Known to need a multipart upload: start it now, so Staging names
		// it before a byte is written and a caller can record it for the
		// cleanup after a crash.
		id, err := s.createUpload(w.ctx, loc, bucket, key)
		if err != nil {
			w.cancel()
			return nil, err
		}
		w.uploadID = id
	}
	w.buf = w.getBuf()
	return w, nil
}

// s3Writer buffers a part's worth of bytes, uploads full parts in the
// background (at most partsInFlight at once) and completes the object on
// Commit.
//
// Write, Commit and Abort are called from one goroutine; the part uploads
// report back under mu.
type s3Writer struct {
	fs          *S3
	loc         string
	bucket, key string
	partSize    int64
	written     int64
	buf         []byte

	// ctx bounds the part uploads: it ends with Create's context or Abort.
	ctx    context.Context
	cancel context.CancelFunc
	sem    chan struct{} // a token per part uploading
	wg     sync.WaitGroup

	uploadID  string
	nparts    int32
	done      bool // committed or aborted
	committed bool
	crc       uint32 // the full-object CRC32C the server checked, once committed

	mu    sync.Mutex
	parts []types.CompletedPart // by part number - 1
	err   error                 // the first part upload's failure
}

func (w *s3Writer) getBuf() []byte {
	if w.partSize != w.fs.partSize {
		return make([]byte, 0, w.partSize)
	}
	return (*w.fs.parts.Get().(*[]byte))[:0]
}

func (w *s3Writer) putBuf(b []byte) {
	if int64(cap(b)) == w.fs.partSize {
		b = b[:0]
		w.fs.parts.Put(&b)
	}
}

func (w *s3Writer) uploadErr() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

func (w *s3Writer) Write(p []byte) (int, error) {
	if w.done {
		return 0, fmt.Errorf("write %s: writer is closed", w.loc)
	}
	n := 0
	for len(p) > 0 {
		k := min(len(p), int(w.partSize)-len(w.buf))
		w.buf = append(w.buf, p[:k]...)
		p, n = p[k:], n+k
		w.written += int64(k)
		if int64(len(w.buf)) == w.partSize {
			if err := w.flushPart(); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// flushPart starts uploading the buffer as the next part, starting the
// multipart upload first if need be, and waits while partsInFlight parts
// are already uploading.
func (w *s3Writer) flushPart() error {
	if err := w.uploadErr(); err != nil {
		return err
	}
	if w.uploadID == "" {
		id, err := w.fs.createUpload(w.ctx, w.loc, w.bucket, w.key)
		if err != nil {
			return err
		}
		w.uploadID = id
	}
	if w.nparts == maxS3Parts {
		return fmt.Errorf("write %s: more than %d parts of %d bytes", w.loc, maxS3Parts, w.partSize)
	}
	select {
	case w.sem <- struct{}{}:
	case <-w.ctx.Done():
		return fmt.Errorf("write %s: %w", w.loc, w.ctx.Err())
	}
	w.nparts++
	num, body := w.nparts, w.buf
	w.buf = w.getBuf()
	w.mu.Lock()
	w.parts = append(w.parts, types.CompletedPart{})
	w.mu.Unlock()
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer func() { <-w.sem }()
		part, err := w.uploadPart(num, body)
		w.putBuf(body)
		w.mu.Lock()
		defer w.mu.Unlock()
		if err != nil {
			if w.err == nil {
				w.err = err
			}
			return
		}
		w.parts[num-1] = part
	}()
	return nil
}

func (w *s3Writer) uploadPart(num int32, body []byte) (types.CompletedPart, error) {
	return w.fs.uploadPart(w.ctx, w.loc, w.bucket, w.key, w.uploadID, num, body)
}

// uploadPart uploads body as part num of the upload, with its CRC32C for
// the server to check.
func (s *S3) uploadPart(ctx context.Context, loc, bucket, key, uploadID string, num int32, body []byte) (types.CompletedPart, error) {
	sum := encodeCRC32C(crc32.Checksum(body, castagnoli))
	out, err := s.client.UploadPart(ctx, &s3.UploadPartInput{
		Bucket: &bucket, Key: &key, UploadId: &uploadID,
		PartNumber:        aws.Int32(num),
		Body:              bytes.NewReader(body),
		ContentLength:     aws.Int64(int64(len(body))),
		ChecksumAlgorithm: types.ChecksumAlgorithmCrc32c,
		ChecksumCRC32C:    &sum,
	})
	if err != nil {
		return types.CompletedPart{}, fmt.Errorf("write %s: upload part %d: %w", loc, num, err)
	}
	return types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(num), ChecksumCRC32C: &sum}, nil
}

// createUpload starts a multipart upload whose object will carry a
// FULL_OBJECT CRC32C, and returns its ID.
func (s *S3) createUpload(ctx context.Context, loc, bucket, key string) (string, error) {
	out, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket: &bucket, Key: &key,
		ChecksumAlgorithm:    types.ChecksumAlgorithmCrc32c,
		ChecksumType:         types.ChecksumTypeFullObject,
		ServerSideEncryption: s.sse, SSEKMSKeyId: s.sseKeyID, ACL: s.acl,
	})
	if err != nil {
		return "", s.writeError(loc, "create multipart upload", err)
	}
	return aws.ToString(out.UploadId), nil
}

// settings names the object settings every write carries (sse,
// sse_kms_key_id, acl), "" for none.
func (s *S3) settings() string {
	var parts []string
	if s.sse != "" {
		parts = append(parts, "sse "+string(s.sse))
	}
	if s.sseKeyID != nil {
		parts = append(parts, "sse_kms_key_id "+*s.sseKeyID)
	}
	if s.acl != "" {
		parts = append(parts, "acl "+string(s.acl))
	}
	return strings.Join(parts, ", ")
}

// writeError wraps err, S3's answer to op (a PutObject or a
// CreateMultipartUpload of loc). A refusal (AccessDenied, HTTP 403) of a
// write that carried object settings is an *S3SettingsError naming them.
func (s *S3) writeError(loc, op string, err error) error {
	if set := s.settings(); set != "" && isAccessDenied(err) {
		return &S3SettingsError{Location: loc, Op: op, Settings: set, Err: err}
	}
	return fmt.Errorf("write %s: %s: %w", loc, op, err)
}

// isAccessDenied reports whether err is S3 refusing a request: error code
// AccessDenied, or HTTP 403.
func isAccessDenied(err error) bool {
	var sc interface{ HTTPStatusCode() int }
	return apiCode(err) == "AccessDenied" || errors.As(err, &sc) && sc.HTTPStatusCode() == http.StatusForbidden
}

// S3SettingsError is S3 refusing a write that carried the configured
// object settings (filesystems.s3[].sse, sse_kms_key_id, acl): the
// credentials may not use the KMS key, or set the ACL (or may not write
// the bucket at all). Retrying cannot help; it wraps os.ErrPermission too.
type S3SettingsError struct {
	Location, Op, Settings string
	Err                    error
}

func (e *S3SettingsError) Error() string {
	return fmt.Sprintf("write %s: %s: S3 refused the write, which carries filesystems.s3[] %s: "+
		"the credentials may not use these settings (SSE-KMS needs kms:GenerateDataKey on the key, an acl s3:PutObjectAcl) "+
		"or may not write the bucket: %v", e.Location, e.Op, e.Settings, e.Err)
}

func (e *S3SettingsError) Unwrap() []error { return []error{e.Err, os.ErrPermission} }

// partSizeFor returns the part size for an object of size bytes (-1:
// unknown): the configured one, grown to whole MiB when 10,000 parts of it
// would not hold size.
func (s *S3) partSizeFor(size int64) int64 {
	partSize := s.partSize
	if size > partSize*maxS3Parts {
		partSize = ((size+maxS3Parts-1)/maxS3Parts + 1<<20 - 1) &^ (1<<20 - 1)
	}
	return partSize
}

// Commit implements Writer. Invariant: the object appears only through
// the one request that carries the caller's CRC32C as its full-object
// checksum (PutObject, or CompleteMultipartUpload with ChecksumType
// FULL_OBJECT), so the server publishes it only if its bytes have that
// CRC32C. A refusal is a *ChecksumError. After a failed Commit, Abort
// cleans up.
func (w *s3Writer) Commit(ctx context.Context, crc32c uint32) error {
	if w.done {
		return fmt.Errorf("commit %s: writer is closed", w.loc)
	}
	sum := encodeCRC32C(crc32c)
	if w.uploadID == "" {
		_, err := w.fs.client.PutObject(ctx, &s3.PutObjectInput{
			Bucket: &w.bucket, Key: &w.key,
			Body:                 bytes.NewReader(w.buf),
			ContentLength:        aws.Int64(int64(len(w.buf))),
			ChecksumAlgorithm:    types.ChecksumAlgorithmCrc32c,
			ChecksumCRC32C:       &sum,
			ServerSideEncryption: w.fs.sse, SSEKMSKeyId: w.fs.sseKeyID, ACL: w.fs.acl,
		})
		if err != nil {
			return w.commitError(crc32c, err)
		}
		w.finish()
		w.committed, w.crc = true, crc32c
		return nil
	}
	if len(w.buf) > 0 {
		if err := w.flushPart(); err != nil {
			return err
		}
	}
	w.wg.Wait()
	if err := w.uploadErr(); err != nil {
		return err
	}
	_, err := w.fs.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: &w.bucket, Key: &w.key, UploadId: &w.uploadID,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: w.parts},
		ChecksumCRC32C:  &sum,
		ChecksumType:    types.ChecksumTypeFullObject,
		MpuObjectSize:   aws.Int64(w.written),
	})
	if err != nil {
		return w.commitError(crc32c, err)
	}
	w.finish()
	w.committed, w.crc = true, crc32c
	return nil
}

// Verified implements Writer: the server published the object only because
// its bytes had the full-object CRC32C the commit carried.
func (w *s3Writer) Verified() (Checksum, bool) {
	if !w.committed {
		return Checksum{}, false
	}
	return Checksum{CRC32C: w.crc, Source: "s3-full-object-crc32c"}, true
}

func (w *s3Writer) commitError(crc32c uint32, err error) error {
	if isChecksumRefusal(err) {
		return &ChecksumError{Location: w.loc, Want: crc32c, Detail: "refused by S3: " + err.Error()}
	}
	if w.uploadID == "" && isAccessDenied(err) && w.fs.settings() != "" {
		return w.fs.writeError(w.loc, "put object", err)
	}
	return fmt.Errorf("commit %s: %w", w.loc, err)
}

// finish releases the writer's resources.
func (w *s3Writer) finish() {
	w.done = true
	w.cancel()
	w.wg.Wait()
	w.putBuf(w.buf)
	w.buf = nil
}

// Abort implements Writer: it stops the part uploads and aborts the
// multipart upload, if one was started. It may follow a failed Commit,
// and does nothing after a successful one.
func (w *s3Writer) Abort(ctx context.Context) error {
	if w.done {
		return nil
	}
	w.finish()
	if w.uploadID == "" {
		return nil
	}
	return w.fs.abortUpload(ctx, w.loc, w.bucket, w.key, w.uploadID)
}

// Staging implements Writer: the multipart upload ID, or "" while there is
// none (a file smaller than a part; or of unknown size, before its first
// part is full): nothing is stored before then.
func (w *s3Writer) Staging() string { return w.uploadID }

func (s *S3) abortUpload(ctx context.Context, loc, bucket, key, uploadID string) error {
	_, err := s.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{
		Bucket: &bucket, Key: &key, UploadId: &uploadID,
	})
	var nu *types.NoSuchUpload
	if err != nil && !errors.As(err, &nu) && apiCode(err) != "NoSuchUpload" {
		return fmt.Errorf("abort upload %s of %s: %w", uploadID, loc, err)
	}
	return nil
}

// Remove implements FS.
func (s *S3) Remove(ctx context.Context, loc string) error {
	bucket, key, err := s3Path(loc)
	if err != nil {
		return err
	}
	if _, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: &key}); err != nil && !isNotFound(err) {
		return fmt.Errorf("remove %s: %w", loc, err)
	}
	return nil
}

// Discard implements FS: it aborts the multipart upload staging of loc.
// An upload already completed or aborted is not an error; an upload ID of
// another key is not found, so Discard cannot touch another object.
func (s *S3) Discard(ctx context.Context, loc, staging string) error {
	if staging == "" {
		return nil
	}
	bucket, key, err := s3Path(loc)
	if err != nil {
		return err
	}
	return s.abortUpload(ctx, loc, bucket, key, staging)
}

// Walk calls fn with the location and size of every object under the
// "directory" loc (the prefix loc + "/"), in key order, skipping staging
// names. A prefix with no objects is an error wrapping ErrNotExist, as a
// missing directory is elsewhere.
func (s *S3) Walk(ctx context.Context, loc string, fn func(location string, size int64) error) error {
	bucket, key, err := s3Path(loc)
	if err != nil {
		return err
	}
	// Whole path segments only: the prefix of d is "d/", never "d".
	prefix := strings.Trim(key, "/")
	if prefix != "" {
		prefix += "/"
	}
	in := &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: &prefix}
	found := false
	for p := s3.NewListObjectsV2Paginator(s.client, in); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			return s3Error("list", loc, err)
		}
		for _, o := range page.Contents {
			found = true
			k := aws.ToString(o.Key)
			if strings.HasSuffix(k, "/") || IsStagingName(path.Base(k)) {
				continue // a directory marker, or a write in progress
			}
			if err := fn("s3://"+bucket+"/"+k, aws.ToInt64(o.Size)); err != nil {
				return err
			}
		}
	}
	if !found {
		return fmt.Errorf("list %s: %w", loc, ErrNotExist)
	}
	return nil
}
