package acid

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/beltran/gohive/hive_metastore"
)

func TestParseDir(t *testing.T) {
	for name, want := range map[string]string{
		"base_0000005":                   "{base 0 5}",
		"base_0000005_v0000042":          "{base 0 5}",
		"delta_0000003_0000003_0000":     "{delta 3 3}",
		"delta_0000001_0000004_v0000099": "{delta 1 4}",
		"delete_delta_0000002_0000002":   "{delete_delta 2 2}",
		"delta_0000003":                  "",
		"000000_0":                       "",
		"dt=2024-01-01":                  "",
		"base_x":                         "",
	} {
		d, ok := ParseDir(name)
		got := ""
		if ok {
			got = fmt.Sprint(d)
		}
		if got != want {
			t.Errorf("ParseDir(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestObsolete(t *testing.T) {
	for _, tc := range []struct {
		name string
		base int64
		want bool
	}{
		{"delta_0000001_0000001_0000", 3, true},
		{"delta_0000003_0000003_0000", 3, true},
		{"delta_0000004_0000004_0000", 3, false},
		{"delta_0000002_0000004", 3, false},
		{"base_0000002", 3, true},
		{"base_0000003", 3, false},
		{"000000_0", 3, false},
	} {
		if got := Obsolete(tc.name, tc.base); got != tc.want {
			t.Errorf("Obsolete(%q, %d) = %v", tc.name, tc.base, got)
		}
	}
}

// TestVisible: the newest valid base with nothing open below it, and the
// valid deltas above it.
func TestVisible(t *testing.T) {
	names := []string{"base_0000002", "base_0000005", "delta_0000001_0000001_0000", "delta_0000003_0000003_0000",
		"delta_0000006_0000006_0000", "delta_0000006_0000006_0001", "delta_0000007_0000007_0000", "delta_0000008_0000008_0000", "000000_0"}
	for _, tc := range []struct {
		w    WriteIDs
		want []string
	}{
		{WriteIDs{HighWaterMark: 8}, []string{"base_0000005", "delta_0000006_0000006_0000", "delta_0000006_0000006_0001",
			"delta_0000007_0000007_0000", "delta_0000008_0000008_0000"}},
		{WriteIDs{HighWaterMark: 8, Open: []int64{4}, Aborted: []int64{7}}, []string{"base_0000002", "delta_0000003_0000003_0000",
			"delta_0000006_0000006_0000", "delta_0000006_0000006_0001", "delta_0000008_0000008_0000"}},
		{WriteIDs{HighWaterMark: 6, Aborted: []int64{5}}, []string{"base_0000002", "delta_0000003_0000003_0000",
			"delta_0000006_0000006_0000", "delta_0000006_0000006_0001"}},
	} {
		if got := Visible(names, tc.w); !slices.Equal(got, tc.want) {
			t.Errorf("Visible with %s = %v, want %v", tc.w, got, tc.want)
		}
	}
}

type fakeMS struct {
	req *hive_metastore.GetValidWriteIdsRequest
}

func (f *fakeMS) GetOpenTxns(context.Context) (*hive_metastore.GetOpenTxnsResponse, error) {
	low := int64(7)
	return &hive_metastore.GetOpenTxnsResponse{TxnHighWaterMark: 12, OpenTxns: []int64{7, 9, 11}, MinOpenTxn: &low, AbortedBits: []byte{0b010}}, nil
}

func (f *fakeMS) GetValidWriteIds(_ context.Context, req *hive_metastore.GetValidWriteIdsRequest) (*hive_metastore.GetValidWriteIdsResponse, error) {
	f.req = req
	return &hive_metastore.GetValidWriteIdsResponse{TblValidWriteIds: []*hive_metastore.TableValidWriteIds{
		{FullTableName: "Sales.Orders", WriteIdHighWaterMark: 9, InvalidWriteIds: []int64{3, 5, 8}, AbortedBits: []byte{0b101}},
	}}, nil
}

func TestReadWriteIDs(t *testing.T) {
	ms := &fakeMS{}
	got, err := ReadWriteIDs(context.Background(), ms, []string{"sales.orders"})
	if err != nil {
		t.Fatal(err)
	}
	if *ms.req.ValidTxnList != "12:7:7,11:9" {
		t.Errorf("ValidTxnList %q", *ms.req.ValidTxnList)
	}
	if w := got["sales.orders"]; w.String() != "hwm=9 open=[5] aborted=[3 8]" || w.Valid(5) || !w.Valid(4) || w.Valid(10) {
		t.Errorf("write ids %v", got)
	}
}

func TestParseDirParts(t *testing.T) {
	for name, want := range map[string]Dir{
		"base_0000005_v0000042":            {Kind: Base, Max: 5, Stmt: -1, Visibility: 42},
		"delta_0000003_0000003_0002":       {Kind: Delta, Min: 3, Max: 3, Stmt: 2},
		"delta_0000001_0000004_v0000099":   {Kind: Delta, Min: 1, Max: 4, Stmt: -1, Visibility: 99},
		"delete_delta_0000001_0000004_v07": {Kind: DeleteDelta, Min: 1, Max: 4, Stmt: -1, Visibility: 7},
		"delta_0000002_0000002_0001_v0009": {Kind: Delta, Min: 2, Max: 2, Stmt: 1, Visibility: 9},
	} {
		if got, ok := ParseDir(name); !ok || got != want {
			t.Errorf("ParseDir(%q) = %+v, %v; want %+v", name, got, ok, want)
		}
	}
	for _, name := range []string{"base_0000005_0000006", "base_0000005_0001_v0000002", "delta_0000001_v0000002", "base_0000005_v"} {
		if d, ok := ParseDir(name); ok {
			t.Errorf("ParseDir(%q) = %+v, want not an ACID directory", name, d)
		}
	}
}

func TestReplicaName(t *testing.T) {
	for name, want := range map[string]string{
		"base_0000005_v0000042":            "base_0000005",
		"delta_0000001_0000004_v0000099":   "delta_0000001_0000004",
		"delete_delta_0000001_0000004_v07": "delete_delta_0000001_0000004",
		"base_0000005":                     "base_0000005",
		"delta_0000003_0000003_0000":       "delta_0000003_0000003_0000",
		"dt=2024-01-01_v2":                 "dt=2024-01-01_v2",
	} {
		if got := ReplicaName(name); got != want {
			t.Errorf("ReplicaName(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestReplicaPath(t *testing.T) {
	for in, want := range map[string]string{
		"hdfs://dr:8020/w/t/base_0000005_v0000042/bucket_00000":               "hdfs://dr:8020/w/t/base_0000005/bucket_00000",
		"hdfs://dr:8020/w/t/dt=x_v1/delta_0000001_0000002_v09/_metadata_acid": "hdfs://dr:8020/w/t/dt=x_v1/delta_0000001_0000002/_metadata_acid",
		"hdfs://dr:8020/w/t/delta_0000003_0000003_0000/bucket_00000":          "hdfs://dr:8020/w/t/delta_0000003_0000003_0000/bucket_00000",
	} {
		if got := ReplicaPath(in); got != want {
			t.Errorf("ReplicaPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestObsoleteAfter(t *testing.T) {
	minor, _ := ParseDir("delta_0000002_0000005_v0000042")
	minorDel, _ := ParseDir("delete_delta_0000002_0000005_v0000042")
	major, _ := ParseDir("base_0000005_v0000042")
	for _, tc := range []struct {
		name string
		by   Dir
		want bool
	}{
		{"delta_0000002_0000002_0000", minor, true},
		{"delta_0000005_0000005", minor, true},
		{"delta_0000003_0000004", minor, true},
		{"delta_0000001_0000001_0000", minor, false},
		{"delta_0000006_0000006_0000", minor, false},
		{"delta_0000002_0000005", minor, false}, // the compaction's own, by its replica name
		{"delete_delta_0000003_0000003_0000", minor, false},
		{"delete_delta_0000003_0000003_0000", minorDel, true},
		{"base_0000001", minor, false},
		{"delta_0000005_0000005_0000", major, true},
		{"base_0000004", major, true},
		{"base_0000005", major, false},
		{"delta_0000006_0000006_0000", major, false},
		{"000000_0", major, false},
	} {
		if got := ObsoleteAfter(tc.name, tc.by); got != tc.want {
			t.Errorf("ObsoleteAfter(%q, %v) = %v, want %v", tc.name, tc.by, got, tc.want)
		}
	}
}

// TestVisibleCompactions: a compactor's directories exist once its
// transaction is committed; a compacted base is read once nothing up to
// it is open (its own write ID may be an aborted one), an overwrite's
// base only when its write ID is valid; a minor compaction's delta covers
// the deltas it merged.
func TestVisibleCompactions(t *testing.T) {
	w := WriteIDs{HighWaterMark: 7, Aborted: []int64{5}}
	for _, tc := range []struct {
		name  string
		names []string
		v     View
		want  []string
	}{
		{"compacted base over an aborted write", []string{"base_0000005_v0000042", "delta_0000001_0000001_0000", "delta_0000006_0000006_0000"},
			View{}, []string{"base_0000005_v0000042", "delta_0000006_0000006_0000"}},
		{"compaction not committed for the reader", []string{"base_0000005_v0000042", "delta_0000001_0000001_0000", "delta_0000006_0000006_0000"},
			View{Txns: Txns{HighWaterMark: 50, Invalid: []int64{42}}}, []string{"delta_0000001_0000001_0000", "delta_0000006_0000006_0000"}},
		{"compaction beyond the reader's transactions", []string{"base_0000004_v0000042", "delta_0000001_0000001_0000"},
			View{Txns: Txns{HighWaterMark: 41}}, []string{"delta_0000001_0000001_0000"}},
		{"replica name, compacted by its metadata file", []string{"base_0000005", "delta_0000006_0000006_0000"},
			View{Compacted: func(n string) bool { return n == "base_0000005" }}, []string{"base_0000005", "delta_0000006_0000006_0000"}},
		{"an overwrite's base of an aborted write", []string{"base_0000005", "delta_0000001_0000001_0000", "delta_0000006_0000006_0000"},
			View{}, []string{"delta_0000001_0000001_0000", "delta_0000006_0000006_0000"}},
		{"minor compaction covers what it merged", []string{"delta_0000001_0000001_0000", "delta_0000001_0000004_v0000042", "delta_0000002_0000002_0000",
			"delta_0000004_0000004_0000", "delta_0000006_0000006_0000", "delete_delta_0000002_0000002_0000", "delete_delta_0000001_0000004_v0000042"},
			View{}, []string{"delete_delta_0000001_0000004_v0000042", "delta_0000001_0000004_v0000042", "delta_0000006_0000006_0000"}},
		{"delta of only an aborted write", []string{"delta_0000005_0000005_0000", "delta_0000006_0000006_0000"},
			View{}, []string{"delta_0000006_0000006_0000"}},
		// As Hive's readers do: of an overwrite's base and a compactor's
		// of the same write ID, the compactor's, whatever the order.
		{"an overwrite's and a compactor's base of one write ID", []string{"base_0000006", "base_0000006_v0000042"},
			View{}, []string{"base_0000006_v0000042"}},
		{"the same, listed the other way", []string{"base_0000006_v0000042", "base_0000006"},
			View{}, []string{"base_0000006_v0000042"}},
	} {
		if got := VisibleIn(tc.names, w, tc.v); !slices.Equal(got, tc.want) {
			t.Errorf("%s: VisibleIn = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestCompactionTarget(t *testing.T) {
	for _, c := range []struct{ target, dir, want string }{
		{"hdfs://dr/w/t/base_0000005_v0000123/bucket_00000", "base_0000005_v0000123", "hdfs://dr/w/t/" + StagingName("base_0000005_v0000123") + "/bucket_00000"},
		{"hdfs://dr/w/t/dt=1/delta_0000001_0000004_v0000009/_metadata_acid", "delta_0000001_0000004_v0000009",
			"hdfs://dr/w/t/dt=1/" + StagingName("delta_0000001_0000004_v0000009") + "/_metadata_acid"},
		{"hdfs://dr/w/t/000000_0", "", "hdfs://dr/w/t/000000_0"},
	} {
		if got := CompactionTarget(c.target, c.dir); got != c.want {
			t.Errorf("CompactionTarget(%q, %q) = %q, want %q", c.target, c.dir, got, c.want)
		}
	}
}

// TestWithAllocated: only the metastore's shape for a table with no
// committed row (the mark is its only invalid write ID) is made whole
// with the write IDs allocated above it, as aborted; every other state
// is kept.
func TestWithAllocated(t *testing.T) {
	for _, c := range []struct {
		w    WriteIDs
		max  int64
		want string
	}{
		{WriteIDs{HighWaterMark: 1, Aborted: []int64{1}}, 2, "hwm=2 open=[] aborted=[1 2]"},
		{WriteIDs{HighWaterMark: 1, Aborted: []int64{1}}, 4, "hwm=4 open=[] aborted=[1 2 3 4]"},
		{WriteIDs{HighWaterMark: 3, Open: []int64{3}}, 5, "hwm=5 open=[3] aborted=[4 5]"},
		{WriteIDs{HighWaterMark: 1, Aborted: []int64{1}}, 1, "hwm=1 open=[] aborted=[1]"},      // nothing above
		{WriteIDs{HighWaterMark: 3, Aborted: []int64{1}}, 5, "hwm=3 open=[] aborted=[1]"},      // a committed row gave the mark
		{WriteIDs{HighWaterMark: 3, Aborted: []int64{2, 3}}, 5, "hwm=3 open=[] aborted=[2 3]"}, // not the rule's shape
		{WriteIDs{HighWaterMark: 4}, 6, "hwm=4 open=[] aborted=[]"},                            // nothing invalid
	} {
		if got := c.w.WithAllocated(c.max).String(); got != c.want {
			t.Errorf("%s with %d allocated: %s, want %s", c.w, c.max, got, c.want)
		}
	}
}
