package hms

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestNamesAfter pages through a shuffled list: every page holds the next
// names in order, more is true until the last, and the pages together are
// the list once.
func TestNamesAfter(t *testing.T) {
	var all []string
	for i := range 2500 {
		all = append(all, fmt.Sprintf("dt=2024-%02d-%02d/h=%d", i%12+1, i%28+1, i))
	}
	slices.Sort(all)
	all = slices.Compact(all)
	shuffled := slices.Clone(all)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	for _, limit := range []int{1, 7, 1000, len(all), len(all) + 5} {
		var got []string
		after := ""
		for pages := 0; ; pages++ {
			if pages > len(all)+1 {
				t.Fatalf("limit %d: does not end", limit)
			}
			n := NewNamesAfter(after, limit)
			for _, s := range shuffled {
				n.Add(s)
			}
			names, more := n.Names()
			if len(names) > limit {
				t.Fatalf("limit %d: a page of %d names", limit, len(names))
			}
			got = append(got, names...)
			if !more {
				break
			}
			if len(names) != limit {
				t.Fatalf("limit %d: a page of %d names with more after it", limit, len(names))
			}
			after = names[len(names)-1]
		}
		if !slices.Equal(got, all) {
			t.Errorf("limit %d: pages hold %d names, want the %d in order", limit, len(got), len(all))
		}
	}
}
