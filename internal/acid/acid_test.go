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
