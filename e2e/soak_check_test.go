//go:build soak

package e2e

import (
	"slices"
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

// TestSoakDiffPartitionAtItsStamp: a partition DR holds beyond the
// source's state after N is accepted when it is, with its files, the
// partition the source had after the event it is stamped with (past N);
// one stamped at or before N, or holding other files, is not.
func TestSoakDiffPartitionAtItsStamp(t *testing.T) {
	src := soakState{"t": {Parts: map[string][]string{"a": {"000000_0"}}}}
	later := soakState{"t": {Parts: map[string][]string{"a": {"000000_0"}, "b": {"000000_0"}}}}
	partAt := func(table, part string, stamp int64, files []string) bool {
		fs, ok := later[table].Parts[part]
		return stamp > 40 && ok && slices.Equal(fs, files)
	}
	for _, c := range []struct {
		name  string
		stamp string
		files []string
		ok    bool
	}{
		{"at its own event's state", "45", []string{"000000_0"}, true},
		{"stamped at or before N", "40", []string{"000000_0"}, false},
		{"other files", "45", []string{"000000_0", "000000_0_copy_1"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dr := soakState{"t": {Parts: map[string][]string{"a": {"000000_0"}, "b": c.files}, Stamps: map[string]string{"b": c.stamp}}}
			lee := soakLeeway{partAt: partAt}
			if d := dr.diff(src, &lee); (d == "") != c.ok {
				t.Fatalf("diff = %q; want accepted %v", d, c.ok)
			}
		})
	}
}
