package config

import (
	"fmt"
	"github.com/hivedr/hivedr/internal/location"
	"path"
	"sort"
	"strings"
)

// Scope returns the policy that puts db in scope, or false when db does not
// replicate. With no databases configured, every database is in scope. The
// first matching entry wins, so list exact names before broad patterns.
func (r *Replication) Scope(db string) (*DatabasePolicy, bool) {
	db = strings.ToLower(db)
	if len(r.Databases) == 0 {
		return &everything, true
	}
	for i := range r.Databases {
		if ok, _ := path.Match(r.Databases[i].Name, db); ok {
			return &r.Databases[i], true
		}
	}
	return nil, false
}

var everything = DatabasePolicy{}

// TableIncluded reports whether table replicates under p: excluded tables
// never do; with include patterns, only matching tables do.
func (p *DatabasePolicy) TableIncluded(table string) bool {
	table = strings.ToLower(table)
	for _, re := range p.exclude {
		if re.MatchString(table) {
			return false
		}
	}
	if len(p.include) == 0 {
		return true
	}
	for _, re := range p.include {
		if re.MatchString(table) {
			return true
		}
	}
	return false
}

// Location is a parsed, normalised storage location (see package
// location).
type Location = location.Location

// ParseLocation normalises a URI or absolute path (location.Parse).
func ParseLocation(s string) (Location, error) { return location.Parse(s) }

// CheckSourceRoot returns the normalised location of uri, or an error that
// names uri when it is not under one of the source roots.
func (r *Replication) CheckSourceRoot(uri string) (Location, error) {
	l, err := ParseLocation(uri)
	if err != nil {
		return l, err
	}
	for _, root := range r.roots {
		if l.Within(root) {
			return l, nil
		}
	}
	return l, fmt.Errorf("path %s is outside the source roots %v", uri, r.SourceRoots)
}

// MapPath rewrites a source location into its DR location by the longest
// matching path mapping. A location no mapping covers is an error.
func (r *Replication) MapPath(uri string) (string, error) {
	l, err := ParseLocation(uri)
	if err != nil {
		return "", err
	}
	for _, m := range r.mappings {
		if !l.Within(m.source) {
			continue
		}
		t := m.target
		t.Path = path.Join(t.Path, strings.TrimPrefix(l.Path, m.source.Path))
		return t.String(), nil
	}
	return "", fmt.Errorf("no path mapping covers %s", uri)
}

type mapping struct{ source, target Location }

// compile parses roots and mappings once, longest mapping source first.
func (r *Replication) compile() error {
	r.roots, r.mappings = nil, nil
	for i, root := range r.SourceRoots {
		l, err := ParseLocation(root)
		if err != nil {
			return fmt.Errorf("replication.source_roots[%d]: %w", i, err)
		}
		r.roots = append(r.roots, l)
	}
	for i, m := range r.PathMappings {
		s, err := ParseLocation(m.Source)
		if err != nil {
			return fmt.Errorf("replication.path_mappings[%d].source: %w", i, err)
		}
		t, err := ParseLocation(m.Target)
		if err != nil {
			return fmt.Errorf("replication.path_mappings[%d].target: %w", i, err)
		}
		r.mappings = append(r.mappings, mapping{s, t})
	}
	sort.SliceStable(r.mappings, func(i, j int) bool {
		return len(r.mappings[i].source.String()) > len(r.mappings[j].source.String())
	})
	return nil
}
