package fs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/colinmarc/hdfs/v2"

	"github.com/hivedr/hivedr/internal/webhdfs"
)

var _ Splitter = (*HDFS)(nil)

// CreateSplit implements Splitter, when the cluster was configured with
// concat: true. Range i goes to its own staging file beside the target
// (range 0 to the one that becomes the target), each cut at a multiple of
// the cluster's default block size and written with that block size, so
// that CONCAT (WebHDFS op=CONCAT, a NameNode metadata operation that moves
// blocks, not bytes) joins them into an ordinary file of full blocks.
// Commit joins them, checks the joined file's COMPOSITE-CRC32C and renames
// it into place, as Writer.Commit does for one staging file.
//
// ok is false when splitting is off, the NameNode refused CONCAT before
// (an old or restricted NameNode: the HDFS FS then stops asking), the file
// would be one range, or the file name has a comma (CONCAT takes its
// sources comma-separated).
func (h *HDFS) CreateSplit(ctx context.Context, loc string, size, splitSize int64) (SplitWriter, bool, error) {
	if !h.concat || h.noConcat.Load() || size <= splitSize || splitSize <= 0 {
		return nil, false, nil
	}
	p, err := h.path(loc)
	if err != nil {
		return nil, false, err
	}
	dir, base := path.Split(p)
	if base == "" {
		return nil, false, fmt.Errorf("create %s: no file name", loc)
	}
	if strings.Contains(p, ",") {
		return nil, false, nil
	}
	c, err := h.conn(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("create %s: %w", loc, err)
	}
	def, err := c.ServerDefaults()
	if err != nil {
		return nil, false, fmt.Errorf("create %s: server defaults: %w", loc, err)
	}
	ranges := PlanRanges(size, splitSize, def.BlockSize)
	if len(ranges) < 2 {
		return nil, false, nil
	}
	if err := c.MkdirAll(dir, 0o755); err != nil {
		return nil, false, fmt.Errorf("create %s: make parent directories: %w", loc, err)
	}
	w := &hdfsSplitWriter{fs: h, c: c, loc: loc, path: p, ranges: ranges, written: make([]bool, len(ranges)), ok: make([]bool, len(ranges)),
		blockSize: def.BlockSize, replication: def.Replication}
	for range ranges {
		name, err := stagingName(base)
		if err != nil {
			return nil, false, err
		}
		w.names = append(w.names, dir+name)
	}
	if d, ok := ctx.Deadline(); ok {
		w.deadline = d
	}
	return w, true, nil
}

// hdfsSplitWriter writes a file's ranges to staging files, joins them with
// CONCAT into the first and renames that into place.
type hdfsSplitWriter struct {
	fs          *HDFS
	c           *hdfs.Client
	loc, path   string
	ranges      []Range
	names       []string // staging file of each range; names[0] becomes the target
	blockSize   int64
	replication int
	deadline    time.Time
	joined      bool // the CONCAT happened
	committed   bool
	crc         uint32
	meta        Meta  // set on the joined staging file before the rename
	event       int64 // EventMarkAttr, set with meta

	mu      sync.Mutex
	written []bool // WriteRange was called (the file may exist)
	ok      []bool // WriteRange succeeded
	done    bool   // committed or aborted
	started bool   // some staging file may exist
}

func (w *hdfsSplitWriter) Ranges() []Range { return w.ranges }

func (w *hdfsSplitWriter) Stagings() []string {
	out := make([]string, len(w.names))
	for i, n := range w.names {
		out[i] = w.fs.location(n)
	}
	return out
}

// WriteRange implements SplitWriter: it writes range i to its staging file
// and completes that file.
func (w *hdfsSplitWriter) WriteRange(ctx context.Context, i int, r io.Reader) error {
	w.mu.Lock()
	if err := checkRange(w.loc, i, w.ranges, w.written); err != nil {
		w.mu.Unlock()
		return err
	}
	if w.done {
		w.mu.Unlock()
		return fmt.Errorf("write %s: writer is closed", w.loc)
	}
	w.written[i] = true // attempted: a failed range is not written again
	w.started = true
	w.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("write %s: range %d: %w", w.loc, i, err)
	}
	rg, name := w.ranges[i], w.names[i]
	f, err := w.c.CreateFile(name, w.replication, w.blockSize, 0o644)
	if err != nil {
		return fmt.Errorf("write %s: range %d: create staging file %s: %w", w.loc, i, name, err)
	}
	if d, ok := ctx.Deadline(); ok {
		f.SetDeadline(d)
	} else if !w.deadline.IsZero() {
		f.SetDeadline(w.deadline)
	}
	// The native writer sends 64 KiB packets whatever the write size.
	n, err := io.CopyBuffer(f, io.LimitReader(r, rg.Len), make([]byte, 256<<10))
	if err == nil && n == rg.Len {
		var one [1]byte
		if k, _ := io.ReadFull(r, one[:]); k > 0 {
			err = rangeLengthError(w.loc, i, rg, n, true)
		}
	} else if err == nil {
		err = rangeLengthError(w.loc, i, rg, n, false)
	}
	if err != nil {
		// Release the DataNode connection; the file is deleted by Abort.
		f.SetDeadline(time.Now().Add(10 * time.Second))
		f.Close()
		return fmt.Errorf("write %s: range %d (staging %s): %w", w.loc, i, name, err)
	}
	if err := closeFile(ctx, f); err != nil {
		return fmt.Errorf("write %s: range %d: close staging file %s: %w", w.loc, i, name, err)
	}
	w.mu.Lock()
	w.ok[i] = true
	w.mu.Unlock()
	return nil
}

