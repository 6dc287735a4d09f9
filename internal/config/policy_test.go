package config

import (
	"testing"

	"github.com/hivedr/hivedr/internal/location"
)

// TestMapPathKeepsTheTargetAsWritten: sources match in canonical form
// whatever their spelling, and the DR location keeps the mapping target's
// spelling (an HA nameservice is not given a port), naming the canonical
// join of target and relative path.
func TestMapPathKeepsTheTargetAsWritten(t *testing.T) {
	c, err := Load(write(t, `
replication:
  source_roots: ["hdfs://src-nn/warehouse", "s3a://src-bucket/ext/", "file:/local/src"]
  path_mappings:
    - {source: "hdfs://SRC-NN/", target: "hdfs://ns1/"}
    - {source: "hdfs://src-nn:8020/warehouse/big.db", target: "hdfs://DR-NN/Big/"}
    - {source: "s3://src-bucket/ext", target: "s3a://dr-bucket/ext"}
    - {source: "/local/src", target: "file:/local/dr"}
`))
	if err != nil {
		t.Fatal(err)
	}
	for src, want := range map[string]string{
		"hdfs://src-nn/warehouse/db/t/f":            "hdfs://ns1/warehouse/db/t/f",
		"hdfs://src-nn:8020/warehouse//db/t/":       "hdfs://ns1/warehouse/db/t",
		"HDFS://Src-NN:8020/warehouse/db/t/f":       "hdfs://ns1/warehouse/db/t/f",
		"hdfs://src-nn/warehouse/big.db/t/f":        "hdfs://DR-NN/Big/t/f", // the longer source wins in canonical form
		"hdfs://src-nn:8020/warehouse/big.db":       "hdfs://DR-NN/Big",
		"s3a://src-bucket/ext/t/f":                  "s3a://dr-bucket/ext/t/f",
		"s3n://SRC-BUCKET/ext/t/f":                  "s3a://dr-bucket/ext/t/f",
		"file:///local/src/t/f":                     "file:/local/dr/t/f",
		"/local/src/t/f":                            "file:/local/dr/t/f",
		"hdfs://src-nn/warehouse/dt=10%3A00/f":      "hdfs://ns1/warehouse/dt=10%3A00/f",
		"hdfs://src-nn/warehouse/big.dbx/t/f":       "hdfs://ns1/warehouse/big.dbx/t/f", // whole segments
		"hdfs://src-nn:8020/warehouse/Big.db/t/MiX": "hdfs://ns1/warehouse/Big.db/t/MiX",
	} {
		if _, err := c.Replication.CheckSourceRoot(src); err != nil {
			t.Errorf("CheckSourceRoot(%s): %v", src, err)
		}
		got, err := c.Replication.MapLocation(src)
		if err != nil || got != want {
			t.Errorf("MapLocation(%s) = %q, %v; want %q", src, got, err, want)
		}
	}
	for _, src := range []string{"hdfs://src-nn:8021/warehouse/t", "hdfs://other/warehouse/t", "s3://src-bucket/extra/t"} {
		if got, err := c.Replication.MapLocation(src); err == nil {
			t.Errorf("MapLocation(%s) = %s, want an error", src, got)
		}
	}
	// The written DR location is the canonical join.
	got, _ := c.Replication.MapPath("hdfs://src-nn/warehouse/db/t")
	if l := location.MustParse(got); l != location.MustParse("hdfs://ns1:8020/warehouse/db/t") {
		t.Errorf("MapPath gave %s = %s in canonical form", got, l)
	}
}
