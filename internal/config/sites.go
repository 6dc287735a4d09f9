package config

import (
	"fmt"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Site is a further DR site reading the same topics as the first (fan-out):
// one tailer publishes once, and each site's copy daemons and appliers
// read the stream with groups of their own into their own DR metastore and
// filesystem. A section a site gives replaces the top-level one for that
// site's processes (`-site NAME`); a section it omits is the top-level
// one, except the groups, which are always the site's own.
type Site struct {
	// Name names the site: lower-case letters, digits, '_' and '-', at
	// most 40. It names the site's topics (<prefix>.site.<name>.completions
	// and <prefix>.site.<name>.applier.control) and selects it with -site.
	Name string `yaml:"name"`
	// Applier tunes the site's appliers; applier.metastore is the site's
	// DR metastore. Its group defaults to hivedr-applier-<name>.
	Applier Applier `yaml:"applier"`
	// Copyd tunes the site's copy daemons. Its group defaults to
	// hivedr-copyd-<name>.
	Copyd Copyd `yaml:"copyd"`
	// Replication is the site's scope (databases: within the top-level
	// scope, which is what the tailer publishes) and its path_mappings
	// (where the site's files go). source_roots, when omitted, are the
	// top-level ones. Omitted whole: the top-level replication section.
	Replication Replication `yaml:"replication"`

	given map[string]bool // the sections the site gives
}

// UnmarshalYAML decodes a site over the file defaults of its sections and
// notes which sections it gives.
func (s *Site) UnmarshalYAML(n *yaml.Node) error {
	type plain Site
	p := plain{Applier: defaultApplier(), Copyd: defaultCopyd()}
	p.Applier.Group, p.Copyd.Group = "", "" // the site's own by default
	if err := n.Decode(&p); err != nil {
		return err
	}
	p.given = map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if !isNull(n.Content[i+1]) {
			p.given[n.Content[i].Value] = true
		}
	}
	*s = Site(p)
	return nil
}

// NewSite returns a further site named name as a file giving only its
// name would: the sections' defaults, the top-level replication section.
// Set its applier.metastore and what else differs, then Validate the
// configuration it is added to.
func NewSite(name string) Site {
	s := Site{Name: name, Applier: defaultApplier(), Copyd: defaultCopyd(), given: map[string]bool{}}
	s.Applier.Group, s.Copyd.Group = "", ""
	return s
}

// DefaultSiteName is the top-level site's name when the file gives none.
const DefaultSiteName = "dr"

var siteName = regexp.MustCompile(`^[a-z0-9_-]{1,40}$`)

// SiteName is the name of the site c's applier, copyd and replication
// sections describe: the top-level site's (site:, default dr) or, after
// ForSite, the further site's.
func (c *Config) SiteName() string {
	if c.site != "" {
		return c.site
	}
	if c.Site != "" {
		return c.Site
	}
	return DefaultSiteName
}

// TopicSite is the site's part of its topics' names: "" for the top-level
// site (whose topics keep their names), the site's name for a further
// site.
func (c *Config) TopicSite() string { return c.site }

// TopLevel is the configuration of the top-level site: c itself, or the
// one ForSite made c from. Its replication section's path mappings are
// the ones the tailer names copy targets with.
func (c *Config) TopLevel() *Config {
	if c.top != nil {
		return c.top
	}
	return c
}

// SiteNames lists every site: the top-level one first, then sites in the
// file's order.
func (c *Config) SiteNames() []string {
	names := []string{c.topName()}
	for _, s := range c.Sites {
		names = append(names, s.Name)
	}
	return names
}

func (c *Config) topName() string {
	if c.Site != "" {
		return c.Site
	}
	return DefaultSiteName
}

// ForSite returns the configuration of the site named name: c itself for
// "" or the top-level site's name, else a copy of c whose applier, copyd
// and replication sections are the site's. An unknown name is an error
// that lists the sites.
func (c *Config) ForSite(name string) (*Config, error) {
	if name == "" || name == c.topName() {
		return c, nil
	}
	for i := range c.Sites {
		s := &c.Sites[i]
		if s.Name != name {
			continue
		}
		out := *c
		out.site, out.top, out.Site = name, c, name
		out.Sites = nil
		// The site's replication section, or the top-level one's copy
		// (ensureSites).
		out.Applier, out.Copyd, out.Replication = s.Applier, s.Copyd, s.Replication
		return &out, nil
	}
	return nil, fmt.Errorf("-site %q: no such site (sites: %s)", name, strings.Join(c.SiteNames(), ", "))
}

