package fs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrNoListing is returned by Router.Walk for stores that cannot list yet.
var ErrNoListing = errors.New("listing files is not supported on this store yet")

// Walk calls fn with the location and size of every file under the
// directory dir, recursively, skipping staging files. A missing directory
// is an error wrapping ErrNotExist.
func (r *Router) Walk(ctx context.Context, dir string, fn func(location string, size int64) error) error {
	f, loc, err := r.Split(dir)
	if err != nil {
		return err
	}
	switch s := f.(type) {
	case *HDFS:
		return s.Walk(ctx, loc, fn)
	case *S3:
		return s.Walk(ctx, loc, fn)
	case *Local:
		return filepath.WalkDir(loc, func(p string, d fs.DirEntry, err error) error {
			if errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("walk %s: %w", dir, ErrNotExist)
			}
			if err != nil {
				return fmt.Errorf("walk %s: %w", dir, err)
			}
			if cerr := ctx.Err(); cerr != nil {
				return cerr
			}
			if !d.Type().IsRegular() || IsStagingName(d.Name()) {
				return nil
			}
			info, err := d.Info()
			if err != nil {
				return fmt.Errorf("walk %s: %w", dir, err)
			}
			return fn(p, info.Size())
		})
	}
	return fmt.Errorf("walk %s: %w", dir, ErrNoListing)
}
