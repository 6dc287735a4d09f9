package fs

import (
	"context"
	"fmt"
	"testing"
)

func TestPlanRanges(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		size, split, unit int64
		want              []Range
	}{
		{0, 8 * mib, 4 * mib, nil},
		{-1, 8 * mib, 4 * mib, nil},
		{5, 8 * mib, 4 * mib, []Range{{0, 5}}},
		{8 * mib, 8 * mib, 4 * mib, []Range{{0, 8 * mib}}}, // not larger: one range
		{40 * mib, 0, 4 * mib, []Range{{0, 40 * mib}}},     // off
		{40 * mib, -1, 4 * mib, []Range{{0, 40 * mib}}},    // off
		{40 * mib, 8 * mib, 4 * mib, []Range{{0, 8 * mib}, {8 * mib, 8 * mib}, {16 * mib, 8 * mib}, {24 * mib, 8 * mib}, {32 * mib, 8 * mib}}},
		// Equal shares rounded up to whole units; the last takes the rest,
		// and a rest shorter than a unit joins the last range.
		{40*mib + 1, 8 * mib, 4 * mib, []Range{{0, 8 * mib}, {8 * mib, 8 * mib}, {16 * mib, 8 * mib}, {24 * mib, 8 * mib}, {32 * mib, 8*mib + 1}}},
		{44*mib + 1, 8 * mib, 4 * mib, []Range{{0, 8 * mib}, {8 * mib, 8 * mib}, {16 * mib, 8 * mib}, {24 * mib, 8 * mib}, {32 * mib, 8 * mib}, {40 * mib, 4*mib + 1}}},
		{8*mib + 1, 8 * mib, 8 * mib, []Range{{0, 8*mib + 1}}},
		{20 * mib, 8 * mib, 4 * mib, []Range{{0, 8 * mib}, {8 * mib, 8 * mib}, {16 * mib, 4 * mib}}},
		{20 * mib, 8 * mib, 1 * mib, []Range{{0, 7 * mib}, {7 * mib, 7 * mib}, {14 * mib, 6 * mib}}},
		// A unit larger than the split size wins.
		{20 * mib, 3 * mib, 8 * mib, []Range{{0, 8 * mib}, {8 * mib, 8 * mib}, {16 * mib, 4 * mib}}},
		{10, 3, 0, []Range{{0, 3}, {3, 3}, {6, 3}, {9, 1}}},
	} {
		got := PlanRanges(tc.size, tc.split, tc.unit)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("PlanRanges(%d, %d, %d) = %v, want %v", tc.size, tc.split, tc.unit, got, tc.want)
		}
	}
}

// TestPlanRangesProperties checks, over many sizes, that the ranges tile
// the file, that all but the last are whole units, and that none is longer
// than the split size unless a unit is.
func TestPlanRangesProperties(t *testing.T) {
	for _, unit := range []int64{1, 4096, 1 << 20, 4 << 20} {
		for _, split := range []int64{1 << 20, 8 << 20, 128 << 20} {
			for _, size := range []int64{1, split - 1, split, split + 1, 3*split - 7, 10*split + 12345, 1<<30 + 17} {
				rs := PlanRanges(size, split, unit)
				var off int64
				for i, r := range rs {
					if r.Off != off || r.Len <= 0 {
						t.Fatalf("PlanRanges(%d, %d, %d): range %d is %+v at %d", size, split, unit, i, r, off)
					}
					if i < len(rs)-1 && r.Len%unit != 0 {
						t.Fatalf("PlanRanges(%d, %d, %d): range %d of %d bytes is not whole units", size, split, unit, i, r.Len)
					}
					per := (split + unit - 1) / unit * unit // split rounded up to units
					if len(rs) > 1 && (i < len(rs)-1 && r.Len > per || i == len(rs)-1 && r.Len >= per+per/4) {
						t.Fatalf("PlanRanges(%d, %d, %d): range %d of %d bytes", size, split, unit, i, r.Len)
					}
					off += r.Len
				}
				if off != size {
					t.Fatalf("PlanRanges(%d, %d, %d) covers %d bytes", size, split, unit, off)
				}
				if size >= 2*max(split, unit) && len(rs) < 2 {
					t.Fatalf("PlanRanges(%d, %d, %d) did not split", size, split, unit)
				}
			}
		}
	}
}

func TestCheckRange(t *testing.T) {
	rs := []Range{{0, 4}, {4, 4}}
	written := []bool{false, true}
	if err := checkRange("x", 0, rs, written); err != nil {
		t.Error(err)
	}
	for _, i := range []int{-1, 1, 2} {
		if err := checkRange("x", i, rs, written); err == nil {
			t.Errorf("range %d accepted", i)
		}
	}
}

// TestHDFSCreateSplitDeclines: with concat off, or a name CONCAT cannot
// carry, or a file of one range, an HDFS FS declines to split, without
// asking the cluster anything (these NameNodes do not exist).
func TestHDFSCreateSplitDeclines(t *testing.T) {
	ctx := context.Background()
	mk := func(concat bool) *HDFS {
		h, err := NewHDFS(HDFSConfig{NameNodes: []string{"127.0.0.1:1"}, WebHDFS: "127.0.0.1:1", User: "u", Concat: concat})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	for _, tc := range []struct {
		h          *HDFS
		loc        string
		size, side int64
	}{
		{mk(false), "hdfs://127.0.0.1:1/w/f", 100 << 20, 8 << 20},
		{mk(true), "hdfs://127.0.0.1:1/w/a,b", 100 << 20, 8 << 20},
		{mk(true), "hdfs://127.0.0.1:1/w,x/f", 100 << 20, 8 << 20},
		{mk(true), "hdfs://127.0.0.1:1/w/f", 8 << 20, 8 << 20},
		{mk(true), "hdfs://127.0.0.1:1/w/f", 100 << 20, 0},
	} {
		w, ok, err := tc.h.CreateSplit(ctx, tc.loc, tc.size, tc.side)
		if w != nil || ok || err != nil {
			t.Errorf("CreateSplit(%s, %d, %d) = %v, %v, %v; want a plain refusal", tc.loc, tc.size, tc.side, w, ok, err)
		}
	}
	h := mk(true)
	h.noConcat.Store(true)
	if _, ok, err := h.CreateSplit(ctx, "hdfs://127.0.0.1:1/w/f", 100<<20, 8<<20); ok || err != nil {
		t.Errorf("after a CONCAT refusal: %v, %v", ok, err)
	}
}

func TestS3CreateSplitDeclines(t *testing.T) {
	s, err := NewS3(S3Config{Endpoint: "http://127.0.0.1:1", PartSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int64{5 << 20, 8 << 20} { // not larger than the split size
		if w, ok, err := s.CreateSplit(context.Background(), "s3://b/k", size, 8<<20); w != nil || ok || err != nil {
			t.Errorf("CreateSplit of %d bytes = %v, %v, %v", size, w, ok, err)
		}
	}
}
