package fs

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/colinmarc/hdfs/v2"

	"github.com/hivedr/hivedr/internal/hdfscrc"
	"github.com/hivedr/hivedr/internal/krb"
	"github.com/hivedr/hivedr/internal/location"
	"github.com/hivedr/hivedr/internal/webhdfs"
)

// HDFS is the FS of one HDFS cluster. Data moves through the native
// protocol (colinmarc/hdfs); checksums are COMPOSITE-CRC32Cs read from the
// DataNodes (internal/hdfscrc), which do not depend on the block size.
//
// Locations are hdfs://<authority>/path, the authority being the one the
// cluster was configured with in any spelling of it (compared in canonical
// form: hdfs://nn/p and hdfs://NN:8020/p are one location), or bare
// absolute paths on this cluster. Locations it returns are canonical.
//
// The native client takes no contexts: a context is checked before each
// NameNode call, and its deadline bounds DataNode reads and writes.
// NameNode calls are not interrupted by a cancelled context.
//
// It is safe for concurrent use. It connects to the NameNode on first use
// and after a failed attempt tries again on the next call; on a kerberized
// cluster it connects again after a new login of its principal (a rotated
// key), the files open on the old connection finishing on it.
type HDFS struct {
	authority string // canonical (location.CanonicalAuthority)
	user      string // who the NameNode sees: the user, or the Kerberos principal
	opts      hdfs.ClientOptions
	crc       *hdfscrc.Client
	web       *webhdfs.Client
	hc        *http.Client
	// concat: write large files as ranges joined with CONCAT (CreateSplit);
	// noConcat: the NameNode refused CONCAT, so stop trying.
	concat   bool
	noConcat atomic.Bool
	// marksOff: the NameNode refuses extended attributes (mark.go).
	marksOff atomic.Bool

	// kc is the principal of a kerberized cluster. The native client keeps
	// the gokrb5 client it was made with for every NameNode connection it
	// makes, so when kc logs in again (a new generation: a rotated key) the
	// next call makes a new native client with the new login.
	kc *krb.Client

	mu      sync.Mutex
	client  *hdfs.Client
	krbGen  uint64         // kc's generation client was made with
	retired []*hdfs.Client // made with an older login; files may still be open on them
}

var _ FS = (*HDFS)(nil)

// NewHDFS returns the FS of the cluster c describes. It does not connect.
// A kerberized cluster (c.NameNodePrincipal) needs c.Kerberos.
func NewHDFS(c HDFSConfig) (*HDFS, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	auth, err := c.authority()
	if err != nil {
		return nil, err
	}
	hc, err := c.httpClient()
	if err != nil {
		return nil, err
	}
	h := &HDFS{
		authority: auth,
		user:      c.User,
		opts: hdfs.ClientOptions{Addresses: c.NameNodes, User: c.User,
			DataTransferProtection: c.DataTransferProtection},
		crc:    hdfscrc.New(c.WebHDFS, c.User, hc),
		web:    webhdfs.New(c.WebHDFS, c.User, hc),
		concat: c.Concat,
		hc:     hc,
	}
	h.crc.DataTransferProtection = c.DataTransferProtection
	h.crc.EncryptionKey = h.encryptionKey
	if c.NameNodePrincipal != "" {
		// colinmarc/hdfs puts each NameNode's host in for _HOST and takes
		// the service's realm from krb5.conf, so the pattern goes without
		// its @REALM.
		spn, _, _ := strings.Cut(c.NameNodePrincipal, "@")
		h.kc = c.Kerberos
		h.opts.KerberosServicePrincipleName = spn
		h.user = c.Kerberos.Principal()
	}
	return h, nil
}

// httpClient returns the client WebHDFS requests go through: trusting
// c.CAFile for https, authenticating with SPNEGO on a kerberized cluster;
// nil (http.DefaultClient) when neither applies.
func (c HDFSConfig) httpClient() (*http.Client, error) {
	if c.CAFile == "" && c.NameNodePrincipal == "" {
		return nil, nil
	}
	base := http.DefaultTransport.(*http.Transport).Clone()
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca_file: %s holds no PEM certificate", c.CAFile)
		}
		base.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	var rt http.RoundTripper = base
	if c.NameNodePrincipal != "" {
		if c.Kerberos == nil {
			return nil, fmt.Errorf("namenode_principal: %s needs kerberos.principal and kerberos.keytab (hivedr's own principal)", c.NameNodePrincipal)
		}
		spn := c.HTTPPrincipal
		if spn == "" {
			spn = DefaultHTTPPrincipal
		}
		rt = &krb.Transport{Base: base, Client: c.Kerberos, SPN: spn}
	}
	return &http.Client{Transport: rt}, nil
}

