package workload

import (
	"strings"
	"testing"
)

func TestWarehouseLayout(t *testing.T) {
	for _, c := range []struct {
		tables, partitions      int
		partitioned, managed    int
		wantFirst, wantLastPart int // partitions of the first and the last partitioned table
	}{
		{tables: 4, partitions: 10, partitioned: 2, managed: 2, wantFirst: 5, wantLastPart: 5},
		{tables: 50, partitions: 5000, partitioned: 26, managed: 25, wantFirst: 193, wantLastPart: 192},
		{tables: 3, partitions: 7, partitioned: 2, managed: 1, wantFirst: 4, wantLastPart: 3},
		{tables: 2, partitions: 0, partitioned: 2, managed: 1, wantFirst: 0, wantLastPart: 0},
	} {
		spec := WarehouseSpec{Database: "w", Tables: c.tables, Partitions: c.partitions, External: "hdfs://nn/external/", Warehouse: "hdfs://nn/warehouse"}
		ts := spec.Layout()
		if len(ts) != c.tables {
			t.Fatalf("%+v: %d tables", c, len(ts))
		}
		var parts, partitioned, managed int
		var counts []int
		names := map[string]bool{}
		for _, tb := range ts {
			names[tb.Name] = true
			parts += tb.Partitions
			if len(tb.Keys) > 0 {
				partitioned++
				counts = append(counts, tb.Partitions)
			} else if tb.Partitions != 0 {
				t.Errorf("%+v: unpartitioned %s has %d partitions", c, tb.Name, tb.Partitions)
			}
			if tb.Managed {
				managed++
				if !strings.HasPrefix(spec.Location(tb), "hdfs://nn/warehouse/w.db/") {
					t.Errorf("managed %s at %s", tb.Name, spec.Location(tb))
				}
			} else if spec.Location(tb) != "hdfs://nn/external/w.db/"+tb.Name {
				t.Errorf("external %s at %s", tb.Name, spec.Location(tb))
			}
		}
		if parts != c.partitions || partitioned != c.partitioned || managed != c.managed || len(names) != c.tables {
			t.Errorf("%+v: %d partitions, %d partitioned, %d managed, %d names", c, parts, partitioned, managed, len(names))
		}
		if counts[0] != c.wantFirst || counts[len(counts)-1] != c.wantLastPart {
			t.Errorf("%+v: partitions per table %v", c, counts)
		}
	}
}

func TestWarehousePartitions(t *testing.T) {
	spec := WarehouseSpec{Database: "w", Tables: 2, Partitions: 10, External: "hdfs://nn/e", Warehouse: "hdfs://nn/w"}
	ts := spec.Layout()
	seen := map[string]bool{}
	for _, tb := range ts {
		obj := tb.TableObject("w", spec.Location(tb))
		parts := tb.PartitionObjects(obj, 0, tb.Partitions)
		for _, p := range parts {
			if len(p.Values) != len(tb.Keys) || seen[p.Sd.Location] || !strings.HasPrefix(p.Sd.Location, obj.Sd.Location+"/") {
				t.Errorf("%s partition %v at %s", tb.Name, p.Values, p.Sd.Location)
			}
			seen[p.Sd.Location] = true
		}
	}
	if got := ts[1].PartitionObjects(ts[1].TableObject("w", "hdfs://nn/w/w.db/t"), 5, 6)[0].Sd.Location; got != "hdfs://nn/w/w.db/t/dt=2020-01-02/region=us" {
		t.Errorf("partition 5 of a two-key table at %s", got)
	}
	if p, err := hdfsPath("hdfs://nn:8020/a/b"); err != nil || p != "/a/b" {
		t.Errorf("hdfsPath: %q %v", p, err)
	}
}
