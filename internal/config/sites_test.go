package config

import (
	"math/rand/v2"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const sitesYAML = `
kafka: {brokers: ["k:9092"], topic_prefix: p}
applier: {metastore: "dr:9083", instance: a}
copyd: {instance: c, cm_roots: ["hdfs://src:8020/cmroot/"]}
replication:
  source_roots: ["hdfs://src:8020/w/"]
  path_mappings: [{source: "hdfs://src:8020/", target: "hdfs://dr:8020/"}]
  databases: [{name: sales}, {name: "hr_*"}, {name: ops}]
sites:
  - name: west
    applier: {metastore: "west:9083", instance: a, dr_connections: 4}
    copyd: {instance: c}
    replication:
      path_mappings: [{source: "hdfs://src:8020/", target: "hdfs://west:8020/site/"}]
      databases: [{name: sales, rpo: 1m}, {name: "hr_*"}]
  - name: east
    applier: {metastore: "east:9083", group: east-appliers, instance: a}
`

func TestSites(t *testing.T) {
	c, err := parse([]byte(sitesYAML), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if got := c.SiteNames(); !slices.Equal(got, []string{"dr", "west", "east"}) {
		t.Errorf("sites %v", got)
	}
	if top, err := c.ForSite(""); err != nil || top != c || top.TopicSite() != "" || top.SiteName() != "dr" {
		t.Errorf("ForSite(\"\") = %v, %v; want the file's configuration, site dr", top, err)
	}
	if top, err := c.ForSite("dr"); err != nil || top != c {
		t.Errorf("ForSite(dr) = %v, %v; want the file's configuration", top, err)
	}
	w, err := c.ForSite("west")
	if err != nil {
		t.Fatal(err)
	}
	if w.TopicSite() != "west" || w.SiteName() != "west" || w.TopLevel() != c {
		t.Errorf("west: topic site %q, name %q", w.TopicSite(), w.SiteName())
	}
	if w.Applier.Group != "hivedr-applier-west" || w.Copyd.Group != "hivedr-copyd-west" {
		t.Errorf("west's groups %q and %q, want the site's own", w.Applier.Group, w.Copyd.Group)
	}
	if w.Applier.Metastore != "west:9083" || w.Applier.DRConnections != 4 || w.Applier.LookAhead != DefaultLookAhead {
		t.Errorf("west's applier %+v: want its metastore, its dr_connections and the defaults of the rest", w.Applier)
	}
	if len(w.Copyd.CMRoots) != 0 || !slices.Equal(w.Copyd.TargetRoots, []string{"hdfs://west:8020/site/"}) {
		t.Errorf("west's copyd: cm_roots %v (the site's section replaces the top-level one), target roots %v (its mappings')", w.Copyd.CMRoots, w.Copyd.TargetRoots)
	}
	if got, err := w.Replication.MapPath("hdfs://src:8020/w/sales.db/t/f"); err != nil || got != "hdfs://west:8020/site/w/sales.db/t/f" {
		t.Errorf("west maps to %q, %v", got, err)
	}
	if !slices.Equal(w.Replication.SourceRoots, c.Replication.SourceRoots) {
		t.Errorf("west's source roots %v, want the top-level ones", w.Replication.SourceRoots)
	}
	if !w.Replication.Replicated("hr_eu", "x") || w.Replication.Replicated("ops", "x") || !c.Replication.Replicated("ops", "x") {
		t.Error("west's scope is not its own")
	}
	if w.Replication.RPO("sales").Minutes() != 1 {
		t.Errorf("west's RPO of sales %s", w.Replication.RPO("sales"))
	}
	e, err := c.ForSite("east")
	if err != nil {
		t.Fatal(err)
	}
	if e.Applier.Group != "east-appliers" || e.Copyd.Group != "hivedr-copyd-east" {
		t.Errorf("east's groups %q and %q", e.Applier.Group, e.Copyd.Group)
	}
	if !e.Replication.Replicated("ops", "x") || e.Replication.Replicated("other", "x") {
		t.Error("east gives no replication section: its scope is the top-level one")
	}
	if got, _ := e.Replication.MapPath("hdfs://src:8020/f"); got != "hdfs://dr:8020/f" {
		t.Errorf("east maps to %q, want the top-level mapping", got)
	}
	if _, err := c.ForSite("north"); err == nil || !strings.Contains(err.Error(), `"north": no such site (sites: dr, west, east)`) {
		t.Errorf("ForSite(north): %v", err)
	}
}

func TestSitesErrors(t *testing.T) {
	base := "applier: {instance: a}\ncopyd: {instance: c}\n"
	for _, tc := range []struct{ yaml, want string }{
		{"sites: [{name: West}]", `sites[0].name: "West" is not a site name`},
		{"site: west\nsites: [{name: west}]", `sites[0].name: "west" is already the name of site`},
		{"sites: [{name: a}, {name: a}]", `sites[1].name: "a" is already the name of sites[0]`},
		{"sites: [{name: a, applier: {group: hivedr-applier}}]", `sites[0].applier.group: "hivedr-applier" is already applier.group`},
		{"sites: [{name: a, copyd: {group: g}}, {name: b, applier: {group: g}}]", `sites[1].applier.group: "g" is already sites[0].copyd.group`},
		{"sites: [{name: a, applier: {dr_connections: 0}}]", "sites[0] (a): applier.dr_connections: 0 must be between 1 and 1000"},
		{"sites: [{name: a, replication: {databases: [{name: s, exclude_tables: [tmp]}]}}]", "sites[0].replication.databases[0]: a further site's scope is whole databases"},
		{"sites: [{name: a, replication: {path_mappings: [{source: 'x', target: 'hdfs://b/'}]}}]", "sites[0] (a): replication.path_mappings[0].source"},
		{"sites: [{name: a, aplier: {}}]", "aplier"},
	} {
		_, err := parse([]byte(base+tc.yaml), func(string) (string, bool) { return "", false })
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\n got %v\nwant %s", tc.yaml, err, tc.want)
		}
	}
}

// DatabasePattern matches whole the names Scope puts in scope, and no
// other: checked against path.Match over generated names and patterns.
func TestDatabasePattern(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	const alphabet = "ab_1-."
	name := func() string {
		b := make([]byte, 1+rng.IntN(5))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	globs := []string{"a*", "*_1", "a?b", "[ab]*", "[^a]*", "[a-b]1", `a\*`, "*", "a.b", "ab", "[", "a[b"}
	for range 50 {
		g := []byte(name())
		g[rng.IntN(len(g))] = "*?"[rng.IntN(2)]
		globs = append(globs, string(g))
	}
	for _, g := range globs {
		r := Replication{Databases: []DatabasePolicy{{Name: g}}}
		re := regexp.MustCompile("^(?:" + r.DatabasePattern() + ")$")
		for range 200 {
			n := name()
			want, _ := path.Match(g, n)
			if got := re.MatchString(n); got != want {
				t.Errorf("pattern %q, name %q: regexp %s says %v, path.Match %v", g, n, re, got, want)
			}
		}
	}
	all := Replication{}
	if p := all.DatabasePattern(); !regexp.MustCompile("^(?:" + p + ")$").MatchString("anything") {
		t.Errorf("no databases: %s", p)
	}
	two := Replication{Databases: []DatabasePolicy{{Name: "sales"}, {Name: "HR_*"}}}
	re := regexp.MustCompile("^(?:" + two.DatabasePattern() + ")$")
	for n, want := range map[string]bool{"sales": true, "hr_eu": true, "salesx": false, "xhr_eu": false} {
		if re.MatchString(n) != want {
			t.Errorf("%s: %q matched %v", re, n, !want)
		}
	}
}
