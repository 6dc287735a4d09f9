package fs

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

var _ Splitter = (*S3)(nil)

// CreateSplit implements Splitter: the ranges are runs of parts of one
// multipart upload (each range a whole number of parts but the last), so
// ranges upload in parallel and CompleteMultipartUpload, carrying the
// caller's CRC32C as the FULL_OBJECT checksum, publishes the object exactly
// as Writer.Commit does. The upload is started here, so Stagings names it
// before a byte is written. ok is false for a file of one range.
func (s *S3) CreateSplit(ctx context.Context, loc string, size, splitSize int64) (SplitWriter, bool, error) {
	bucket, key, err := s3Path(loc)
	if err != nil {
		return nil, false, err
	}
	if splitSize <= 0 || size <= splitSize {
		return nil, false, nil
	}
	partSize := s.partSizeFor(size)
	ranges := PlanRanges(size, splitSize, partSize)
	if len(ranges) < 2 {
		return nil, false, nil
	}
	id, err := s.createUpload(ctx, loc, bucket, key)
	if err != nil {
		return nil, false, err
	}
	return &s3SplitWriter{fs: s, loc: loc, bucket: bucket, key: key, uploadID: id, partSize: partSize,
		size: size, ranges: ranges, written: make([]bool, len(ranges)), ok: make([]bool, len(ranges)),
		parts: make([]types.CompletedPart, (size+partSize-1)/partSize)}, true, nil
}

// s3SplitWriter uploads the parts of each range, one at a time per range.
type s3SplitWriter struct {
	fs               *S3
	loc, bucket, key string
	uploadID         string
	partSize, size   int64
	ranges           []Range

	mu        sync.Mutex
	written   []bool                // WriteRange was called
	ok        []bool                // WriteRange succeeded
	parts     []types.CompletedPart // by part number - 1
	done      bool                  // committed or aborted
	committed bool
	crc       uint32
}

func (w *s3SplitWriter) Ranges() []Range    { return w.ranges }
func (w *s3SplitWriter) Stagings() []string { return []string{w.uploadID} }

// WriteRange implements SplitWriter: it reads the range a part at a time
// and uploads each part while reading the next ones, with at most
// parts_in_flight parts of the range in memory, as Writer does for a whole
// file.
func (w *s3SplitWriter) WriteRange(ctx context.Context, i int, r io.Reader) error {
	w.mu.Lock()
	if err := checkRange(w.loc, i, w.ranges, w.written); err != nil {
		w.mu.Unlock()
		return err
	}
	if w.done {
		w.mu.Unlock()
		return fmt.Errorf("write %s: writer is closed", w.loc)
	}
	w.written[i] = true
	w.mu.Unlock()
	rg := w.ranges[i]
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg   sync.WaitGroup
		emu  sync.Mutex
		uerr error
	)
	uploadErr := func() error {
		emu.Lock()
		defer emu.Unlock()
		return uerr
	}
	sem := make(chan struct{}, w.fs.partsInFlight)
	err := func() error {
		for off := rg.Off; off < rg.Off+rg.Len; off += w.partSize {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return ctx.Err()
			}
			if err := uploadErr(); err != nil {
				<-sem
				return err
			}
			buf := w.getBuf()
			n := min(w.partSize, rg.Off+rg.Len-off)
			k, err := io.ReadFull(r, buf[:n])
			if err != nil {
				w.putBuf(buf)
				<-sem
				if err == io.ErrUnexpectedEOF || err == io.EOF {
					return rangeLengthError(w.loc, i, rg, off-rg.Off+int64(k), false)
				}
				return fmt.Errorf("write %s: range %d: %w", w.loc, i, err)
			}
			num := int32(off/w.partSize) + 1
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				part, err := w.fs.uploadPart(ctx, w.loc, w.bucket, w.key, w.uploadID, num, buf[:n])
				w.putBuf(buf)
				if err != nil {
					emu.Lock()
					if uerr == nil {
						uerr = err
						cancel()
					}
					emu.Unlock()
					return
				}
				w.mu.Lock()
				w.parts[num-1] = part
				w.mu.Unlock()
			}()
		}
		var one [1]byte
		if k, _ := io.ReadFull(r, one[:]); k > 0 {
			return rangeLengthError(w.loc, i, rg, rg.Len, true)
		}
		return nil
	}()
	if err != nil {
		cancel()
	}
	wg.Wait()
	if err == nil {
		err = uploadErr()
	}
	if err != nil {
		return err
	}
	w.mu.Lock()
	w.ok[i] = true
	w.mu.Unlock()
	return nil
}

// getBuf returns a buffer of partSize bytes; putBuf gives it back.
func (w *s3SplitWriter) getBuf() []byte {
	if w.partSize != w.fs.partSize {
		return make([]byte, w.partSize)
	}
	return (*w.fs.parts.Get().(*[]byte))[:w.partSize]
}

func (w *s3SplitWriter) putBuf(b []byte) {
	if int64(cap(b)) == w.fs.partSize {
		b = b[:0]
		w.fs.parts.Put(&b)
	}
}

// Commit implements SplitWriter, as s3Writer.Commit: the object appears
// only if the server finds the caller's CRC32C for the bytes of all parts.
func (w *s3SplitWriter) Commit(ctx context.Context, crc32c uint32) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return fmt.Errorf("commit %s: writer is closed", w.loc)
	}
	for i, ok := range w.ok {
		if !ok {
			return fmt.Errorf("commit %s: range %d was not written", w.loc, i)
		}
	}
	sum := encodeCRC32C(crc32c)
	_, err := w.fs.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: &w.bucket, Key: &w.key, UploadId: &w.uploadID,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: w.parts},
		ChecksumCRC32C:  &sum,
		ChecksumType:    types.ChecksumTypeFullObject,
		MpuObjectSize:   aws.Int64(w.size),
	})
	if err != nil {
		if isChecksumRefusal(err) {
			return &ChecksumError{Location: w.loc, Want: crc32c, Detail: "refused by S3: " + err.Error()}
		}
		return fmt.Errorf("commit %s: %w", w.loc, err)
	}
	w.done, w.committed, w.crc = true, true, crc32c
	return nil
}

// Verified implements SplitWriter.
func (w *s3SplitWriter) Verified() (Checksum, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.committed {
		return Checksum{}, false
	}
	return Checksum{CRC32C: w.crc, Source: "s3-full-object-crc32c"}, true
}

// Abort implements SplitWriter: it aborts the multipart upload.
func (w *s3SplitWriter) Abort(ctx context.Context) error {
	w.mu.Lock()
	done := w.done
	w.done = true
	w.mu.Unlock()
	if done {
		return nil
	}
	return w.fs.abortUpload(ctx, w.loc, w.bucket, w.key, w.uploadID)
}
