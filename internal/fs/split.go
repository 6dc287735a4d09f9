package fs

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// ErrSplitUnsupported is returned (wrapped) by a SplitWriter's Commit when
// the store turned out unable to join ranges (an HDFS NameNode refusing
// CONCAT). Nothing was published; after Abort the caller copies the file
// as one stream, and the store answers ok=false to CreateSplit from then on.
var ErrSplitUnsupported = errors.New("the store cannot join ranges written in parallel")

// Range is the bytes [Off, Off+Len) of a file.
type Range struct {
	Off, Len int64
}

// PlanRanges cuts a file of size bytes into ranges copied in parallel: as
// many as it takes for none to be longer than splitSize, of equal length
// rounded up to a multiple of unit (an HDFS block, an S3 part), so every
// range but the last is a whole number of units. A remainder shorter than
// a quarter of a range is not a range of its own (an extra read, part file
// or part for a few bytes) but joins the one before. It returns one range for a file
// no longer than splitSize (or with splitSize <= 0), and none for an empty
// file.
func PlanRanges(size, splitSize, unit int64) []Range {
	if size <= 0 {
		return nil
	}
	if unit <= 0 {
		unit = 1
	}
	if splitSize <= 0 || size <= splitSize {
		return []Range{{0, size}}
	}
	n := (size + splitSize - 1) / splitSize
	per := (size + n - 1) / n
	per = (per + unit - 1) / unit * unit
	out := make([]Range, 0, (size+per-1)/per)
	for off := int64(0); off < size; off += per {
		out = append(out, Range{off, min(per, size-off)})
	}
	if k := len(out); k > 1 && out[k-1].Len < per/4 {
		out[k-2].Len += out[k-1].Len
		out = out[:k-1]
	}
	return out
}

// Splitter is implemented by stores that can take one file as ranges
// written in parallel: S3 (the parts of one multipart upload) and HDFS
// (part files beside the target, joined with CONCAT).
type Splitter interface {
	// CreateSplit starts writing a new file of exactly size bytes at path,
	// cut into ranges of at most about splitSize bytes (PlanRanges with
	// the store's own unit). ok is false, with no error and nothing
	// created, when the store would not write this file in ranges (it
	// would be one range, the store cannot join ranges, the name does not
	// allow it); the caller then uses Create. As with Create, nothing is
	// visible at path until Commit.
	CreateSplit(ctx context.Context, path string, size, splitSize int64) (w SplitWriter, ok bool, err error)
}

// SplitWriter is a file being written as ranges.
//
// WriteRange may be called concurrently for different ranges; Commit and
// Abort only once no WriteRange is running.
type SplitWriter interface {
	// Ranges are the ranges to write, in file order, covering the file.
	Ranges() []Range
	// Stagings identify everything the write may leave in the store (staging
	// files, a multipart upload), each a value FS.Discard takes with the
	// target path. They are known before any range is written, so a caller
	// can record them first.
	Stagings() []string
	// WriteRange writes range i, reading exactly its Len bytes from r
	// (fewer or more is an error). Each range is written once.
	WriteRange(ctx context.Context, i int, r io.Reader) error
	// Commit makes the file visible at its path, atomically, once every
	// range is written. crc32c is the CRC32C of the whole file, checked as
	// Writer.Commit checks it.
	Commit(ctx context.Context, crc32c uint32) error
	// Abort discards what was written; the path is left as it was. It may
	// follow a failed Commit, and does nothing after a successful one.
	Abort(ctx context.Context) error
	// Verified is Writer.Verified.
	Verified() (sum Checksum, ok bool)
}

// rangeLengthError reports a range whose reader gave the wrong number of
// bytes.
func rangeLengthError(loc string, i int, r Range, got int64, more bool) error {
	if more {
		return fmt.Errorf("write %s: range %d [%d, +%d): the reader has more than %d bytes", loc, i, r.Off, r.Len, r.Len)
	}
	return fmt.Errorf("write %s: range %d [%d, +%d): the reader ended after %d bytes", loc, i, r.Off, r.Len, got)
}

// checkRange validates a WriteRange call's index against ranges and the
// writer's record of written ranges.
func checkRange(loc string, i int, ranges []Range, written []bool) error {
	if i < 0 || i >= len(ranges) {
		return fmt.Errorf("write %s: no range %d (%d ranges)", loc, i, len(ranges))
	}
	if written[i] {
		return fmt.Errorf("write %s: range %d was already written", loc, i)
	}
	return nil
}
