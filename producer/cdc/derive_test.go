package cdc

import (
	"slices"
	"strings"
	"testing"

	"github.com/hivedr/hivedr/schemas"
)

// The events of the histories below, as the tailer decodes them.

var partKeys = []schemas.Column{{Name: "d", Type: "string"}}

func tbl(db, name string, keys ...schemas.Column) *schemas.Table {
	return &schemas.Table{Database: db, Name: name, TableType: "EXTERNAL_TABLE", Location: "hdfs://nn/w/" + db + "/" + name,
		Columns: []schemas.Column{{Name: "x", Type: "int"}}, PartitionKeys: keys}
}

func part(t *schemas.Table, v string) schemas.Partition {
	return schemas.Partition{Values: []string{v}, Location: t.Location + "/d=" + v}
}

func ev(typ schemas.EventType, p schemas.Payload) *schemas.Event {
	return &schemas.Event{EventType: typ, Payload: p}
}

func createDB(db string) *schemas.Event {
	return ev(schemas.EventCreateDatabase, &schemas.DatabaseChange{After: &schemas.Database{Name: db, Location: "hdfs://nn/w/" + db}})
}

func dropDB(db string) *schemas.Event {
	return ev(schemas.EventDropDatabase, &schemas.DatabaseChange{Before: &schemas.Database{Name: db}})
}

func createTable(t *schemas.Table) *schemas.Event {
	return ev(schemas.EventCreateTable, &schemas.TableChange{After: t})
}

func dropTable(t *schemas.Table) *schemas.Event {
	return ev(schemas.EventDropTable, &schemas.TableChange{Before: t})
}

func alterTable(before, after *schemas.Table) *schemas.Event {
	return ev(schemas.EventAlterTable, &schemas.TableChange{Before: before, After: after})
}

func addParts(t *schemas.Table, vs ...string) *schemas.Event {
	pc := &schemas.PartitionChange{Table: t}
	for _, v := range vs {
		pc.After = append(pc.After, part(t, v))
	}
	return ev(schemas.EventAddPartition, pc)
}

func dropParts(t *schemas.Table, vs ...string) *schemas.Event {
	pc := &schemas.PartitionChange{Table: t}
	for _, v := range vs {
		pc.Before = append(pc.Before, part(t, v))
	}
	return ev(schemas.EventDropPartition, pc)
}

func insertInto(t *schemas.Table, v string) *schemas.Event {
	id := &schemas.InsertData{Table: t}
	if v != "" {
		p := part(t, v)
		p.Parameters = map[string]string{"numFiles": "2"}
		id.Partition = &p
	}
	return ev(schemas.EventInsert, id)
}

func commit(writes ...schemas.TableWriteID) *schemas.Event {
	return ev(schemas.EventCommitTxn, &schemas.Transaction{TxnIDs: []int64{7}, WriteIDs: writes})
}

func snap(typ schemas.EventType, boot string, p schemas.Payload, tables ...string) *schemas.Event {
	e := ev(typ, p)
	e.Snapshot = &schemas.SnapshotInfo{BootstrapID: boot, Tables: tables}
	return e
}

// step is one event read from one database's topic.
type step struct {
	db string
	ev *schemas.Event
}

// render is a change as "op db.table/partition".
func render(c Change) string {
	s := string(c.Op) + " " + c.Key.Database
	if c.Key.Table != "" {
		s += "." + c.Key.Table
	}
	if c.Key.Partition != "" {
		s += "/" + c.Key.Partition
	}
	return s
}