// ensureSites fills each site's derived defaults: its groups, its
// replication's source roots (the top-level ones) and its sections'
// own derived defaults.
func (c *Config) ensureSites() {
	for i := range c.Sites {
		s := &c.Sites[i]
		if s.given == nil { // built in code without NewSite: its sections as they are
			s.given = map[string]bool{"applier": true, "copyd": true, "replication": len(s.Replication.Databases)+len(s.Replication.PathMappings) > 0}
		}
		if s.Applier.Group == "" {
			s.Applier.Group = "hivedr-applier-" + s.Name
		}
		if s.Copyd.Group == "" {
			s.Copyd.Group = "hivedr-copyd-" + s.Name
		}
		if !s.given["replication"] && len(s.Replication.Databases)+len(s.Replication.PathMappings) == 0 {
			s.Replication = c.Replication
		} else if len(s.Replication.SourceRoots) == 0 {
			s.Replication.SourceRoots = c.Replication.SourceRoots
		}
		s.Replication.EnsureDefaults()
		s.Copyd.EnsureDefaults(s.Replication.PathMappings)
		s.Applier.EnsureDefaults()
		s.Applier.MetastoreTLS.Enabled = s.Applier.MetastoreTLS.On()
	}
}

// validateSites checks the site names and each site's sections, and that
// no two sites share a consumer group (they would share checkpoints).
func (c *Config) validateSites() error {
	if c.Site != "" && !siteName.MatchString(c.Site) {
		return fmt.Errorf("site: %q is not a site name (lower-case letters, digits, '_' and '-', at most 40)", c.Site)
	}
	names := map[string]string{c.topName(): "site"}
	groups := map[string]string{c.Applier.Group: "applier.group", c.Copyd.Group: "copyd.group"}
	for i := range c.Sites {
		s := &c.Sites[i]
		key := fmt.Sprintf("sites[%d]", i)
		if !siteName.MatchString(s.Name) {
			return fmt.Errorf("%s.name: %q is not a site name (lower-case letters, digits, '_' and '-', at most 40)", key, s.Name)
		}
		if other, ok := names[s.Name]; ok {
			return fmt.Errorf("%s.name: %q is already the name of %s", key, s.Name, other)
		}
		names[s.Name] = key
		for _, g := range []struct{ key, group string }{{key + ".applier.group", s.Applier.Group}, {key + ".copyd.group", s.Copyd.Group}} {
			if other, ok := groups[g.group]; ok {
				return fmt.Errorf("%s: %q is already %s: each site's roles need groups of their own", g.key, g.group, other)
			}
			groups[g.group] = g.key
		}
		wrap := func(err error) error {
			if err == nil {
				return nil
			}
			return fmt.Errorf("%s (%s): %w", key, s.Name, err)
		}
		if err := wrap(s.Replication.Validate()); err != nil {
			return err
		}
		for j, d := range s.Replication.Databases {
			if len(d.IncludeTables) > 0 || len(d.ExcludeTables) > 0 {
				return fmt.Errorf("%s.replication.databases[%d]: a further site's scope is whole databases: include_tables and exclude_tables are the top-level scope's (what the tailer publishes)", key, j)
			}
		}
		if err := wrap(s.Copyd.Validate()); err != nil {
			return err
		}
		if err := wrap(s.Applier.Validate()); err != nil {
			return err
		}
		if err := wrap(s.Applier.MetastoreTLS.Validate("applier.metastore_tls")); err != nil {
			return err
		}
	}
	return nil
}

// DatabasePattern is a regular expression (unanchored, to be wrapped in
// ^(...)$) matching the names of the databases in scope: every name with
// no databases listed, else the listed names and patterns (path.Match
// syntax turned into regular expressions). An applier reads only the
// topics of these databases.
func (r *Replication) DatabasePattern() string {
	if len(r.Databases) == 0 {
		return ".+"
	}
	alts := make([]string, len(r.Databases))
	for i, d := range r.Databases {
		alts[i] = globRegexp(strings.ToLower(d.Name))
	}
	return strings.Join(alts, "|")
}

// globRegexp turns a path.Match pattern into an equivalent regular
// expression (for names without '/', as database names are): * any
// run of characters, ? one character, [...] a class (^ negates it), \x
// the character x.
func globRegexp(glob string) string {
	var b strings.Builder
	b.WriteString("(?:")
	for i := 0; i < len(glob); i++ {
		switch ch := glob[i]; ch {
		case '*':
			b.WriteString("[^/]*")
		case '?':
			b.WriteString("[^/]")
		case '\\':
			if i+1 < len(glob) {
				i++
				b.WriteString(regexp.QuoteMeta(glob[i : i+1]))
			}
		case '[':
			j := i + 1
			var class strings.Builder
			class.WriteByte('[')
			if j < len(glob) && glob[j] == '^' {
				class.WriteByte('^')
				j++
			}
			closed := false
			for ; j < len(glob); j++ {
				c := glob[j]
				if c == ']' {
					closed = true
					break
				}
				if c == '\\' && j+1 < len(glob) {
					j++
					c = glob[j]
				}
				if c == '-' {
					class.WriteByte('-')
					continue
				}
				class.WriteString(regexp.QuoteMeta(string(c)))
			}
			if !closed { // path.Match: a malformed pattern matches nothing
				return "(?:$.^)"
			}
			class.WriteByte(']')
			b.WriteString(class.String())
			i = j
		default:
			b.WriteString(regexp.QuoteMeta(string(ch)))
		}
	}
	b.WriteString(")")
	return b.String()
}