// DefaultHTTPPrincipal is HDFSConfig.HTTPPrincipal's default.
const DefaultHTTPPrincipal = "HTTP/_HOST"

// HTTPClient returns the client the cluster's WebHDFS requests go through
// (TLS roots, SPNEGO); nil means http.DefaultClient.
func (h *HDFS) HTTPClient() *http.Client { return h.hc }

// Close closes the connection to the NameNode, if any. Files still being
// written lose their lease.
func (h *HDFS) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	var errs []error
	for _, c := range h.retired {
		errs = append(errs, c.Close())
	}
	h.retired = nil
	if h.client != nil {
		errs = append(errs, h.client.Close())
		h.client = nil
	}
	return errors.Join(errs...)
}

// conn returns the native client, connecting on first use.
func (h *HDFS) conn(ctx context.Context) (*hdfs.Client, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	opts := h.opts
	var gen uint64
	if h.kc != nil {
		kcl, g, err := h.kc.Current()
		switch {
		case err != nil && h.client != nil:
			// Its NameNode connection is authenticated already: keep
			// using it while no login can be had (the KDC away).
			return h.client, nil
		case err != nil:
			return nil, fmt.Errorf("connect to hdfs://%s: %w", h.authority, err)
		case h.client != nil && g != h.krbGen:
			// Files open on it keep using it; Close closes it.
			h.retired = append(h.retired, h.client)
			h.client = nil
		}
		opts.KerberosClient, gen = kcl, g
	}
	if h.client != nil {
		return h.client, nil
	}
	c, err := hdfs.NewClient(opts)
	if err != nil {
		return nil, fmt.Errorf("connect to hdfs://%s (namenodes %s): %w", h.authority, strings.Join(h.opts.Addresses, ","), err)
	}
	h.client, h.krbGen = c, gen
	return c, nil
}

// encryptionKey returns the NameNode's data encryption key, which the
// checksum client authenticates to DataNodes with on a cluster with
// dfs.encrypt.data.transfer; nil on one without.
func (h *HDFS) encryptionKey(ctx context.Context) (*hdfscrc.DataEncryptionKey, error) {
	c, err := h.conn(ctx)
	if err != nil {
		return nil, err
	}
	k, err := c.DataEncryptionKey()
	if err != nil || k == nil {
		return nil, err
	}
	return &hdfscrc.DataEncryptionKey{KeyID: k.KeyID, BlockPoolID: k.BlockPoolID, Nonce: k.Nonce, Key: k.Key}, nil
}

// path returns the cluster path of loc, refusing another cluster's.
func (h *HDFS) path(loc string) (string, error) {
	l, err := location.Parse(loc)
	if err != nil {
		return "", err
	}
	if !l.IsLocal() && (l.Scheme != location.SchemeHDFS || l.Authority != h.authority) {
		return "", fmt.Errorf("location %s is not on hdfs://%s", loc, h.authority)
	}
	return l.Path, nil
}

// location returns the full location of the cluster path p, canonical.
func (h *HDFS) location(p string) string { return "hdfs://" + h.authority + p }

// hdfsError wraps err from an operation on loc, wrapping ErrNotExist when
// the file is missing.
func hdfsError(op, loc string, err error) error {
	var re *webhdfs.RemoteError
	if errors.Is(err, os.ErrNotExist) || errors.As(err, &re) && re.Exception == "FileNotFoundException" {
		return fmt.Errorf("%s %s: %w", op, loc, ErrNotExist)
	}
	return fmt.Errorf("%s %s: %w", op, loc, err)
}

// Stat implements FS.
func (h *HDFS) Stat(ctx context.Context, loc string) (FileInfo, error) {
	p, err := h.path(loc)
	if err != nil {
		return FileInfo{}, err
	}
	c, err := h.conn(ctx)
	if err != nil {
		return FileInfo{}, fmt.Errorf("stat %s: %w", loc, err)
	}
	fi, err := c.Stat(p)
	if err != nil {
		return FileInfo{}, hdfsError("stat", loc, err)
	}
	return statInfo(fi), nil
}

