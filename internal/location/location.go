// Package location is hivedr's one notion of a storage location:
// hdfs://namenode:8020/p, s3://bucket/key, or an absolute local path. Every
// package (config, fs, state, copyd, the producer, the applier) parses with
// Parse and compares Locations, never raw strings, so a location spelled two
// ways (hdfs://DR-NN/w and hdfs://dr-nn:8020/w/, s3a://b/k and s3://b/k,
// file:/p and /p) is one location everywhere: in root checks, as a map
// key, in the copy daemon's same-target serialisation, and in the
// applier's prune, where a mismatch would delete files it just copied.
//
// # Canonical form
//
// Parse gives the canonical form, which String prints:
//
//   - the scheme is lower-cased, and s3a and s3n are s3 (one store, three
//     Hadoop connector names);
//   - file:///p, file://localhost/p and file:/p (the single-slash form
//     Hadoop's Path and the metastore write) are the local path /p, which
//     has no scheme;
//   - the authority is lower-cased, a port is given in decimal without
//     leading zeros, and an hdfs authority without a port gets the
//     NameNode's default, 8020, so hdfs://nn/x and hdfs://nn:8020/x are
//     one location (an HA nameservice ns1 is compared as ns1:8020 too);
//   - the path is cleaned (doubled and trailing slashes removed). It is
//     not percent-decoded: Hadoop paths are not URL-encoded, and Hive
//     escapes partition values itself, so a directory may literally be
//     named dt=10%3A00.
//
// Parse refuses what would make a location ambiguous or let a root check
// be escaped: a relative path, a "." or ".." segment, a query, a fragment,
// user information, a scheme other than file without an authority, and a
// file: location on another host.
//
// # The canonical form compares; the written form is kept
//
// The canonical form is the key of every comparison and lookup. It is not
// what hivedr writes into the DR metastore: a DR location there is spelled
// as the operator wrote the path mapping's target (that prefix as written,
// then the path below the mapping's source; see Append), so an HA
// nameservice written hdfs://ns1/ stays hdfs://ns1/ where Hadoop reads it
// and is never rewritten to ns1:8020, which Hadoop would take for a host.
package location

import (
	"fmt"
	"path"
	"strconv"
	"strings"
)

// Schemes of the canonical form.
const (
	SchemeHDFS = "hdfs"
	SchemeS3   = "s3"
	// SchemeLocal is a local path's: none.
	SchemeLocal = ""
)

// DefaultHDFSPort is the NameNode RPC port an hdfs authority without one
// means (Hadoop's default).
const DefaultHDFSPort = "8020"

// Location is a location in canonical form (see the package doc). The
// zero Location is no location; a Location from Parse is comparable with
// == and usable as a map key.
type Location struct {
	Scheme    string // lower case, s3a and s3n as s3; "" for a local path
	Authority string // lower-case host:port (hdfs always with a port) or bucket; "" for a local path
	Path      string // absolute and cleaned
}

// String returns the canonical spelling: scheme://authority/path, or the
// bare path of a local location.
func (l Location) String() string {
	if l.Scheme == SchemeLocal {
		return l.Path
	}
	return l.Scheme + "://" + l.Authority + l.Path
}

// IsLocal reports whether l is a path on the local filesystem.
func (l Location) IsLocal() bool { return l.Scheme == SchemeLocal && l.Path != "" }

// Parse returns the canonical form of a URI or an absolute path, or an
// error that quotes s and says what is wrong with it.
func Parse(s string) (Location, error) {
	l, err := parse(s)
	if err != nil {
		return Location{}, fmt.Errorf("location %q: %w", s, err)
	}
	return l, nil
}

// Canonical returns the canonical spelling of s (Parse, then String).
func Canonical(s string) (string, error) {
	l, err := Parse(s)
	if err != nil {
		return "", err
	}
	return l.String(), nil
}

// MustParse is Parse for locations known to be valid (tests, constants);
// it panics on an error.
func MustParse(s string) Location {
	l, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return l
}

func parse(s string) (Location, error) {
	var l Location
	if s == "" {
		return l, fmt.Errorf("empty")
	}
	scheme, rest, hasScheme := splitScheme(s)
	if !hasScheme {
		l.Path = s
	} else {
		if strings.ContainsAny(rest, "?#") {
			return l, fmt.Errorf("has a query or fragment")
		}
		l.Scheme = strings.ToLower(scheme)
		if a, ok := strings.CutPrefix(rest, "//"); ok {
			auth, p, _ := strings.Cut(a, "/")
			l.Authority, l.Path = auth, "/"+p
		} else {
			l.Path = rest // scheme:/p, no authority
		}
	}
	if !strings.HasPrefix(l.Path, "/") {
		return Location{}, fmt.Errorf("path is not absolute")
	}
	for _, seg := range strings.Split(l.Path, "/") {
		if seg == "." || seg == ".." {
			return Location{}, fmt.Errorf("has a %q segment", seg)
		}
	}
	l.Path = path.Clean(l.Path)
	switch l.Scheme {
	case "s3a", "s3n":
		l.Scheme = SchemeS3
	case "file":
		if a := strings.ToLower(l.Authority); a != "" && a != "localhost" {
			return Location{}, fmt.Errorf("file: location on host %s is not local", l.Authority)
		}
		l.Scheme, l.Authority = SchemeLocal, ""
		return l, nil
	case SchemeLocal:
		return l, nil
	}
	auth, err := CanonicalAuthority(l.Scheme, l.Authority)
	if err != nil {
		return Location{}, err
	}
	l.Authority = auth
	return l, nil
}

