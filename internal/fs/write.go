package fs

import (
	"context"
	"fmt"
	"hash/crc32"
)

// WriteFile writes data to a new file at path of f, published atomically
// (Create, Write, Commit; Abort on failure), and returns its CRC32C.
func WriteFile(ctx context.Context, f FS, path string, data []byte) (uint32, error) {
	crc := crc32.Checksum(data, castagnoli)
	w, err := f.Create(ctx, path, int64(len(data)))
	if err != nil {
		return 0, err
	}
	if _, err := w.Write(data); err != nil {
		w.Abort(ctx)
		return 0, fmt.Errorf("write %s: %w", path, err)
	}
	if err := w.Commit(ctx, crc); err != nil {
		w.Abort(ctx)
		return 0, err
	}
	return crc, nil
}