// Open implements FS.
func (h *HDFS) Open(ctx context.Context, loc string, off, n int64) (io.ReadCloser, error) {
	p, err := h.path(loc)
	if err != nil {
		return nil, err
	}
	if off < 0 {
		return nil, fmt.Errorf("open %s: negative offset %d", loc, off)
	}
	c, err := h.conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", loc, err)
	}
	f, err := c.Open(p)
	if err != nil {
		return nil, hdfsError("open", loc, err)
	}
	if f.Stat().IsDir() {
		f.Close()
		return nil, fmt.Errorf("open %s: is a directory", loc)
	}
	if d, ok := ctx.Deadline(); ok {
		f.SetDeadline(d)
	}
	if off > f.Stat().Size() {
		off = f.Stat().Size()
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("open %s: seek to %d: %w", loc, off, err)
	}
	var r io.Reader = f
	if n >= 0 {
		r = io.LimitReader(f, n)
	}
	return &readCloser{Reader: ctxReader{ctx, r}, Closer: f}, nil
}

// Checksum implements FS: the file's COMPOSITE-CRC32C, which the DataNodes
// derive from the chunk CRCs they store, without the data crossing the
// network. A file still being written is an error.
func (h *HDFS) Checksum(ctx context.Context, loc string) (Checksum, bool, error) {
	p, err := h.path(loc)
	if err != nil {
		return Checksum{}, false, err
	}
	crc, _, err := h.crc.FileCRC32C(ctx, p)
	if err != nil {
		return Checksum{}, false, hdfsError("checksum", loc, err)
	}
	return Checksum{CRC32C: crc, Source: "hdfs-composite-crc"}, true, nil
}

// FileChecksum returns the file's checksum as the metastore logs it in
// events when change management is on: the hex of the HDFS FileChecksum
// (MD5-of-MD5-of-CRC32C, which depends on the block size), that is, what
// WebHDFS GETFILECHECKSUM answers, cut to its stated length. copyd compares
// it with an event's checksum to tell whether the source still holds the
// bytes the event saw.
func (h *HDFS) FileChecksum(ctx context.Context, loc string) (string, bool, error) {
	p, err := h.path(loc)
	if err != nil {
		return "", false, err
	}
	sum, err := h.web.GetFileChecksum(ctx, p)
	if err != nil {
		return "", false, hdfsError("file checksum", loc, err)
	}
	n := int(sum.Length)
	if n <= 0 || n > len(sum.Bytes) {
		return "", false, fmt.Errorf("file checksum of %s: %d bytes stated, %d given", loc, sum.Length, len(sum.Bytes))
	}
	return hex.EncodeToString(sum.Bytes[:n]), true, nil
}

// Create implements FS. The file is written to a new staging file beside
// the target, with the cluster's default block size and replication.
// ctx's deadline, if any, bounds the writes to the DataNodes.
func (h *HDFS) Create(ctx context.Context, loc string, size int64) (Writer, error) {
	staging, err := h.StagingFor(loc)
	if err != nil {
		return nil, err
	}
	return h.CreateStaged(ctx, loc, staging, size)
}

// StagingFor implements StagedCreator: the location of a new staging file
// beside loc. Nothing is created.
func (h *HDFS) StagingFor(loc string) (string, error) {
	p, err := h.path(loc)
	if err != nil {
		return "", err
	}
	dir, base := path.Split(p)
	if base == "" {
		return "", fmt.Errorf("create %s: no file name", loc)
	}
	name, err := stagingName(base)
	if err != nil {
		return "", err
	}
	return h.location(dir + name), nil
}

