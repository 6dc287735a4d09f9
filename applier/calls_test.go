package applier

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/beltran/gohive/hive_metastore"
)

// TestExecutorTimesCalls: every read and every action an executor runs is
// reported to observe under the name of its DR call
// (hivedr_applier_dr_call_seconds), once per call.
func TestExecutorTimesCalls(t *testing.T) {
	f := newFakeHMS()
	var got []string
	x := &executor{ms: f, observe: func(call string, took time.Duration) {
		if took < 0 {
			t.Errorf("%s took %s", call, took)
		}
		got = append(got, call)
	}}
	ctx := context.Background()
	db := &hive_metastore.Database{Name: "sales", Parameters: map[string]string{}}
	tb := &hive_metastore.Table{DbName: "sales", TableName: "orders", PartitionKeys: []*hive_metastore.FieldSchema{{Name: "dt", Type: "string"}},
		OwnerType: hive_metastore.PrincipalType_USER} // (the fake's JSON copies need a valid one)
	p := &hive_metastore.Partition{DbName: "sales", TableName: "orders", Values: []string{"1"}}
	for _, a := range []Action{
		CreateDatabase{DB: db},
		CreateTable{Table: tb},
		AddPartitions{DB: "sales", Table: "orders", Parts: []*hive_metastore.Partition{p}},
		AlterPartitions{DB: "sales", Table: "orders", Parts: []*hive_metastore.Partition{p}},
		AlterTable{DB: "sales", Name: "orders", Table: tb},
		AlterDatabase{Name: "sales", DB: db},
	} {
		if err := x.run(ctx, a); err != nil {
			t.Fatalf("%s: %v", a, err)
		}
	}
	k := TableKey{DB: "sales", Name: "orders"}
	if _, err := x.read(ctx, Touched{Databases: []string{"sales"}, Tables: []TableKey{k}, Partitions: []PartKey{partKey(k, []string{"1"})}}); err != nil {
		t.Fatal(err)
	}
	want := []string{"create_database", "create_table", "add_partitions", "alter_partitions", "alter_table", "alter_database",
		"get_database", "get_table", "get_partitions_by_names"}
	if !slices.Equal(got, want) {
		t.Errorf("observed %v, want %v", got, want)
	}
}

func TestCallName(t *testing.T) {
	tb := &hive_metastore.Table{DbName: "sales", TableName: "orders"}
	for _, c := range []struct {
		a    Action
		want string
	}{
		{AlterTable{DB: "sales", Name: "orders", Table: tb}, "alter_table"},
		{AlterTable{DB: "Sales", Name: "ORDERS", Table: tb}, "alter_table"},
		{AlterTable{DB: "sales", Name: "old", Table: tb}, "rename_table"},
		{DropPartitions{}, "drop_partitions"},
		{PruneFiles{}, "prune_files"},
		{ReplCommit{}, "repl_commit"},
	} {
		if got := callName(c.a); got != c.want {
			t.Errorf("callName(%T %v) = %q, want %q", c.a, c.a, got, c.want)
		}
	}
}

// TestAltersKeepStats: alter_table and alter_partitions ask the metastore
// not to recompute statistics (DO_NOT_UPDATE_STATS): without it Hive
// lists every changed partition's DR directory in the call and writes
// what it found over the source's figures.
func TestAltersKeepStats(t *testing.T) {
	f := newFakeHMS()
	x := &executor{ms: f}
	ctx := context.Background()
	tb := &hive_metastore.Table{DbName: "sales", TableName: "orders", PartitionKeys: []*hive_metastore.FieldSchema{{Name: "dt", Type: "string"}},
		OwnerType: hive_metastore.PrincipalType_USER}
	p := &hive_metastore.Partition{DbName: "sales", TableName: "orders", Values: []string{"1"},
		Parameters: map[string]string{"numFiles": "3", "totalSize": "1024"}}
	for _, a := range []Action{
		CreateDatabase{DB: &hive_metastore.Database{Name: "sales", Parameters: map[string]string{}}},
		CreateTable{Table: tb},
		AddPartitions{DB: "sales", Table: "orders", Parts: []*hive_metastore.Partition{p}},
		AlterPartitions{DB: "sales", Table: "orders", Parts: []*hive_metastore.Partition{p}},
		AlterTable{DB: "sales", Name: "orders", Table: tb},
	} {
		if err := x.run(ctx, a); err != nil {
			t.Fatalf("%s: %v", a, err)
		}
	}
	if len(f.envs) != 2 {
		t.Fatalf("%d alter calls with an environment context, want 2 (alter_partitions, alter_table)", len(f.envs))
	}
	for i, env := range f.envs {
		if env == nil || env.Properties["DO_NOT_UPDATE_STATS"] != "true" {
			t.Errorf("alter call %d: environment context %v, want DO_NOT_UPDATE_STATS=true", i, env)
		}
	}
}
