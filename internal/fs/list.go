package fs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// List returns the canonical locations of the files directly under the
// directory dir, in lexical order: not what lies in its subdirectories,
// not directories, not staging files. dir may be spelled any way that
// names a configured store (hdfs://nn/d and hdfs://NN:8020/d/ list the
// same); a missing directory (on S3, a prefix with no objects) holds no
// files. (The applier's view of the DR data, applier.Files, is Walk and
// Remove, and compares what it lists in canonical form.)
func (r *Router) List(ctx context.Context, dir string) ([]string, error) {
	f, loc, err := r.Split(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	switch s := f.(type) {
	case *HDFS:
		out, err = s.List(ctx, loc)
	case *S3:
		out, err = s.List(ctx, loc)
	case *Local:
		out, err = s.List(ctx, loc)
	default:
		return nil, fmt.Errorf("list %s: %w", dir, ErrNoListing)
	}
	if errors.Is(err, ErrNotExist) {
		return nil, nil
	}
	return out, err
}

// Remove removes the file at loc from the store holding it; a file
// already gone is not an error (FS.Remove).
func (r *Router) Remove(ctx context.Context, loc string) error {
	f, l, err := r.Split(loc)
	if err != nil {
		return err
	}
	return f.Remove(ctx, l)
}

// List returns the canonical locations of the files directly under the
// directory loc, in lexical order, skipping subdirectories and staging
// files. A missing directory is an error wrapping ErrNotExist.
func (h *HDFS) List(ctx context.Context, loc string) ([]string, error) {
	p, err := h.path(loc)
	if err != nil {
		return nil, err
	}
	c, err := h.conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", loc, err)
	}
	infos, err := c.ReadDir(p)
	if err != nil {
		return nil, hdfsError("list", loc, err)
	}
	var out []string
	for _, fi := range infos {
		if !fi.IsDir() && !IsStagingName(fi.Name()) {
			out = append(out, h.location(path.Join(p, fi.Name())))
		}
	}
	sort.Strings(out)
	return out, nil
}

// List returns the canonical locations of the objects directly under the
// "directory" loc (keys loc/name, no further slash), in key order,
// skipping directory markers and staging names. A prefix with no objects
// is an error wrapping ErrNotExist, as a missing directory is elsewhere.
func (s *S3) List(ctx context.Context, loc string) ([]string, error) {
	bucket, key, err := s3Path(loc)
	if err != nil {
		return nil, err
	}
	prefix, delim := strings.Trim(key, "/")+"/", "/"
	in := &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: &prefix, Delimiter: &delim}
	var out []string
	found := false
	for p := s3.NewListObjectsV2Paginator(s.client, in); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, s3Error("list", loc, err)
		}
		found = found || len(page.Contents) > 0 || len(page.CommonPrefixes) > 0
		for _, o := range page.Contents {
			k := aws.ToString(o.Key)
			if strings.HasSuffix(k, "/") || IsStagingName(path.Base(k)) {
				continue // a directory marker, or a write in progress
			}
			out = append(out, "s3://"+bucket+"/"+k)
		}
	}
	if !found {
		return nil, fmt.Errorf("list %s: %w", loc, ErrNotExist)
	}
	return out, nil
}

// List returns the paths of the regular files directly under the
// directory loc, in lexical order, skipping staging files. A symbolic
// link is neither listed nor listed through. A missing directory is an
// error wrapping ErrNotExist.
func (l *Local) List(ctx context.Context, loc string) ([]string, error) {
	return l.list(ctx, loc, false)
}

// ListDirs returns the names of the subdirectories directly under the
// directory dir (on S3, the names of the prefixes dir/name/ some object
// lies under), in lexical order; a missing directory has none. A name it
// does not return has no file directly under it, nor deeper: the
// applier's prune asks once for a table's directory instead of listing
// every partition's (applier.DirLister).
func (r *Router) ListDirs(ctx context.Context, dir string) ([]string, error) {
	f, loc, err := r.Split(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	switch s := f.(type) {
	case *HDFS:
		out, err = s.listDirs(ctx, loc)
	case *S3:
		out, err = s.listDirs(ctx, loc)
	case *Local:
		out, err = s.listDirs(ctx, loc)
	default:
		return nil, fmt.Errorf("list %s: %w", dir, ErrNoListing)
	}
	if errors.Is(err, ErrNotExist) {
		return nil, nil
	}
	sort.Strings(out)
	return out, err
}

func (h *HDFS) listDirs(ctx context.Context, loc string) ([]string, error) {
	p, err := h.path(loc)
	if err != nil {
		return nil, err
	}
	c, err := h.conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", loc, err)
	}
	infos, err := c.ReadDir(p)
	if err != nil {
		return nil, hdfsError("list", loc, err)
	}
	var out []string
	for _, fi := range infos {
		if fi.IsDir() {
			out = append(out, fi.Name())
		}
	}
	return out, nil
}

func (s *S3) listDirs(ctx context.Context, loc string) ([]string, error) {
	bucket, key, err := s3Path(loc)
	if err != nil {
		return nil, err
	}
	prefix, delim := strings.Trim(key, "/")+"/", "/"
	if prefix == "/" {
		prefix = ""
	}
	in := &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: &prefix, Delimiter: &delim}
	var out []string
	for p := s3.NewListObjectsV2Paginator(s.client, in); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, s3Error("list", loc, err)
		}
		for _, cp := range page.CommonPrefixes {
			out = append(out, strings.TrimSuffix(strings.TrimPrefix(aws.ToString(cp.Prefix), prefix), "/"))
		}
	}
	return out, nil
}

func (l *Local) listDirs(ctx context.Context, loc string) ([]string, error) {
	return l.list(ctx, loc, true)
}

// ReadFile reads the whole file at loc, refusing one larger than limit
// bytes (the tailer reads Iceberg metadata this way). A missing file is an
// error wrapping ErrNotExist.
func (r *Router) ReadFile(ctx context.Context, loc string, limit int64) ([]byte, error) {
	f, p, err := r.Split(loc)
	if err != nil {
		return nil, err
	}
	rc, err := f.Open(ctx, p, 0, -1)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", loc, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("read %s: larger than %d bytes", loc, limit)
	}
	return b, nil
}
