package fs

import (
	"errors"
	"fmt"
	"strings"

	"github.com/hivedr/hivedr/internal/location"
)

// Router maps a location to the FS that holds it, by the scheme and
// authority of its canonical form (package location): hdfs://authority to
// the cluster configured with that authority (with or without the default
// port 8020, in any case), s3://bucket (or s3a://, s3n://) to the endpoint
// serving the bucket, and absolute paths, file:/p, file:///p and
// file://localhost/p to the local filesystem when allowed. Locations it
// returns are canonical. It is safe for concurrent use.
type Router struct {
	local     *Local
	hdfs      map[string]*HDFS // by canonical authority
	s3        map[string]*S3   // by bucket, lower case
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
		hc.Kerberos = c.Kerberos
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

// Split returns the FS holding loc and loc's canonical form, which that
// FS's methods take: hdfs://authority/clean/path, s3://bucket/key or a
// clean absolute local path. A location no configured FS holds is an
// error naming it.
func (r *Router) Split(loc string) (FS, string, error) {
	l, err := location.Parse(loc)
	if err != nil {
		return nil, "", err
	}
	f, err := r.route(l)
	if err != nil {
		return nil, "", fmt.Errorf("location %s: %w", loc, err)
	}
	return f, l.String(), nil
}

// ErrNoStore is returned (wrapped) for a location no configured store
// holds: an HDFS cluster or S3 bucket the configuration does not list,
// the local filesystem when it is not enabled, an unknown scheme. Trying
// again does not help; the configuration must change.
var ErrNoStore = errors.New("no configured filesystem holds it")

// route returns the FS holding the canonical location l.
func (r *Router) route(l location.Location) (FS, error) {
	switch l.Scheme {
	case location.SchemeLocal:
		if r.local == nil {
			return nil, fmt.Errorf("%w: the local filesystem is not enabled (filesystems.local)", ErrNoStore)
		}
		return r.local, nil
	case location.SchemeHDFS:
		if h := r.hdfs[l.Authority]; h != nil {
			return h, nil
		}
		return nil, fmt.Errorf("%w: no HDFS cluster is configured for hdfs://%s", ErrNoStore, l.Authority)
	case location.SchemeS3:
		if l.Path == "/" {
			return nil, fmt.Errorf("%w: want s3://bucket/key", ErrNoStore)
		}
		if s := r.s3[l.Authority]; s != nil {
			return s, nil
		}
		if r.s3Default != nil {
			return r.s3Default, nil
		}
		return nil, fmt.Errorf("%w: no S3 endpoint is configured for bucket %s", ErrNoStore, l.Authority)
	}
	return nil, fmt.Errorf("%w: unknown scheme %q", ErrNoStore, l.Scheme)
}

// Close closes the connections of the router's filesystems.
func (r *Router) Close() error {
	var errs []error
	for _, h := range r.hdfs {
		errs = append(errs, h.Close())
	}
	return errors.Join(errs...)
}
