package applier

import (
	"context"
	"testing"
	"time"

	"github.com/beltran/gohive/hive_metastore"
)

func TestCacheApply(t *testing.T) {
	db := &hive_metastore.Database{Name: "sales"}
	orders := &hive_metastore.Table{DbName: "sales", TableName: "orders"}
	p1 := &hive_metastore.Partition{Values: []string{"1"}}
	ok := TableKey{DB: "sales", Name: "orders"}
	pk := partKey(ok, []string{"1"})

	c := newCache("Sales")
	c.apply([]Action{CreateDatabase{DB: db}, CreateTable{Table: orders}, AddPartitions{DB: "sales", Table: "orders", Parts: []*hive_metastore.Partition{p1}}})
	if c.dbs["sales"] != db || c.tables[ok] != orders || c.parts[pk] != p1 {
		t.Fatalf("after creates: %v %v %v", c.dbs, c.tables, c.parts)
	}
	// Other databases are never cached.
	c.apply([]Action{CreateTable{Table: &hive_metastore.Table{DbName: "archive", TableName: "x"}}})
	if _, known := c.tables[TableKey{DB: "archive", Name: "x"}]; known {
		t.Error("cached a table of another database")
	}
	c.apply([]Action{DropPartitions{DB: "sales", Table: "orders", Values: [][]string{{"1"}}}})
	if p, known := c.parts[pk]; !known || p != nil {
		t.Errorf("dropped partition: known %v, %v; want known absent", known, p)
	}
	c.apply([]Action{AddPartitions{DB: "sales", Table: "orders", Parts: []*hive_metastore.Partition{p1}}, DropTable{DB: "sales", Name: "orders"}})
	if tb, known := c.tables[ok]; !known || tb != nil {
		t.Errorf("dropped table: known %v, %v", known, tb)
	}
	if _, known := c.parts[pk]; known {
		t.Error("a dropped table's partitions are still cached")
	}
	// A rename resets everything.
	c.apply([]Action{CreateTable{Table: orders}, AlterTable{DB: "sales", Name: "orders", Table: &hive_metastore.Table{DbName: "sales", TableName: "orders2"}}})
	if len(c.dbs)+len(c.tables)+len(c.parts) != 0 {
		t.Errorf("after a rename the cache holds %v %v %v", c.dbs, c.tables, c.parts)
	}
	c.apply([]Action{CreateDatabase{DB: db}, DropDatabase{Name: "sales"}})
	if len(c.dbs) != 0 {
		t.Error("a database drop did not reset the cache")
	}
}

// countingMS answers reads from fixed objects and counts them.
type countingMS struct {
	Metastore
	db    *hive_metastore.Database
	table *hive_metastore.Table
	reads int
}

func (m *countingMS) GetDatabase(_ context.Context, name string) (*hive_metastore.Database, error) {
	m.reads++
	if name != m.db.Name {
		return nil, &hive_metastore.NoSuchObjectException{}
	}
	return m.db, nil
}

func (m *countingMS) GetTableReq(_ context.Context, req *hive_metastore.GetTableRequest) (*hive_metastore.GetTableResult_, error) {
	m.reads++
	if req.TblName != m.table.TableName {
		return nil, &hive_metastore.NoSuchObjectException{}
	}
	return &hive_metastore.GetTableResult_{Table: m.table}, nil
}

func (m *countingMS) GetPartitionsByNamesReq(context.Context, *hive_metastore.GetPartitionsByNamesRequest) (*hive_metastore.GetPartitionsByNamesResult_, error) {
	m.reads++
	return &hive_metastore.GetPartitionsByNamesResult_{}, nil
}

// TestReadUsesCache: a second read of the worker's own objects, present or
// absent, asks the metastore nothing; other databases are always asked.
func TestReadUsesCache(t *testing.T) {
	ms := &countingMS{db: &hive_metastore.Database{Name: "sales"},
		table: &hive_metastore.Table{DbName: "sales", TableName: "orders", PartitionKeys: []*hive_metastore.FieldSchema{{Name: "dt"}}}}
	x := &executor{ms: ms, cache: newCache("sales")}
	touched := Touched{Databases: []string{"sales", "archive"},
		Tables:     []TableKey{{DB: "sales", Name: "orders"}, {DB: "sales", Name: "missing"}},
		Partitions: []PartKey{partKey(TableKey{DB: "sales", Name: "orders"}, []string{"1"})}}
	for i, want := range []int{5, 1} { // sales, archive, orders, missing, partitions; then archive only
		ms.reads = 0
		r, err := x.read(context.Background(), touched)
		if err != nil {
			t.Fatal(err)
		}
		if ms.reads != want {
			t.Errorf("read %d: %d metastore calls, want %d", i, ms.reads, want)
		}
		if r.Databases["sales"] == nil || r.Tables[TableKey{DB: "sales", Name: "orders"}] == nil || r.Tables[TableKey{DB: "sales", Name: "missing"}] != nil || len(r.Partitions) != 0 {
			t.Errorf("read %d: %+v", i, r)
		}
	}
}