// splitScheme splits s at the colon ending its URI scheme, if s starts
// with one (RFC 3986: a letter, then letters, digits, "+", "-" or ".").
// A path like /a:b or dt=10:00/x has none.
func splitScheme(s string) (scheme, rest string, ok bool) {
	i := strings.IndexByte(s, ':')
	if i <= 0 {
		return "", s, false
	}
	for j := 0; j < i; j++ {
		c := s[j]
		letter := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
		if !letter && (j == 0 || !('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return "", s, false
		}
	}
	return s[:i], s[i+1:], true
}

// CanonicalAuthority returns the canonical form of an authority of a
// location of scheme (canonical, e.g. "hdfs"): lower case, the port in
// decimal, and for hdfs the default port added when there is none. It
// refuses an empty authority, user information and a port that is not a
// number from 1 to 65535. The router keys its clusters by it, so a
// configured authority ns1 or dr-nn:8020 matches locations written either
// way.
func CanonicalAuthority(scheme, authority string) (string, error) {
	if authority == "" {
		return "", fmt.Errorf("%s location without an authority (host, nameservice or bucket)", scheme)
	}
	if strings.Contains(authority, "@") {
		return "", fmt.Errorf("authority %q has user information", authority)
	}
	if strings.ContainsAny(authority, "/?#") {
		return "", fmt.Errorf("authority %q is not a host[:port], nameservice or bucket", authority)
	}
	host, port, hasPort, err := splitPort(strings.ToLower(authority))
	if err != nil {
		return "", fmt.Errorf("authority %q: %w", authority, err)
	}
	if !hasPort {
		if scheme != SchemeHDFS {
			return host, nil
		}
		port = DefaultHDFSPort
	}
	return host + ":" + port, nil
}

// splitPort splits host[:port] (the host may be a bracketed IPv6
// address), returning the port canonical.
func splitPort(a string) (host, port string, hasPort bool, err error) {
	var p string
	switch {
	case strings.HasPrefix(a, "["):
		end := strings.IndexByte(a, ']')
		if end < 0 {
			return "", "", false, fmt.Errorf("unclosed [")
		}
		host, p = a[:end+1], a[end+1:]
		if p == "" {
			return host, "", false, nil
		}
		if p[0] != ':' {
			return "", "", false, fmt.Errorf("unexpected %q after ]", p)
		}
		p = p[1:]
	case strings.Count(a, ":") > 1:
		return "", "", false, fmt.Errorf("an IPv6 address must be in brackets")
	default:
		var found bool
		host, p, found = strings.Cut(a, ":")
		if !found {
			return host, "", false, nil
		}
	}
	if host == "" {
		return "", "", false, fmt.Errorf("no host")
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil || n == 0 {
		return "", "", false, fmt.Errorf("port %q is not a number from 1 to 65535", p)
	}
	return host, strconv.FormatUint(n, 10), true, nil
}

// Within reports whether l is root itself or lies under it, comparing
// whole path segments (/warehouse does not cover /warehousex).
func (l Location) Within(root Location) bool {
	_, ok := l.Rel(root)
	return ok
}

// Rel returns the path of l below root: "" for root itself, "a/b" for
// root/a/b. ok is false when l is not within root.
func (l Location) Rel(root Location) (rel string, ok bool) {
	if l.Scheme != root.Scheme || l.Authority != root.Authority || root.Path == "" {
		return "", false
	}
	switch {
	case l.Path == root.Path:
		return "", true
	case root.Path == "/":
		return l.Path[1:], true
	case strings.HasPrefix(l.Path, root.Path+"/"):
		return l.Path[len(root.Path)+1:], true
	}
	return "", false
}

// Dir returns the directory holding l (l itself for a root).
func (l Location) Dir() Location {
	l.Path = path.Dir(l.Path)
	return l
}

// Base returns the last element of l's path ("/" for a root).
func (l Location) Base() string { return path.Base(l.Path) }

// Append returns the location written as prefix (a URI or path as an
// operator spelled it, e.g. a path mapping's target) followed by rel, a
// slash-separated path below it (as Rel returns it). The prefix keeps its
// spelling, authority and all; only its trailing slashes go when rel is
// empty and the prefix is not a root. In canonical form the result is
// Parse(prefix) joined with rel.
func Append(prefix, rel string) string {
	rel = strings.Trim(rel, "/")
	switch {
	case rel != "" && strings.HasSuffix(prefix, "/"):
		return prefix + rel
	case rel != "":
		return prefix + "/" + rel
	}
	if l, err := Parse(prefix); err == nil && l.Path == "/" {
		return prefix
	}
	return strings.TrimRight(prefix, "/")
}

// Below returns the path of loc below dir, both written as full
// locations; ok is false when either does not parse or loc is not
// strictly under dir (dir itself is not below it).
func Below(dir, loc string) (rel string, ok bool) {
	d, err := Parse(dir)
	if err != nil {
		return "", false
	}
	l, err := Parse(loc)
	if err != nil {
		return "", false
	}
	rel, ok = l.Rel(d)
	return rel, ok && rel != ""
}

// Same reports whether a and b name one location once normalised; two
// strings of which either does not parse are the same only when equal.
func Same(a, b string) bool {
	la, errA := Parse(a)
	lb, errB := Parse(b)
	if errA != nil || errB != nil {
		return a == b
	}
	return la == lb
}

// Hidden reports whether rel, a slash-separated path (as Rel returns
// it), has a segment starting with "." or "_": files Hive's readers skip
// (staging files, _SUCCESS markers), so replication neither lists nor
// compares them.
func Hidden(rel string) bool {
	for _, seg := range strings.Split(rel, "/") {
		if strings.HasPrefix(seg, ".") || strings.HasPrefix(seg, "_") {
			return true
		}
	}
	return false
}
