package producer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/schemas"
)

func TestListDirs(t *testing.T) {
	ext := func(loc string, keys ...string) *schemas.Table {
		t := &schemas.Table{Database: "db", Name: "t", TableType: "EXTERNAL_TABLE", Location: loc}
		for _, k := range keys {
			t.PartitionKeys = append(t.PartitionKeys, schemas.Column{Name: k})
		}
		return t
	}
	managed := &schemas.Table{Database: "db", Name: "m", TableType: "MANAGED_TABLE", Location: "/w/m"}
	parts := func(locs ...string) []schemas.Partition {
		var ps []schemas.Partition
		for i, l := range locs {
			ps = append(ps, schemas.Partition{Values: []string{fmt.Sprint(i)}, Location: l})
		}
		return ps
	}
	cases := []struct {
		name string
		ev   schemas.Event
		want []string
	}{
		{"external create", schemas.Event{EventType: "CREATE_TABLE", Payload: &schemas.TableChange{After: ext("/e/t")}}, []string{"/e/t"}},
		{"partitioned external create: partitions bring the files", schemas.Event{EventType: "CREATE_TABLE", Payload: &schemas.TableChange{After: ext("/e/t", "dt")}}, nil},
		{"managed create: the metastore lists", schemas.Event{EventType: "CREATE_TABLE", Payload: &schemas.TableChange{After: managed}}, nil},
		{"files already listed", schemas.Event{EventType: "CREATE_TABLE", Files: []schemas.FileRef{{URI: "/e/t/f"}}, Payload: &schemas.TableChange{After: ext("/e/t")}}, nil},
		{"alter in place", schemas.Event{EventType: "ALTER_TABLE", Payload: &schemas.TableChange{Before: ext("/e/t"), After: ext("/e/t")}}, nil},
		{"alter to another spelling of the same location", schemas.Event{EventType: "ALTER_TABLE", Payload: &schemas.TableChange{Before: ext("hdfs://nn/e/t"), After: ext("hdfs://NN:8020/e/t/")}}, nil},
		{"alter partition to another spelling", schemas.Event{EventType: "ALTER_PARTITION", Payload: &schemas.PartitionChange{Table: ext("/e/t", "dt"), Before: parts("/e/t/dt=0"), After: parts("file:/e/t/dt=0")}}, nil},
		{"alter to a new location", schemas.Event{EventType: "ALTER_TABLE", Payload: &schemas.TableChange{Before: ext("/e/t"), After: ext("/e/t2")}}, []string{"/e/t2"}},
		{"truncate", schemas.Event{EventType: "ALTER_TABLE", Payload: &schemas.TableChange{Before: ext("/e/t"), After: ext("/e/t2"), IsTruncate: true}}, nil},
		{"add partitions", schemas.Event{EventType: "ADD_PARTITION", Payload: &schemas.PartitionChange{Table: ext("/e/t", "dt"), After: parts("/e/t/dt=0", "/e/t/dt=1")}}, []string{"/e/t/dt=0", "/e/t/dt=1"}},
		{"add partitions of a managed table", schemas.Event{EventType: "ADD_PARTITION", Payload: &schemas.PartitionChange{Table: managed, After: parts("/w/m/dt=0")}}, nil},
		{"alter partition in place", schemas.Event{EventType: "ALTER_PARTITION", Payload: &schemas.PartitionChange{Table: ext("/e/t", "dt"), Before: parts("/e/t/dt=0"), After: parts("/e/t/dt=0")}}, nil},
		{"alter partition to a new location", schemas.Event{EventType: "ALTER_PARTITION", Payload: &schemas.PartitionChange{Table: ext("/e/t", "dt"), Before: parts("/e/t/dt=0"), After: parts("/x/dt=0")}}, []string{"/x/dt=0"}},
		{"drop partition", schemas.Event{EventType: "DROP_PARTITION", Payload: &schemas.PartitionChange{Table: ext("/e/t", "dt"), Before: parts("/e/t/dt=0")}}, nil},
	}
	for _, c := range cases {
		if got := listDirs(&c.ev); !slices.Equal(got, c.want) {
			t.Errorf("%s: listDirs = %v, want %v", c.name, got, c.want)
		}
	}
}

// fakeLister lists fixed files per directory.
type fakeLister map[string][]string

func (f fakeLister) Walk(_ context.Context, dir string, fn func(string, int64) error) error {
	files, ok := f[dir]
	if !ok {
		return fmt.Errorf("walk %s: %w", dir, fs.ErrNotExist)
	}
	for _, l := range files {
		if l == "boom" {
			return errors.New("namenode unreachable")
		}
		if err := fn(l, 1); err != nil {
			return err
		}
	}
	return nil
}

func TestAddListedFiles(t *testing.T) {
	tbl := &schemas.Table{Database: "db", Name: "t", TableType: "EXTERNAL_TABLE", Location: "/e/t", PartitionKeys: []schemas.Column{{Name: "dt"}}}
	ev := schemas.Event{EventID: 7, EventType: "ADD_PARTITION", Payload: &schemas.PartitionChange{Table: tbl,
		After: []schemas.Partition{{Values: []string{"1"}, Location: "/e/t/dt=1"}, {Values: []string{"2"}, Location: "/e/t/dt=2"}}}}
	l := fakeLister{"/e/t/dt=1": {"/e/t/dt=1/000000_0", "/e/t/dt=1/_SUCCESS", "/e/t/dt=1/.hive-staging/x", "/e/t/dt=1/sub/000001_0"}}
	if err := addListedFiles(context.Background(), l, &ev); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range ev.Files {
		got = append(got, f.URI)
	}
	if want := []string{"/e/t/dt=1/000000_0", "/e/t/dt=1/sub/000001_0"}; !slices.Equal(got, want) {
		t.Errorf("files %v, want %v (hidden names skipped, a missing directory gives none)", got, want)
	}
	ev.Files = nil
	if err := addListedFiles(context.Background(), fakeLister{"/e/t/dt=1": {"boom"}}, &ev); err == nil {
		t.Error("a listing error was swallowed")
	}

	// The metastore spells the directory its way, the lister answers in
	// canonical form: hidden names are looked for below the directory only
	// (a directory above it may well be named _landing).
	part := func(loc string) *schemas.Event {
		return &schemas.Event{EventID: 8, EventType: "ADD_PARTITION", Payload: &schemas.PartitionChange{Table: tbl,
			After: []schemas.Partition{{Values: []string{"1"}, Location: loc}}}}
	}
	ev2 := part("HDFS://SRC-NN/_landing/t/dt=1/")
	l = fakeLister{"HDFS://SRC-NN/_landing/t/dt=1/": {"hdfs://src-nn:8020/_landing/t/dt=1/000000_0",
		"hdfs://src-nn:8020/_landing/t/dt=1/_SUCCESS", "hdfs://src-nn:8020/_landing/t/dt=1/.hive-staging/x"}}
	if err := addListedFiles(context.Background(), l, ev2); err != nil {
		t.Fatal(err)
	}
	if len(ev2.Files) != 1 || ev2.Files[0].URI != "hdfs://src-nn:8020/_landing/t/dt=1/000000_0" {
		t.Errorf("files %v, want only the data file (hidden names below the directory skipped)", ev2.Files)
	}
	// A listing that strays outside the directory is an error, not data.
	ev3 := part("/e/t/dt=1")
	if err := addListedFiles(context.Background(), fakeLister{"/e/t/dt=1": {"/e/t/dt=10/000000_0"}}, ev3); err == nil {
		t.Errorf("a file outside the listed directory was taken: %v", ev3.Files)
	}
}
