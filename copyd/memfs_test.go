package copyd

import (
	"bytes"
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/location"
)

// memFS is an in-memory fs.FS for tests. Checksums are taken when a file
// is put (so a test can change the bytes behind a store's back), faults
// can be injected per operation, and every call is logged.
type memFS struct {
	mu        sync.Mutex
	files     map[string][]byte
	sums      map[string]uint32   // the store's CRC32C, as of the last Put/Commit
	fileSums  map[string]string   // FileChecksum hex, when set
	snaps     map[string][]string // a path's snapshot copies, newest first
	noCRC     bool                // Checksum answers ok=false
	lyingCRC  *uint32             // Checksum answers this for every file
	corruptAt int                 // > 0: Commit flips the byte at this offset
	faults    map[string][]error
	goneAt    map[string]string // op -> path: that call removes the file first, as a concurrent drop would
	calls     []string
	staging   int
	staged    map[string]bool // staging names not yet committed or aborted
	committed int
}

func newMemFS() *memFS {
	return &memFS{files: map[string][]byte{}, sums: map[string]uint32{}, fileSums: map[string]string{},
		snaps:  map[string][]string{},
		faults: map[string][]error{}, goneAt: map[string]string{}, staged: map[string]bool{}}
}

func crcOf(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// put stores a file and its checksum.
func (m *memFS) put(p string, b []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.files[p] = append([]byte(nil), b...)
	m.sums[p] = crcOf(b)
}

// get returns a file's bytes.
func (m *memFS) get(p string) ([]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.files[p]
	return b, ok
}

// fault makes the next calls of op ("stat", "open", ...) fail with errs,
// one each.
func (m *memFS) fault(op string, errs ...error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.faults[op] = append(m.faults[op], errs...)
}

// enter logs a call and returns its injected fault, if any.
func (m *memFS) enter(op, p string) error {
	m.calls = append(m.calls, op+" "+p)
	if m.goneAt[op] == p {
		delete(m.goneAt, op)
		delete(m.files, p)
		delete(m.sums, p)
	}
	if errs := m.faults[op]; len(errs) > 0 {
		m.faults[op] = errs[1:]
		return errs[0]
	}
	return nil
}

func (m *memFS) callLog() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.calls...)
}

func notExist(op, p string) error { return fmt.Errorf("%s %s: %w", op, p, fs.ErrNotExist) }

func (m *memFS) Stat(ctx context.Context, p string) (fs.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.enter("stat", p); err != nil {
		return fs.FileInfo{}, err
	}
	if b, ok := m.files[p]; ok {
		return fs.FileInfo{Size: int64(len(b))}, nil
	}
	prefix := strings.TrimSuffix(p, "/") + "/"
	for k := range m.files {
		if strings.HasPrefix(k, prefix) {
			return fs.FileInfo{IsDir: true}, nil
		}
	}
	return fs.FileInfo{}, notExist("stat", p)
}

