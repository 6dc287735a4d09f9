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
	if ix := r.scope; ix.fits(r.Databases) {
		// The exact name's entry, unless a pattern listed before it
		// matches: the same first match, without matching every entry
		// (thousands of databases listed, asked for each of them).
		at, exact := ix.exact[db]
		for _, i := range ix.patterns {
			if exact && i > at {
				break
			}
			if ok, _ := path.Match(r.Databases[i].Name, db); ok {
				return &r.Databases[i], true
			}
		}
		if exact {
			return &r.Databases[at], true
		}
		return nil, false
	}
	for i := range r.Databases {
		if ok, _ := path.Match(r.Databases[i].Name, db); ok {
			return &r.Databases[i], true
		}
	}
	return nil, false
}

// scopeIndex is Scope's index of replication.databases, made by Validate:
// the entries naming one database, by name (the first of each), and the
// entries that are patterns, in order.
type scopeIndex struct {
	of       *DatabasePolicy // &Databases[0] when it was made
	n        int
	exact    map[string]int
	patterns []int
}

func newScopeIndex(ds []DatabasePolicy) *scopeIndex {
	if len(ds) == 0 {
		return nil
	}
	ix := &scopeIndex{of: &ds[0], n: len(ds), exact: map[string]int{}}
	for i, d := range ds {
		if strings.ContainsAny(d.Name, `*?[\`) {
			ix.patterns = append(ix.patterns, i)
		} else if _, ok := ix.exact[d.Name]; !ok {
			ix.exact[d.Name] = i
		}
	}
	return ix
}

// fits reports whether ix was made of ds as they are (a policy changed
// after Validate is scanned entry by entry).
func (ix *scopeIndex) fits(ds []DatabasePolicy) bool {
	return ix != nil && len(ds) == ix.n && &ds[0] == ix.of
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

// CheckSourceRoot returns the canonical location of uri, or an error that
// names uri when it is not under one of the source roots.
func (r *Replication) CheckSourceRoot(uri string) (location.Location, error) {
	l, err := location.Parse(uri)
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
// matching path mapping (compared in canonical form). A location no
// mapping covers is an error.
//
// The result is what the DR metastore is given, so it is spelled as the
// operator wrote the mapping's target: that prefix as written, then the
// canonical path below the mapping's source (location.Append). An HA
// nameservice target hdfs://ns1/ stays hdfs://ns1/..., never ns1:8020.
// Compare results only through location.Parse.
func (r *Replication) MapPath(uri string) (string, error) {
	l, err := location.Parse(uri)
	if err != nil {
		return "", err
	}
	for _, m := range r.mappings {
		if rel, ok := l.Rel(m.source); ok {
			return location.Append(m.written, rel), nil
		}
	}
	return "", fmt.Errorf("no path mapping covers %s", uri)
}

// mapping is a compiled path mapping: its source in canonical form, and
// its target as written (the prefix of what MapPath returns).
type mapping struct {
	source  location.Location
	written string
}

// compile parses roots and mappings once, longest mapping source first.
func (r *Replication) compile() error {
	r.roots, r.mappings = nil, nil
	r.scope = newScopeIndex(r.Databases)
	for i, root := range r.SourceRoots {
		l, err := location.Parse(root)
		if err != nil {
			return fmt.Errorf("replication.source_roots[%d]: %w", i, err)
		}
		r.roots = append(r.roots, l)
	}
	for i, m := range r.PathMappings {
		s, err := location.Parse(m.Source)
		if err != nil {
			return fmt.Errorf("replication.path_mappings[%d].source: %w", i, err)
		}
		if _, err := location.Parse(m.Target); err != nil {
			return fmt.Errorf("replication.path_mappings[%d].target: %w", i, err)
		}
		r.mappings = append(r.mappings, mapping{source: s, written: m.Target})
	}
	sort.SliceStable(r.mappings, func(i, j int) bool {
		return len(r.mappings[i].source.String()) > len(r.mappings[j].source.String())
	})
	return nil
}
