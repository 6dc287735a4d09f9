package fs

import (
	"context"
	"errors"
	"fmt"
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
		return s.walk(ctx, dir, loc, fn)
	}
	return fmt.Errorf("walk %s: %w", dir, ErrNoListing)
}
