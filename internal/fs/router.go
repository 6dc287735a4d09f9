package fs

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// Router maps a location to the FS that holds it, by scheme and authority:
// hdfs://authority to that cluster, s3://bucket (or s3a://, s3n://) to the
// endpoint serving the bucket, and absolute paths or file:/// to the local
// filesystem when allowed. It is safe for concurrent use.
type Router struct {
	local     *Local
	hdfs      map[string]*HDFS // by authority
	s3        map[string]*S3   // by bucket
	s3Default *S3              // the endpoint that lists no buckets
}

// NewRouter builds the filesystems c describes. It connects to none of
// them. Errors name the offending key, relative to the `filesystems:`
// section (e.g. `hdfs[1].user: required`).
func NewRouter(c Config) (*Router, error) {
	r := &Router{hdfs: map[string]*HDFS{}, s3: map[string]*S3{}}
	if c.Local {
		r.local = NewLocal()
	}
	for i, hc := range c.HDFS {
		h, err := NewHDFS(hc)
		if err != nil {
			return nil, fmt.Errorf("hdfs[%d].%w", i, err)
		}
		if _, dup := r.hdfs[h.authority]; dup {
			return nil, fmt.Errorf("hdfs[%d]: authority %s is configured twice", i, h.authority)
		}
		r.hdfs[h.authority] = h
	}
	for i, sc := range c.S3 {
		s, err := NewS3(sc)
		if err != nil {
			return nil, fmt.Errorf("s3[%d].%w", i, err)
		}
		if len(sc.Buckets) == 0 {
			if r.s3Default != nil {
				return nil, fmt.Errorf("s3[%d].buckets: only one S3 endpoint may leave its buckets unlisted", i)
			}
			r.s3Default = s
		}
		for j, b := range sc.Buckets {
			b = strings.ToLower(b)
			if _, dup := r.s3[b]; dup {
				return nil, fmt.Errorf("s3[%d].buckets[%d]: bucket %s is listed twice", i, j, b)
			}
			r.s3[b] = s
		}
	}
	return r, nil
}

// Split returns the FS holding location and the location normalised as
// that FS's methods take it: hdfs://authority/clean/path, s3://bucket/key
// or a clean absolute local path. A location no configured FS holds is an
// error naming it.
func (r *Router) Split(location string) (FS, string, error) {
	l, err := parseLocation(location)
	if err != nil {
		return nil, "", err
	}
	switch l.scheme {
	case "", "file":
		if l.scheme == "file" && l.authority != "" && l.authority != "localhost" {
			return nil, "", fmt.Errorf("location %s: file:// with host %s is not local", location, l.authority)
		}
		if r.local == nil {
			return nil, "", fmt.Errorf("location %s: the local filesystem is not enabled", location)
		}
		return r.local, path.Clean(l.path), nil
	case "hdfs":
		h := r.hdfs[l.authority]
		if h == nil {
			for a, c := range r.hdfs {
				if sameHDFSAuthority(l.authority, a) {
					h = c
					break
				}
			}
		}
		if h == nil {
			return nil, "", fmt.Errorf("location %s: no HDFS cluster is configured for hdfs://%s", location, l.authority)
		}
		return h, h.location(path.Clean(l.path)), nil
	case "s3", "s3a", "s3n":
		bucket, key, err := s3Path(location)
		if err != nil {
			return nil, "", err
		}
		s := r.s3[bucket]
		if s == nil {
			s = r.s3Default
		}
		if s == nil {
			return nil, "", fmt.Errorf("location %s: no S3 endpoint is configured for bucket %s", location, bucket)
		}
		return s, "s3://" + bucket + "/" + key, nil
	}
	return nil, "", fmt.Errorf("location %s: unknown scheme %q", location, l.scheme)
}

// Close closes the connections of the router's filesystems.
func (r *Router) Close() error {
	var errs []error
	for _, h := range r.hdfs {
		errs = append(errs, h.Close())
	}
	return errors.Join(errs...)
}
