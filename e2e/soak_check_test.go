//go:build soak

package e2e

import (
	"strings"
	"testing"
)

// TestSoakDiffCompactionLeftOut checks the checker's leeway for a
// compaction whose output the source removed before DR could copy it:
// DR reading the merged directories is accepted only when they hold every
// valid write ID the output held.
func TestSoakDiffCompactionLeftOut(t *testing.T) {
	src := soakState{"tx": {Valid: "1-9", Parts: map[string][]string{"": {
		"base_0000007/000000_0", "base_0000007/_metadata_acid",
		"delta_0000008_0000009/000000_0", "delta_0000008_0000009/_metadata_acid",
	}}}}
	goneLater := func(_, _, file string) bool { return strings.HasPrefix(file, "delta_0000008_0000009/") }
	cases := []struct {
		name string
		dr   []string
		ok   bool
	}{
		{"the merged deltas", []string{"base_0000007/000000_0", "base_0000007/_metadata_acid",
			"delta_0000008_0000008_0000/000000_0", "delta_0000009_0000009_0000/000000_0"}, true},
		{"a merged delta missing", []string{"base_0000007/000000_0", "base_0000007/_metadata_acid",
			"delta_0000009_0000009_0000/000000_0"}, false},
		{"a delta the output does not cover", []string{"base_0000007/000000_0", "base_0000007/_metadata_acid",
			"delta_0000008_0000008_0000/000000_0", "delta_0000009_0000009_0000/000000_0",
			"delta_0000010_0000010_0000/000000_0"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dr := soakState{"tx": {Valid: "1-9", Parts: map[string][]string{"": c.dr}}}
			lee := soakLeeway{gone: goneLater}
			d := dr.diff(src, &lee)
			if (d == "") != c.ok {
				t.Fatalf("diff = %q; want accepted %v", d, c.ok)
			}
		})
	}
	// An overwrite's base (no compactor metadata) gone later is no
	// compaction: the deltas under it are not its rows.
	over := soakState{"tx": {Valid: "1-3", Parts: map[string][]string{"": {"base_0000003/000000_0"}}}}
	dr := soakState{"tx": {Valid: "1-3", Parts: map[string][]string{"": {
		"delta_0000001_0000001_0000/000000_0", "delta_0000002_0000002_0000/000000_0"}}}}
	lee := soakLeeway{gone: func(_, _, file string) bool { return strings.HasPrefix(file, "base_0000003/") }}
	if d := dr.diff(over, &lee); d == "" {
		t.Fatal("deltas under a gone overwrite's base were accepted")
	}
}
