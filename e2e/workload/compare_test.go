package workload

import (
	"slices"
	"strings"
	"testing"

	"github.com/hivedr/hivedr/internal/location"
)

func mapToDR(loc string) (string, error) {
	return strings.Replace(loc, "hdfs://src:8020/", "hdfs://dr:8020/", 1), nil
}

// snapshot returns a source or DR snapshot of one database with a
// partitioned and an unpartitioned table.
func snapshot(authority string) *Snapshot {
	root := "hdfs://" + authority + "/external/fin.db"
	return &Snapshot{Databases: map[string]*Database{"fin": {
		Name: "fin", Location: root, Parameters: map[string]string{},
		Tables: map[string]*Table{
			"orders": {
				Database: "fin", Name: "orders", Type: "EXTERNAL_TABLE", Location: root + "/orders",
				Columns:       []Column{{Name: "id", Type: "bigint"}, {Name: "amount", Type: "double"}},
				PartitionKeys: []Column{{Name: "dt", Type: "string"}},
				Parameters:    map[string]string{"EXTERNAL": "TRUE", "transient_lastDdlTime": authority},
				Partitions: map[string]*Partition{
					"2026-01-01": {Values: []string{"2026-01-01"}, Location: root + "/orders/dt=2026-01-01",
						Parameters: map[string]string{"numFiles": authority},
						Files:      map[string]FileSum{"000000_0": {10, 0xabc}}},
				},
			},
			"accounts": {
				Database: "fin", Name: "accounts", Type: "EXTERNAL_TABLE", Location: root + "/accounts",
				Columns:    []Column{{Name: "id", Type: "bigint"}},
				Parameters: map[string]string{"repl.last.id": authority},
				Files:      map[string]FileSum{"000000_0": {5, 1}, "000000_0_copy_1": {6, 2}},
			},
		},
	}}}
}

func strs(ds []Diff) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.String())
	}
	return out
}

func TestDiffSnapshots(t *testing.T) {
	if ds := DiffSnapshots(snapshot("src:8020"), snapshot("dr:8020"), mapToDR); len(ds) != 0 {
		t.Fatalf("equal snapshots (but for ignored parameters): %q", strs(ds))
	}
	for _, tc := range []struct {
		name    string
		perturb func(dr *Database)
		want    []string
	}{
		{"database only on DR", nil, nil},
		{"column type", func(d *Database) { d.Tables["orders"].Columns[1].Type = "string" },
			[]string{"fin.orders: column amount: type double on source, string on DR"}},
		{"columns renamed", func(d *Database) { d.Tables["accounts"].Columns[0].Name = "acct" },
			[]string{"fin.accounts: columns (id bigint) on source, (acct bigint) on DR"}},
		{"partition key", func(d *Database) { d.Tables["orders"].PartitionKeys[0].Type = "date" },
			[]string{"fin.orders: partition key dt: type string on source, date on DR"}},
		{"table missing", func(d *Database) { delete(d.Tables, "accounts") },
			[]string{"fin.accounts: missing on DR"}},
		{"table type", func(d *Database) { d.Tables["accounts"].Type = "MANAGED_TABLE" },
			[]string{`fin.accounts: table type "EXTERNAL_TABLE" on source, "MANAGED_TABLE" on DR`}},
		{"partition missing", func(d *Database) { delete(d.Tables["orders"].Partitions, "2026-01-01") },
			[]string{"fin.orders partition [2026-01-01]: missing on DR"}},
		{"location not mapped", func(d *Database) { d.Tables["accounts"].Location = "hdfs://dr:8020/elsewhere" },
			[]string{"fin.accounts: location hdfs://dr:8020/elsewhere on DR, want hdfs://dr:8020/external/fin.db/accounts (source hdfs://src:8020/external/fin.db/accounts)"}},
		{"location trailing slash", func(d *Database) { d.Tables["accounts"].Location += "/" }, nil},
		{"parameter", func(d *Database) {
			d.Tables["orders"].Parameters["EXTERNAL"] = "FALSE"
			d.Tables["orders"].Partitions["2026-01-01"].Parameters["owner"] = "x"
		}, []string{
			`fin.orders: parameter EXTERNAL: "TRUE" on source, "FALSE" on DR`,
			`fin.orders partition [2026-01-01]: parameter owner="x" only on DR`,
		}},
		{"files", func(d *Database) {
			a := d.Tables["accounts"]
			a.Files = map[string]FileSum{"000000_0": {5, 9}, "000000_0_copy_1": {7, 2}, "000000_0_copy_2": {1, 1}}
			delete(d.Tables["orders"].Partitions["2026-01-01"].Files, "000000_0")
		}, []string{
			"fin.accounts file 000000_0: CRC32C 00000001 on source, 00000009 on DR",
			"fin.accounts file 000000_0_copy_1: 6 bytes on source, 7 on DR",
			"fin.accounts file 000000_0_copy_2: only on DR",
			"fin.orders partition [2026-01-01] file 000000_0: missing on DR",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, dr := snapshot("src:8020"), snapshot("dr:8020")
			want := tc.want
			if tc.perturb == nil {
				delete(src.Databases, "fin")
				want = []string{"fin: only on DR"}
			} else {
				tc.perturb(dr.Databases["fin"])
			}
			if got := strs(DiffSnapshots(src, dr, mapToDR)); !slices.Equal(got, want) {
				t.Errorf("diffs\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

func TestPartitionName(t *testing.T) {
	keys, _ := parseColumns([]string{"dt", "city string"})
	got, err := partitionName(keys, []string{"2026-01-01 10:00", "a/b=c"})
	if want := "dt=2026-01-01 10%3A00/city=a%2Fb%3Dc"; err != nil || got != want {
		t.Errorf("partitionName = %q, %v; want %q", got, err, want)
	}
	if _, err := partitionName(keys, []string{"x"}); err == nil {
		t.Error("one value for two keys: no error")
	}
}

func TestHiddenAndRelative(t *testing.T) {
	for rel, want := range map[string]bool{"000000_0": false, "_SUCCESS": true, ".hive-staging_1/x": true, "sub/_tmp": true, "a/b": false} {
		if location.Hidden(rel) != want {
			t.Errorf("hidden(%q) = %v", rel, !want)
		}
	}
	if rel, ok := location.Below("hdfs://NN:8020/t/", "hdfs://nn:8020/t/dt=1/f"); !ok || rel != "dt=1/f" {
		t.Errorf("relative = %q, %v", rel, ok)
	}
	if _, ok := location.Below("hdfs://nn:8020/t", "hdfs://nn:8020/tx/f"); ok {
		t.Error("relative: /tx/f is not under /t")
	}
}
