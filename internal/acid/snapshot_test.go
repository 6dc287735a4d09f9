package acid

import (
	"context"
	"slices"
	"testing"
)

func TestReadState(t *testing.T) {
	ms := &fakeMS{}
	got, txns, err := ReadState(context.Background(), ms, []string{"sales.orders"})
	if err != nil {
		t.Fatal(err)
	}
	if *ms.req.ValidTxnList != "12:7:7,11:9" {
		t.Errorf("ValidTxnList %q", *ms.req.ValidTxnList)
	}
	if w := got["sales.orders"]; w.String() != "hwm=9 open=[5] aborted=[3 8]" {
		t.Errorf("write ids %v", got)
	}
	for id, want := range map[int64]bool{6: true, 7: false, 9: false, 10: true, 11: false, 12: true, 13: false} {
		if txns.Committed(id) != want {
			t.Errorf("Committed(%d) = %v, want %v", id, !want, want)
		}
	}
}

// TestVisibleInTxns: a compactor's directory is read only when its own
// transaction committed in the reader's list; otherwise what it replaces
// is.
func TestVisibleInTxns(t *testing.T) {
	v := View{Txns: Txns{HighWaterMark: 50, Invalid: []int64{42}}}
	names := []string{"delta_0000001_0000001_0000", "delta_0000002_0000002_0000", "delta_0000003_0000003_0000"}
	w := WriteIDs{HighWaterMark: 3}
	for _, tc := range []struct {
		extra string
		want  []string
	}{
		{"base_0000002_v0000040", []string{"base_0000002_v0000040", "delta_0000003_0000003_0000"}},
		{"base_0000002_v0000042", names}, // still running
		{"base_0000002_v0000051", names}, // after the list
		// A minor compaction's delta covers the deltas it merged.
		{"delta_0000001_0000002_v0000041", []string{"delta_0000001_0000002_v0000041", "delta_0000003_0000003_0000"}},
		{"delta_0000001_0000002_v0000042", names},
		{"delta_0000001_0000001_0001", append(slices.Clone(names[:1]), append([]string{"delta_0000001_0000001_0001"}, names[1:]...)...)},
	} {
		got := VisibleIn(append(slices.Clone(names), tc.extra), w, v)
		want := slices.Sorted(slices.Values(tc.want))
		if !slices.Equal(got, want) {
			t.Errorf("VisibleIn with %s = %v, want %v", tc.extra, got, want)
		}
	}
}

func TestFormatValidWriteIDList(t *testing.T) {
	for _, tc := range []struct {
		w    WriteIDs
		want string
	}{
		{WriteIDs{HighWaterMark: 10, Aborted: []int64{3, 7}}, "sales.orders:10:9223372036854775807::3,7"},
		{WriteIDs{HighWaterMark: 10, Open: []int64{9, 4}}, "sales.orders:10:4:9,4:"},
		{WriteIDs{}, "sales.orders:0:9223372036854775807::"},
	} {
		if got := FormatValidWriteIDList("Sales.Orders", tc.w); got != tc.want {
			t.Errorf("FormatValidWriteIDList(%s) = %q, want %q", tc.w, got, tc.want)
		}
	}
}