func keysOf(x *Index) []string {
	var out []string
	for db, d := range x.dbs {
		if d.obj.image != nil {
			out = append(out, db)
		}
		for t, te := range d.tables {
			if te.obj.image != nil {
				out = append(out, db+"."+t)
			}
			for p, e := range te.parts {
				if e.image != nil {
					out = append(out, db+"."+t+"/"+p)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

func TestDerive(t *testing.T) {
	a, b := tbl("s", "a", partKeys...), tbl("s", "b")
	a2 := tbl("s", "a2", partKeys...)
	aOther := tbl("o", "a", partKeys...)
	aNewSchema := tbl("s", "a", partKeys...)
	aNewSchema.Columns = []schemas.Column{{Name: "y", Type: "string"}}
	for _, tc := range []struct {
		name  string
		steps []step
		want  []string // every step's changes, in order
		live  []string // the index after
	}{{
		name:  "create, add, insert, alter",
		steps: []step{{"s", createDB("s")}, {"s", createTable(a)}, {"s", addParts(a, "1", "2")}, {"s", insertInto(a, "1")}, {"s", insertInto(b, "")}},
		want:  []string{"c s", "c s.a", "c s.a/d=1", "c s.a/d=2", "u s.a/d=1", "c s.b"},
		live:  []string{"s", "s.a", "s.a/d=1", "s.a/d=2", "s.b"},
	}, {
		name:  "an alter that changes nothing writes nothing",
		steps: []step{{"s", createTable(a)}, {"s", alterTable(a, a)}},
		want:  []string{"c s.a"},
		live:  []string{"s.a"},
	}, {
		name:  "drop table deletes its partitions first",
		steps: []step{{"s", createTable(a)}, {"s", addParts(a, "1", "2")}, {"s", dropTable(a)}},
		want:  []string{"c s.a", "c s.a/d=1", "c s.a/d=2", "d s.a/d=1", "d s.a/d=2", "d s.a"},
	}, {
		name:  "drop partitions",
		steps: []step{{"s", createTable(a)}, {"s", addParts(a, "1", "2")}, {"s", dropParts(a, "2", "9")}},
		want:  []string{"c s.a", "c s.a/d=1", "c s.a/d=2", "d s.a/d=2"},
		live:  []string{"s.a", "s.a/d=1"},
	}, {
		name:  "drop database deletes everything under it",
		steps: []step{{"s", createDB("s")}, {"s", createTable(b)}, {"s", createTable(a)}, {"s", addParts(a, "1")}, {"s", dropDB("s")}},
		want:  []string{"c s", "c s.b", "c s.a", "c s.a/d=1", "d s.a/d=1", "d s.a", "d s.b", "d s"},
	}, {
		name:  "rename within a database moves the partitions",
		steps: []step{{"s", createTable(a)}, {"s", addParts(a, "1")}, {"s", alterTable(a, a2)}},
		want:  []string{"c s.a", "c s.a/d=1", "d s.a/d=1", "d s.a", "c s.a2", "c s.a2/d=1"},
		live:  []string{"s.a2", "s.a2/d=1"},
	}, {
		name: "rename across databases: the first copy writes both, the second nothing",
		steps: []step{{"s", createTable(a)}, {"s", addParts(a, "1")},
			{"o", alterTable(a, aOther)}, {"s", alterTable(a, aOther)}},
		want: []string{"c s.a", "c s.a/d=1", "d s.a/d=1", "d s.a", "c o.a", "c o.a/d=1"},
		live: []string{"o.a", "o.a/d=1"},
	}, {
		name:  "a table made again at its name loses the old one's partitions",
		steps: []step{{"s", createTable(a)}, {"s", addParts(a, "1")}, {"s", createTable(aNewSchema)}},
		want:  []string{"c s.a", "c s.a/d=1", "d s.a/d=1", "u s.a"},
		live:  []string{"s.a"},
	}, {
		name: "a commit touches each object of its database once",
		steps: []step{{"s", createTable(a)}, {"s", addParts(a, "1")}, {"s", commit(
			schemas.TableWriteID{Database: "s", Table: "a", Partition: "d=1", WriteID: 1},
			schemas.TableWriteID{Database: "s", Table: "a", Partition: "d=1", WriteID: 1},
			schemas.TableWriteID{Database: "o", Table: "x", WriteID: 1},
			schemas.TableWriteID{Database: "s", Table: "unknown", WriteID: 1})}},
		want: []string{"c s.a", "c s.a/d=1", "u s.a/d=1"},
		live: []string{"s.a", "s.a/d=1"},
	}, {
		name: "a bootstrap reads, and its end deletes what it did not read",
		steps: []step{{"s", createTable(a)}, {"s", addParts(a, "1", "2")}, {"s", createTable(b)},
			{"s", snap(schemas.EventSnapshotBegin, "B", &schemas.DatabaseChange{After: &schemas.Database{Name: "s"}})},
			{"s", snap(schemas.EventSnapshotTable, "B", &schemas.TableChange{After: a})},
			{"s", snap(schemas.EventSnapshotPartition, "B", &schemas.PartitionChange{Table: a, After: []schemas.Partition{part(a, "2"), part(a, "3")}})},
			{"s", snap(schemas.EventSnapshotEnd, "B", nil)}},
		want: []string{"c s.a", "c s.a/d=1", "c s.a/d=2", "c s.b", "r s", "r s.a", "r s.a/d=2", "r s.a/d=3", "d s.a/d=1", "d s.b"},
		live: []string{"s", "s.a", "s.a/d=2", "s.a/d=3"},
	}, {
		name: "a table-scoped bootstrap's end leaves the other tables",
		steps: []step{{"s", createTable(a)}, {"s", addParts(a, "1")}, {"s", createTable(b)},
			{"s", snap(schemas.EventSnapshotBegin, "B", &schemas.DatabaseChange{After: &schemas.Database{Name: "s"}}, "a")},
			{"s", snap(schemas.EventSnapshotTable, "B", &schemas.TableChange{After: a}, "a")},
			{"s", snap(schemas.EventSnapshotEnd, "B", nil, "a")}},
		want: []string{"c s.a", "c s.a/d=1", "c s.b", "r s", "r s.a", "d s.a/d=1"},
		live: []string{"s", "s.a", "s.b"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			x := NewIndex()
			var got []string
			for _, st := range tc.steps {
				cs := Derive(st.ev, st.db, x)
				for _, c := range cs {
					got = append(got, render(c))
					switch c.Op {
					case OpUpdate, OpDelete:
						if c.Before == nil {
							t.Errorf("%s without a before image", render(c))
						}
					}
					if c.Op != OpDelete && c.After == nil {
						t.Errorf("%s without an after image", render(c))
					}
				}
				x.Apply(cs)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("changes:\n got %s\nwant %s", strings.Join(got, ", "), strings.Join(tc.want, ", "))
			}
			if live := keysOf(x); !slices.Equal(live, tc.live) {
				t.Errorf("live after: got %v, want %v", live, tc.live)
			}
			if x.Len() != len(tc.live) {
				t.Errorf("Len %d, want %d", x.Len(), len(tc.live))
			}
		})
	}
}

func TestRenameMovesManagedLocations(t *testing.T) {
	a, a2 := tbl("s", "a", partKeys...), tbl("s", "a2", partKeys...)
	x := NewIndex()
	for _, e := range []*schemas.Event{createTable(a), addParts(a, "1"), alterTable(a, a2)} {
		x.Apply(Derive(e, "s", x))
	}
	im, _ := x.Get(Key{Database: "s", Table: "a2", Partition: "d=1"})
	if im == nil || im.Location != a2.Location+"/d=1" {
		t.Fatalf("moved partition's image %+v, want location %s", im, a2.Location+"/d=1")
	}
}

func TestPartitionNameEscapes(t *testing.T) {
	got := partitionName([]schemas.Column{{Name: "D"}, {Name: "k"}}, []string{"a/b", ""})
	if want := "d=a%2Fb/k=__HIVE_DEFAULT_PARTITION__"; got != want {
		t.Fatalf("partitionName = %q, want %q", got, want)
	}
}