func (m *memFS) Open(ctx context.Context, p string, off, n int64) (io.ReadCloser, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.enter("open", p); err != nil {
		return nil, err
	}
	b, ok := m.files[p]
	if !ok {
		return nil, notExist("open", p)
	}
	b = b[min(off, int64(len(b))):]
	if n >= 0 {
		b = b[:min(n, int64(len(b)))]
	}
	r := io.Reader(bytes.NewReader(b))
	if errs := m.faults["read"]; len(errs) > 0 {
		m.faults["read"] = errs[1:]
		r = io.MultiReader(io.LimitReader(r, int64(len(b)/2)), errReader{errs[0]})
	}
	return io.NopCloser(r), nil
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func (m *memFS) Checksum(ctx context.Context, p string) (fs.Checksum, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.enter("checksum", p); err != nil {
		return fs.Checksum{}, false, err
	}
	if _, ok := m.files[p]; !ok {
		return fs.Checksum{}, false, notExist("checksum", p)
	}
	switch {
	case m.noCRC:
		return fs.Checksum{}, false, nil
	case m.lyingCRC != nil:
		return fs.Checksum{CRC32C: *m.lyingCRC, Source: "mem-lying"}, true, nil
	}
	return fs.Checksum{CRC32C: m.sums[p], Source: "mem"}, true, nil
}

func (m *memFS) Create(ctx context.Context, p string, size int64) (fs.Writer, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.enter("create", p); err != nil {
		return nil, err
	}
	m.staging++
	s := fmt.Sprintf("%s.staging-%d", p, m.staging)
	m.staged[s] = true
	return &memWriter{m: m, path: p, staging: s}, nil
}

func (m *memFS) Remove(ctx context.Context, p string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.enter("remove", p); err != nil {
		return err
	}
	delete(m.files, p)
	delete(m.sums, p)
	return nil
}

func (m *memFS) Discard(ctx context.Context, p, staging string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.enter("discard", p); err != nil {
		return err
	}
	delete(m.staged, staging)
	return nil
}

// memHexFS is a memFS that also reports FileChecksums (as HDFS does).
type memHexFS struct{ *memFS }

func (m memHexFS) FileChecksum(ctx context.Context, p string) (string, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.enter("filechecksum", p); err != nil {
		return "", false, err
	}
	if _, ok := m.files[p]; !ok {
		return "", false, notExist("filechecksum", p)
	}
	h, ok := m.fileSums[p]
	return h, ok, nil
}

// memSnapFS is a memHexFS that also finds files in snapshots (as HDFS
// does): the locations snaps lists for the path, those that exist.
type memSnapFS struct{ memHexFS }

var _ SnapshotFinder = memSnapFS{}

func (m memSnapFS) SnapshotCandidates(ctx context.Context, p string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.enter("snapshots", p); err != nil {
		return nil, err
	}
	var out []string
	for _, c := range m.snaps[p] {
		if _, ok := m.files[c]; ok {
			out = append(out, c)
		}
	}
	return out, nil
}

type memWriter struct {
	m       *memFS
	path    string
	staging string
	buf     bytes.Buffer
	closed  bool
}

func (w *memWriter) Write(p []byte) (int, error) {
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	if err := w.m.enter("write", w.path); err != nil {
		return 0, err
	}
	return w.buf.Write(p)
}

// Verified reports nothing, so the engine's own post-commit read of the
// target's checksum (and its mismatch handling) is what these tests see.
func (w *memWriter) Verified() (fs.Checksum, bool) { return fs.Checksum{}, false }

func (w *memWriter) Commit(ctx context.Context, crc uint32) error {
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	if err := w.m.enter("commit", w.path); err != nil {
		return err
	}
	if got := crcOf(w.buf.Bytes()); got != crc {
		return &fs.ChecksumError{Location: w.path, Want: crc, Got: got, HasGot: true}
	}
	w.m.files[w.path] = append([]byte(nil), w.buf.Bytes()...)
	w.m.sums[w.path] = crc
	if i := w.m.corruptAt; i > 0 && i < w.buf.Len() {
		w.m.files[w.path][i] ^= 0x80
	}
	delete(w.m.staged, w.staging)
	w.m.committed++
	w.closed = true
	return nil
}

func (w *memWriter) Abort(ctx context.Context) error {
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	w.m.enter("abort", w.path)
	delete(w.m.staged, w.staging)
	w.closed = true
	return nil
}

func (w *memWriter) Staging() string { return w.staging }

// memResolver routes locations to memFSs by scheme://authority ("" for
// local paths), and logs every Split.
type memResolver struct {
	mu     sync.Mutex
	stores map[string]fs.FS
	splits []string
}

func (r *memResolver) Split(loc string) (fs.FS, string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.splits = append(r.splits, loc)
	l, err := location.Parse(loc)
	if err != nil {
		return nil, "", err
	}
	key := ""
	if l.Scheme != "" {
		key = l.Scheme + "://" + l.Authority
	}
	f, ok := r.stores[key]
	if !ok {
		return nil, "", fmt.Errorf("no store for %q", key)
	}
	return f, loc, nil
}

// memSplitFS is a memFS that also takes files as ranges written in
// parallel (fs.Splitter), as S3 and HDFS do: ranges of whole units, one
// staging name per range, and a commit that checks the whole file's
// CRC32C. Faults: "createsplit", "writerange" (a range fails after taking
// half its bytes), "join" (the commit fails).
type memSplitFS struct {
	*memFS
	unit int64
	// delay makes each WriteRange take at least this long, so ranges
	// overlap; maxActive records the most that ran at once.
	delay     time.Duration
	active    *atomic.Int32
	maxActive *atomic.Int32
}

var _ fs.Splitter = memSplitFS{}

func (m memSplitFS) CreateSplit(ctx context.Context, p string, size, splitSize int64) (fs.SplitWriter, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.enter("createsplit", p); err != nil {
		return nil, false, err
	}
	ranges := fs.PlanRanges(size, splitSize, m.unit)
	if len(ranges) < 2 {
		return nil, false, nil
	}
	w := &memSplitWriter{m: m.memFS, fs: m, path: p, ranges: ranges, data: make([]byte, size), written: make([]bool, len(ranges))}
	m.staging++
	for i := range ranges {
		s := fmt.Sprintf("%s.staging-%d-part%d", p, m.staging, i)
		m.staged[s] = true
		w.stagings = append(w.stagings, s)
	}
	return w, true, nil
}

type memSplitWriter struct {
	m        *memFS
	fs       memSplitFS
	path     string
	ranges   []fs.Range
	stagings []string
	data     []byte
	written  []bool
	closed   bool
}

func (w *memSplitWriter) Ranges() []fs.Range { return w.ranges }
func (w *memSplitWriter) Stagings() []string { return w.stagings }

func (w *memSplitWriter) WriteRange(ctx context.Context, i int, r io.Reader) error {
	rg := w.ranges[i]
	if a := w.fs.active; a != nil {
		n := a.Add(1)
		defer a.Add(-1)
		for m := w.fs.maxActive.Load(); n > m && !w.fs.maxActive.CompareAndSwap(m, n); m = w.fs.maxActive.Load() {
		}
		time.Sleep(w.fs.delay)
	}
	w.m.mu.Lock()
	err := w.m.enter(fmt.Sprintf("writerange %d", i), w.path)
	if err == nil {
		err = w.m.enter("writerange", w.path)
	}
	if w.written[i] || w.closed {
		err = fmt.Errorf("range %d written twice, or after the end", i)
	}
	w.written[i] = true
	w.m.mu.Unlock()
	if err != nil {
		io.CopyN(io.Discard, r, rg.Len/2)
		return err
	}
	buf := w.data[rg.Off : rg.Off+rg.Len]
	if _, err := io.ReadFull(r, buf); err != nil {
		return fmt.Errorf("range %d: %w", i, err)
	}
	if n, _ := r.Read(make([]byte, 1)); n > 0 {
		return fmt.Errorf("range %d: more bytes than %d", i, rg.Len)
	}
	return nil
}

func (w *memSplitWriter) Commit(ctx context.Context, crc uint32) error {
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	if w.closed {
		return fmt.Errorf("commit %s: closed", w.path)
	}
	if err := w.m.enter("join", w.path); err != nil {
		return err
	}
	for i, ok := range w.written {
		if !ok {
			return fmt.Errorf("commit %s: range %d not written", w.path, i)
		}
	}
	if got := crcOf(w.data); got != crc {
		return &fs.ChecksumError{Location: w.path, Want: crc, Got: got, HasGot: true}
	}
	w.m.enter("commit", w.path)
	w.m.files[w.path] = w.data
	w.m.sums[w.path] = crc
	for _, s := range w.stagings {
		delete(w.m.staged, s)
	}
	w.m.committed++
	w.closed = true
	return nil
}

func (w *memSplitWriter) Abort(ctx context.Context) error {
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	w.m.enter("abort", w.path)
	for _, s := range w.stagings {
		delete(w.m.staged, s)
	}
	w.closed = true
	return nil
}

func (w *memSplitWriter) Verified() (fs.Checksum, bool) { return fs.Checksum{}, false }