// CreateStaged implements StagedCreator: Create, writing to staging, a
// staging location of loc that StagingFor returned.
func (h *HDFS) CreateStaged(ctx context.Context, loc, staging string, size int64) (Writer, error) {
	p, err := h.path(loc)
	if err != nil {
		return nil, err
	}
	sp, err := h.path(staging)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", loc, err)
	}
	if !isStagingFor(p, sp) {
		return nil, fmt.Errorf("create %s: %s is not one of its staging files", loc, staging)
	}
	c, err := h.conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", loc, err)
	}
	if err := c.MkdirAll(path.Dir(p), 0o755); err != nil {
		return nil, fmt.Errorf("create %s: make parent directories: %w", loc, err)
	}
	// Create fails when the name exists, so a staging file is always new.
	f, err := c.Create(sp)
	if err != nil {
		return nil, fmt.Errorf("create %s: staging file %s: %w", loc, sp, err)
	}
	if d, ok := ctx.Deadline(); ok {
		f.SetDeadline(d)
	}
	return &hdfsWriter{fs: h, c: c, loc: loc, path: p, staging: sp, f: f}, nil
}

// hdfsWriter writes a staging file and renames it into place.
type hdfsWriter struct {
	fs            *HDFS
	c             *hdfs.Client
	loc           string
	path, staging string
	f             *hdfs.FileWriter
	closed        bool // the staging file is complete (or abandoned)
	done          bool // committed or aborted
	committed     bool
	crc           uint32 // the staging file's COMPOSITE-CRC32C, once committed
	meta          Meta   // set on the staging file before the rename
	event         int64  // EventMarkAttr, set on the staging file before the rename
}

// SetMeta implements MetaSetter.
func (w *hdfsWriter) SetMeta(m Meta) { w.meta = m }

// MarkEvent implements EventMarkWriter.
func (w *hdfsWriter) MarkEvent(id int64) { w.event = id }

func (w *hdfsWriter) Write(p []byte) (int, error) {
	if w.closed {
		return 0, fmt.Errorf("write %s: writer is closed", w.loc)
	}
	if len(p) == 0 {
		return 0, nil // the native writer would start a block for nothing
	}
	n, err := w.f.Write(p)
	if err != nil {
		return n, fmt.Errorf("write %s (staging %s): %w", w.loc, w.staging, err)
	}
	return n, nil
}