// concatUnsupported reports whether err is the NameNode refusing CONCAT as
// such (not one of its transient failures).
func concatUnsupported(err error) bool {
	var re *webhdfs.RemoteError
	if !errors.As(err, &re) {
		return false
	}
	switch re.Exception {
	case "UnsupportedOperationException", "HadoopIllegalArgumentException", "IllegalArgumentException",
		"SnapshotException", "AccessControlException":
		return true
	}
	return re.Status == 400 || re.Status == 405 || re.Status == 501
}

// Commit implements SplitWriter. Invariant: as Writer.Commit, the target is
// replaced only by a complete staging file whose COMPOSITE-CRC32C, as its
// DataNodes report it after the join, equals the caller's CRC32C.
func (w *hdfsSplitWriter) Commit(ctx context.Context, crc32c uint32) error {
	w.mu.Lock()
	if w.done {
		w.mu.Unlock()
		return fmt.Errorf("commit %s: writer is closed", w.loc)
	}
	for i, ok := range w.ok {
		if !ok {
			w.mu.Unlock()
			return fmt.Errorf("commit %s: range %d was not written", w.loc, i)
		}
	}
	w.mu.Unlock()
	if !w.joined {
		if err := w.fs.web.Concat(ctx, w.names[0], w.names[1:]); err != nil {
			if concatUnsupported(err) {
				w.fs.noConcat.Store(true)
				return fmt.Errorf("commit %s: join %d ranges: %w: %w", w.loc, len(w.names), ErrSplitUnsupported, err)
			}
			return fmt.Errorf("commit %s: join %d ranges into %s: %w", w.loc, len(w.names), w.names[0], err)
		}
		w.joined = true
	}
	staging := w.names[0]
	got, n, err := w.fs.crc.FileCRC32C(ctx, staging)
	if err != nil {
		return fmt.Errorf("commit %s: checksum of staging file %s: %w", w.loc, staging, err)
	}
	if want := w.ranges[len(w.ranges)-1].Off + w.ranges[len(w.ranges)-1].Len; n != want {
		return &ChecksumError{Location: w.loc, Want: crc32c, Got: got, HasGot: true,
			Detail: fmt.Sprintf("joined staging file %s has %d bytes, not %d", staging, n, want)}
	}
	if got != crc32c {
		return &ChecksumError{Location: w.loc, Want: crc32c, Got: got, HasGot: true,
			Detail: "COMPOSITE-CRC32C of joined staging file " + staging}
	}
	if err := w.fs.setMeta(ctx, w.c, w.loc, staging, w.meta, metaStaging); err != nil {
		return err
	}
	if err := w.fs.setMark(w.c, w.loc, staging, w.event); err != nil {
		return fmt.Errorf("commit %s: %w", w.loc, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("commit %s: %w", w.loc, err)
	}
	if err := w.c.Rename(staging, w.path); err != nil {
		return fmt.Errorf("commit %s: rename %s into place: %w", w.loc, staging, err)
	}
	w.mu.Lock()
	w.done, w.committed, w.crc = true, true, got
	w.mu.Unlock()
	return nil
}

// SetMeta implements MetaSetter.
func (w *hdfsSplitWriter) SetMeta(m Meta) { w.meta = m }

// MarkEvent implements EventMarkWriter.
func (w *hdfsSplitWriter) MarkEvent(id int64) { w.event = id }

// Verified implements SplitWriter.
func (w *hdfsSplitWriter) Verified() (Checksum, bool) {
	if !w.committed {
		return Checksum{}, false
	}
	return Checksum{CRC32C: w.crc, Source: "hdfs-composite-crc"}, true
}

// Abort implements SplitWriter: it deletes every staging file.
func (w *hdfsSplitWriter) Abort(ctx context.Context) error {
	w.mu.Lock()
	done, there := w.done, w.started
	w.done = true
	w.mu.Unlock()
	if done || !there {
		return nil
	}
	var errs []error
	for _, n := range w.names {
		if err := w.c.Remove(n); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("abort %s: remove staging file %s: %w", w.loc, n, err))
		}
	}
	return errors.Join(errs...)
}
