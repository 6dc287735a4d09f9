// Package location parses and compares storage locations: hdfs://nn:8020/p,
// s3://bucket/key, or absolute local paths. Every root check and path
// mapping in hivedr goes through it, so all agree on what a location is.
package location

import (
	"fmt"
	"path"
	"strings"
)

// Location is a parsed, normalised storage location.
type Location struct {
	Scheme    string // lower case; "" for a local path
	Authority string // lower case host[:port] or bucket
	Path      string // absolute, cleaned, exactly as the store names it
}

func (l Location) String() string {
	if l.Scheme == "" {
		return l.Path
	}
	return l.Scheme + "://" + l.Authority + l.Path
}

// Parse normalises a URI or absolute path. It refuses relative paths, "."
// and ".." segments (a location must name its place directly, so a root
// check on it cannot be escaped), and queries or fragments. Paths are kept
// verbatim, not percent-decoded: Hadoop paths are not URL-encoded (Hive
// escapes partition values itself, so a directory may literally be named
// dt=10%3A00). file:///p is the local path /p.
func Parse(s string) (Location, error) {
	var l Location
	if scheme, rest, ok := strings.Cut(s, "://"); ok {
		if scheme == "" || strings.ContainsAny(scheme, "/?#") {
			return l, fmt.Errorf("location %q: bad scheme", s)
		}
		if strings.ContainsAny(rest, "?#") {
			return l, fmt.Errorf("location %q: has a query or fragment", s)
		}
		auth, p, _ := strings.Cut(rest, "/")
		if strings.Contains(auth, "@") {
			return l, fmt.Errorf("location %q: has user information", s)
		}
		l.Scheme, l.Authority, l.Path = strings.ToLower(scheme), strings.ToLower(auth), "/"+p
		if l.Scheme == "file" && l.Authority == "" {
			l.Scheme = ""
		}
	} else {
		l.Path = s
	}
	if !strings.HasPrefix(l.Path, "/") {
		return l, fmt.Errorf("location %q: path is not absolute", s)
	}
	for _, seg := range strings.Split(l.Path, "/") {
		if seg == "." || seg == ".." {
			return l, fmt.Errorf("location %q: has a %q segment", s, seg)
		}
	}
	l.Path = path.Clean(l.Path)
	return l, nil
}

// Within reports whether l is root itself or lies under it, comparing
// whole path segments (/warehouse does not cover /warehousex).
func (l Location) Within(root Location) bool {
	if l.Scheme != root.Scheme || l.Authority != root.Authority {
		return false
	}
	if root.Path == "/" || l.Path == root.Path {
		return true
	}
	return strings.HasPrefix(l.Path, root.Path+"/")
}
