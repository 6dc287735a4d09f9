package verify

import (
	"context"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/hivedr/hivedr/internal/fs"
)

// FileStore is Files over an fs.Router.
type FileStore struct{ Router *fs.Router }

// Walk implements Files.
func (s FileStore) Walk(ctx context.Context, dir string, fn func(string, int64) error) error {
	return s.Router.Walk(ctx, dir, fn)
}

// CRC32C implements Files: the store's own checksum (fs.FS.Checksum, as
// copyd verifies with), else the CRC32C of the bytes read.
func (s FileStore) CRC32C(ctx context.Context, loc string) (uint32, string, error) {
	f, p, err := s.Router.Split(loc)
	if err != nil {
		return 0, "", err
	}
	sum, ok, err := f.Checksum(ctx, p)
	if err != nil {
		return 0, "", err
	}
	if ok {
		return sum.CRC32C, sum.Source, nil
	}
	r, err := f.Open(ctx, p, 0, -1)
	if err != nil {
		return 0, "", err
	}
	defer r.Close()
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	if _, err := io.Copy(h, r); err != nil {
		return 0, "", fmt.Errorf("read %s: %w", loc, err)
	}
	return h.Sum32(), "computed", nil
}

// ReadFile implements Files.
func (s FileStore) ReadFile(ctx context.Context, loc string, limit int64) ([]byte, error) {
	return s.Router.ReadFile(ctx, loc, limit)
}