func TestCacheDatabaseFreshness(t *testing.T) {
	c := newCache("sales")
	now := time.Date(2026, 12, 3, 13, 0, 0, 0, time.UTC)
	db := &hive_metastore.Database{Name: "sales"}
	if _, ok := c.cachedDB("sales", now); ok {
		t.Fatal("an empty cache returned the database")
	}
	c.readDB("sales", db, now)
	c.putDB("sales", db) // a write of the worker's own does not make the copy fresher
	if got, ok := c.cachedDB("sales", now.Add(dbFresh/2)); !ok || got != db {
		t.Fatal("the database read just now is not cached")
	}
	if _, ok := c.cachedDB("sales", now.Add(dbFresh)); ok {
		t.Fatal("the database is trusted past dbFresh: a failover's mark would go unseen")
	}
	if _, ok := c.cachedDB("other", now); ok {
		t.Fatal("another database is cached")
	}
}

// TestReadWholeTable: the partitions of a table the worker created are
// known without a read: those it added are cached, the others do not
// exist; after a reset (a failed step) they are read again.
func TestReadWholeTable(t *testing.T) {
	tb := &hive_metastore.Table{DbName: "sales", TableName: "orders", PartitionKeys: []*hive_metastore.FieldSchema{{Name: "dt"}}}
	ms := &countingMS{db: &hive_metastore.Database{Name: "sales"}, table: tb}
	c := newCache("sales")
	x := &executor{ms: ms, cache: c}
	ok := TableKey{DB: "sales", Name: "orders"}
	p1 := &hive_metastore.Partition{Values: []string{"1"}}
	c.apply([]Action{CreateTable{Table: tb}, AddPartitions{DB: "sales", Table: "orders", Parts: []*hive_metastore.Partition{p1}}})
	c.parts = map[PartKey]*hive_metastore.Partition{} // (as when the objects' bound is passed)
	c.readDB("sales", ms.db, time.Now())
	touched := Touched{Databases: []string{"sales"}, Tables: []TableKey{ok}, Partitions: []PartKey{partKey(ok, []string{"1"}), partKey(ok, []string{"2"})}}
	ms.reads = 0
	if _, err := x.read(context.Background(), touched); err != nil {
		t.Fatal(err)
	}
	if ms.reads != 1 {
		t.Errorf("%d partition reads, want 1 (partition 1 exists but is not cached; 2 is known absent)", ms.reads)
	}
	c.apply([]Action{DropPartitions{DB: "sales", Table: "orders", Values: [][]string{{"1"}}}})
	touched.Partitions = touched.Partitions[:1]
	c.parts = map[PartKey]*hive_metastore.Partition{}
	c.readDB("sales", ms.db, time.Now())
	ms.reads = 0
	if _, err := x.read(context.Background(), touched); err != nil || ms.reads != 0 {
		t.Errorf("a dropped partition of a whole table read %d times (%v)", ms.reads, err)
	}
	c.reset()
	c.readDB("sales", ms.db, time.Now())
	c.tables[ok] = tb
	ms.reads = 0
	if _, err := x.read(context.Background(), touched); err != nil || ms.reads != 1 {
		t.Errorf("after a reset: %d reads (%v), want 1", ms.reads, err)
	}
}

// TestCacheForget: an idle worker's cache drops its tables, partitions
// and whole-table knowledge (each holds its event's text), and keeps its
// database and when it was read.
func TestCacheForget(t *testing.T) {
	db := &hive_metastore.Database{Name: "sales"}
	orders := &hive_metastore.Table{DbName: "sales", TableName: "orders"}
	p1 := &hive_metastore.Partition{Values: []string{"1"}}
	c := newCache("sales")
	now := time.Now()
	c.readDB("sales", db, now)
	c.apply([]Action{CreateTable{Table: orders}, AddPartitions{DB: "sales", Table: "orders", Parts: []*hive_metastore.Partition{p1}}})
	if len(c.tables) == 0 || len(c.parts) == 0 || c.wholeParts == 0 {
		t.Fatalf("nothing cached to forget: %d tables, %d partitions, %d whole", len(c.tables), len(c.parts), c.wholeParts)
	}
	c.forget()
	if len(c.tables) != 0 || len(c.parts) != 0 || len(c.whole) != 0 || c.wholeParts != 0 {
		t.Errorf("after forget: %d tables, %d partitions, %d whole tables (%d partitions)", len(c.tables), len(c.parts), len(c.whole), c.wholeParts)
	}
	if c.absent(partKey(TableKey{DB: "sales", Name: "orders"}, []string{"2"})) {
		t.Error("a forgotten whole table still answers for its partitions")
	}
	if got, ok := c.cachedDB("sales", now); !ok || got != db {
		t.Errorf("the database was forgotten too: %v, %v", got, ok)
	}
}