// Commit implements Writer. Invariant: the staging file is renamed over
// the target only after it is complete on the NameNode and the
// COMPOSITE-CRC32C its DataNodes report equals the caller's CRC32C, so
// the target never holds bytes other than those the caller checksummed.
// The rename is the NameNode's rename2 with OVERWRITE (what
// colinmarc/hdfs's Rename sends): it replaces an existing target in one
// step, so readers see the old file or the new one, never neither.
func (w *hdfsWriter) Commit(ctx context.Context, crc32c uint32) error {
	if w.done {
		return fmt.Errorf("commit %s: writer is closed", w.loc)
	}
	if err := w.close(ctx); err != nil {
		return err
	}
	got, _, err := w.fs.crc.FileCRC32C(ctx, w.staging)
	if err != nil {
		return fmt.Errorf("commit %s: checksum of staging file %s: %w", w.loc, w.staging, err)
	}
	if got != crc32c {
		return &ChecksumError{Location: w.loc, Want: crc32c, Got: got, HasGot: true,
			Detail: "COMPOSITE-CRC32C of staging file " + w.staging}
	}
	if err := w.fs.setMeta(ctx, w.c, w.loc, w.staging, w.meta, metaStaging); err != nil {
		return err
	}
	if err := w.fs.setMark(w.c, w.loc, w.staging, w.event); err != nil {
		return fmt.Errorf("commit %s: %w", w.loc, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("commit %s: %w", w.loc, err)
	}
	if err := w.c.Rename(w.staging, w.path); err != nil {
		return fmt.Errorf("commit %s: rename %s into place: %w", w.loc, w.staging, err)
	}
	w.done, w.committed, w.crc = true, true, got
	return nil
}

// Verified implements Writer: the COMPOSITE-CRC32C the DataNodes reported
// for the staging file that became the target.
func (w *hdfsWriter) Verified() (Checksum, bool) {
	if !w.committed {
		return Checksum{}, false
	}
	return Checksum{CRC32C: w.crc, Source: "hdfs-composite-crc"}, true
}

// close completes the staging file.
func (w *hdfsWriter) close(ctx context.Context) error {
	if w.closed {
		return nil
	}
	if err := closeFile(ctx, w.f); err != nil {
		return fmt.Errorf("commit %s: close staging file %s: %w", w.loc, w.staging, err)
	}
	w.closed = true
	return nil
}

// closeFile completes a file being written, retrying while the NameNode
// waits for the last block's minimum replication, as Hadoop's client
// does, for at most replicationWait: a block the NameNode never counts
// (its DataNode's report lost) would hold the copy for good. The error
// then is transient: the copy is tried again from the start, into a new
// staging file.
func closeFile(ctx context.Context, f *hdfs.FileWriter) error {
	wait := 50 * time.Millisecond
	deadline := time.Now().Add(replicationWait)
	for {
		err := f.Close()
		if err == nil {
			return nil
		}
		if !hdfs.IsErrReplicating(err) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the NameNode still waits for the last block's minimum replication after %s: %w", replicationWait, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("still replicating: %w", ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// replicationWait bounds closeFile's wait for the last block's minimum
// replication: five times what Hadoop's client waits by default (five
// retries from 400 ms, doubling: about 12 s).
const replicationWait = time.Minute

// Abort implements Writer: it deletes the staging file, finished or not.
// It may follow a failed Commit, and does nothing after a successful one.
func (w *hdfsWriter) Abort(ctx context.Context) error {
	if w.done {
		return nil
	}
	if !w.closed {
		// Closing releases the DataNode connection; it also completes the
		// file (or fails to), which does not matter as it is deleted next.
		// The deadline keeps a broken pipeline from holding Abort up.
		w.f.SetDeadline(time.Now().Add(10 * time.Second))
		w.f.Close()
	}
	w.closed, w.done = true, true
	if err := w.c.Remove(w.staging); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("abort %s: remove staging file %s: %w", w.loc, w.staging, err)
	}
	return nil
}

// Staging implements Writer: the staging file's full location.
func (w *hdfsWriter) Staging() string { return w.fs.location(w.staging) }

// Remove implements FS. It refuses a directory.
func (h *HDFS) Remove(ctx context.Context, loc string) error {
	p, err := h.path(loc)
	if err != nil {
		return err
	}
	c, err := h.conn(ctx)
	if err != nil {
		return fmt.Errorf("remove %s: %w", loc, err)
	}
	fi, err := c.Stat(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove %s: %w", loc, err)
	}
	if fi.IsDir() {
		return fmt.Errorf("remove %s: is a directory", loc)
	}
	if err := c.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", loc, err)
	}
	return nil
}

// Discard implements FS. staging must name a staging file of loc (as
// Staging returned it, or its bare path); anything else is refused, so
// Discard never deletes another file.
func (h *HDFS) Discard(ctx context.Context, loc, staging string) error {
	if staging == "" {
		return nil
	}
	p, err := h.path(loc)
	if err != nil {
		return err
	}
	sp, err := h.path(staging)
	if err != nil {
		return fmt.Errorf("discard %s: %w", loc, err)
	}
	if !isStagingFor(p, sp) {
		return fmt.Errorf("discard %s: %s is not one of its staging files", loc, staging)
	}
	c, err := h.conn(ctx)
	if err != nil {
		return fmt.Errorf("discard %s: %w", loc, err)
	}
	if err := c.Remove(sp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("discard %s: remove %s: %w", loc, staging, err)
	}
	return nil
}

// Walk calls fn with the location and size of every file under the
// directory loc, in lexical order. Staging files are skipped.
//
// An entry below loc that is gone by the time the walk looks it up (the
// directory is listed first, then each entry asked for on its own: a
// writer's staging file renamed into place, a staging directory removed)
// is passed over, as the listing had been taken a moment later; only loc
// itself missing is ErrNotExist. (Returned for the entry, the error ended
// the whole walk, and a caller that reads a missing directory as an empty
// one took a partition being written to for one without files.)
func (h *HDFS) Walk(ctx context.Context, loc string, fn func(location string, size int64) error) error {
	p, err := h.path(loc)
	if err != nil {
		return err
	}
	c, err := h.conn(ctx)
	if err != nil {
		return err
	}
	err = c.Walk(p, func(fp string, info os.FileInfo, err error) error {
		if err != nil && fp != p && errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if info.IsDir() || IsStagingName(info.Name()) {
			return nil
		}
		return fn(h.location(fp), info.Size())
	})
	if err != nil {
		return hdfsError("walk", loc, err)
	}
	return nil
}

// SnapshotCandidates returns the locations of the file loc inside the
// snapshots of the snapshottable directories that contain it, newest
// snapshot first, keeping only those where a file (not a directory) exists:
// for a snapshot s of the directory d, d/.snapshot/s/<loc's path below d>.
// copyd reads the bytes an event saw from there when the file was removed
// or rewritten after the event, once it has checked their checksum.
//
// Each directory above the file is asked for its snapshots (WebHDFS
// GETSNAPSHOTLIST, Hadoop 3.3 and later), which needs only read access to
// it; GETSNAPSHOTTABLEDIRECTORYLIST is not relied on, as it shows a user
// other than a superuser only the directories that user owns. Directories
// that are not snapshottable, gone, or not readable are passed over;
// snapshots deleted but not yet collected are skipped. Snapshots are
// ordered by the time they were taken, then by snapshot ID.
func (h *HDFS) SnapshotCandidates(ctx context.Context, loc string) ([]string, error) {
	p, err := h.path(loc)
	if err != nil {
		return nil, err
	}
	if p == "/" {
		return nil, nil
	}
	type snap struct {
		webhdfs.Snapshot
		file string // the file's path inside it
	}
	var snaps []snap
	for dir := path.Dir(p); ; dir = path.Dir(dir) {
		if isSnapshotPath(dir) {
			// Already inside a snapshot: there is nothing older to find.
			return nil, nil
		}
		list, err := h.web.GetSnapshotList(ctx, dir)
		var re *webhdfs.RemoteError
		switch {
		case errors.As(err, &re) && (re.Exception == "SnapshotException" ||
			re.Exception == "FileNotFoundException" || re.Exception == "AccessControlException"):
		case err != nil:
			return nil, fmt.Errorf("snapshots of %s: %w", h.location(dir), err)
		default:
			rel := strings.TrimPrefix(p, strings.TrimSuffix(dir, "/")+"/")
			for _, s := range list {
				if s.Deleted || s.Name == "" || strings.Contains(s.Name, "/") {
					continue
				}
				snaps = append(snaps, snap{s, path.Join(dir, ".snapshot", s.Name, rel)})
			}
		}
		if dir == "/" {
			break
		}
	}
	sort.SliceStable(snaps, func(i, j int) bool {
		a, b := snaps[i], snaps[j]
		if !a.ModificationTime.Equal(b.ModificationTime) {
			return a.ModificationTime.After(b.ModificationTime)
		}
		return a.ID > b.ID
	})
	var out []string
	if len(snaps) == 0 {
		return nil, nil
	}
	c, err := h.conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("snapshots of %s: %w", loc, err)
	}
	for _, s := range snaps {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		fi, err := c.Stat(s.file)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("snapshots of %s: stat %s: %w", loc, h.location(s.file), err)
		}
		if !fi.IsDir() {
			out = append(out, h.location(s.file))
		}
	}
	return out, nil
}

// isSnapshotPath reports whether p lies inside a snapshot (has a
// ".snapshot" segment, which HDFS reserves).
func isSnapshotPath(p string) bool {
	for _, seg := range strings.Split(p, "/") {
		if seg == ".snapshot" {
			return true
		}
	}
	return false
}

// setMeta gives the file or directory p (of loc; for a write, its staging
// file) the metadata m: owner and group (setOwner), permission bits
// (setPermission), then the modification time (WebHDFS SETTIMES, which
// keeps milliseconds, where the native client's setTimes sends whole
// seconds; last, since the others do not change it but a later write
// would). A refusal by the NameNode is a *PermissionError naming the user
// and what it may not do.
func (h *HDFS) setMeta(ctx context.Context, c *hdfs.Client, loc, p string, m Meta, kind metaTarget) error {
	dir := kind == metaDir
	refused := func(op string, err error) error {
		var re *webhdfs.RemoteError
		if errors.Is(err, os.ErrPermission) || errors.As(err, &re) && re.Exception == "AccessControlException" {
			return &PermissionError{Location: loc, Dir: dir, Op: op, User: h.user, Err: err}
		}
		if kind == metaStaging {
			return fmt.Errorf("keep metadata of %s: %s on staging file %s: %w", loc, op, p, err)
		}
		return fmt.Errorf("keep metadata of %s: %s: %w", loc, op, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("keep metadata of %s: %w", loc, err)
	}
	if m.Owner != "" || m.Group != "" {
		op := "chown to " + m.Owner + ":" + m.Group + " (changing the owner needs the HDFS superuser)"
		if m.Owner == "" {
			op = "chgrp to " + m.Group + " (the user must be the owner and a member of the group, or the superuser)"
		}
		owner, group := m.Owner, m.Group
		if owner == "" || group == "" {
			// The NameNode takes an empty name as a name (colinmarc/hdfs
			// sends it as given), not as "unchanged": send the one kept as
			// it is now.
			fi, err := c.Stat(p)
			if err != nil {
				return fmt.Errorf("keep metadata of %s: %s: %w", loc, op, err)
			}
			cur := statInfo(fi)
			owner, group = cmp.Or(owner, cur.Owner), cmp.Or(group, cur.Group)
		}
		if err := c.Chown(p, owner, group); err != nil {
			return refused(op, err)
		}
	}
	if m.HasPerm {
		if err := c.Chmod(p, m.Perm); err != nil {
			return refused(fmt.Sprintf("chmod to %04o", m.Perm), err)
		}
	}
	if !m.ModTime.IsZero() && !dir {
		if err := h.web.SetModTime(ctx, p, m.ModTime); err != nil {
			return refused("set the modification time", err)
		}
	}
	return nil
}

// metaTarget is what setMeta sets metadata on.
type metaTarget int

const (
	metaStaging metaTarget = iota // a write's staging file, renamed over loc next
	metaFile                      // the file at loc
	metaDir                       // the directory at loc
)

var _ MetaKeeper = (*HDFS)(nil)

// KeepDir implements MetaKeeper. A missing directory is made with m's
// permission bits (0755 when m has none) and then given m's owner and
// group and, again, its permission bits (the NameNode may mask those a
// mkdirs asks for). Directories missing above it are made as
// CreateStaged makes them (0755, the NameNode's owner and group).
func (h *HDFS) KeepDir(ctx context.Context, loc string, m Meta) (DirChange, error) {
	p, err := h.path(loc)
	if err != nil {
		return DirKept, err
	}
	loc = h.location(p)
	c, err := h.conn(ctx)
	if err != nil {
		return DirKept, fmt.Errorf("keep directory %s: %w", loc, err)
	}
	m.ModTime = time.Time{} // a directory's changes with every file renamed into it
	fi, err := c.Stat(p)
	if errors.Is(err, os.ErrNotExist) {
		perm := os.FileMode(0o755)
		if m.HasPerm {
			perm = m.Perm
		}
		if err := c.MkdirAll(path.Dir(p), 0o755); err != nil {
			return DirKept, fmt.Errorf("keep directory %s: make parent directories: %w", loc, err)
		}
		err = c.Mkdir(p, perm)
		if err == nil {
			if err := h.setMeta(ctx, c, loc, p, m, metaDir); err != nil {
				return DirMade, err
			}
			return DirMade, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return DirKept, fmt.Errorf("keep directory %s: make it: %w", loc, err)
		}
		// Made by another writer meanwhile: check what it has.
		fi, err = c.Stat(p)
	}
	if err != nil {
		return DirKept, hdfsError("keep directory", loc, err)
	}
	if !fi.IsDir() {
		return DirKept, fmt.Errorf("keep directory %s: it is a file", loc)
	}
	diff := m.Missing(statInfo(fi))
	if diff.IsZero() {
		return DirKept, nil
	}
	if err := h.setMeta(ctx, c, loc, p, diff, metaDir); err != nil {
		return DirKept, err
	}
	return DirFixed, nil
}

// SetFileMeta implements MetaKeeper.
func (h *HDFS) SetFileMeta(ctx context.Context, loc string, m Meta) error {
	p, err := h.path(loc)
	if err != nil {
		return err
	}
	loc = h.location(p)
	c, err := h.conn(ctx)
	if err != nil {
		return fmt.Errorf("keep metadata of %s: %w", loc, err)
	}
	return h.setMeta(ctx, c, loc, p, m, metaFile)
}

// statInfo is the FileInfo of a native client's status.
func statInfo(fi os.FileInfo) FileInfo {
	out := FileInfo{Size: fi.Size(), ModTime: fi.ModTime(), IsDir: fi.IsDir(), Perm: fi.Mode().Perm(), HasPerm: true}
	if hf, ok := fi.(*hdfs.FileInfo); ok {
		out.Owner, out.Group = hf.Owner(), hf.OwnerGroup()
	}
	return out
}
