package copyd

import (
	"fmt"
	"slices"
	"testing"

	"github.com/hivedr/hivedr/schemas"
)

// testWindow is a window whose copies start nowhere: the test finishes
// them by hand.
type testWindow struct {
	*window
	started   []*slot
	cancelled []*slot
}

func newTestWindow(workers int) *testWindow {
	tw := &testWindow{}
	tw.window = newWindow(workers, func(s *slot) {
		tw.started = append(tw.started, s)
		s.cancel = func() { tw.cancelled = append(tw.cancelled, s) }
	})
	return tw
}

// testSlot makes a slot of partition p at offset o for event ev writing to target.
func testSlot(p int32, o, ev int64, target string) *slot {
	id := fmt.Sprintf("p%d@%d", p, o)
	return &slot{part: p, offset: o, target: target,
		task: schemas.CopyTask{TaskID: id, EventID: ev, TargetURI: target}}
}

func (tw *testWindow) done(s *slot) {
	tw.finish(s, schemas.CopyCompletion{TaskID: s.task.TaskID, Status: schemas.StatusCopied})
}

func slotNames(ss []*slot) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.task.TaskID)
	}
	return out
}

func prefixes(bs []batch) map[int32]int64 {
	out := map[int32]int64{}
	for _, b := range bs {
		out[b.part] = b.next
	}
	return out
}

// The offset committed for a partition never passes its oldest unfinished
// task; finished tasks of other partitions commit meanwhile.
func TestWindowCommitsContiguousPrefix(t *testing.T) {
	tw := newTestWindow(8)
	a0, a1, a2, b0 := testSlot(0, 10, 1, "/a0"), testSlot(0, 11, 1, "/a1"), testSlot(0, 12, 1, "/a2"), testSlot(1, 5, 1, "/b0")
	if !tw.add(0, []*slot{a0, a1, a2, b0}) {
		t.Fatal("add refused")
	}
	if len(tw.started) != 4 {
		t.Fatalf("started %v, want all four", slotNames(tw.started))
	}
	tw.done(a1)
	tw.done(a2)
	tw.done(b0)
	bs, n := tw.committable()
	if got := prefixes(bs); n != 1 || len(got) != 1 || got[1] != 6 {
		t.Fatalf("committable %v (%d); want only partition 1 up to offset 6", got, n)
	}
	tw.committed(bs)
	if tw.len() != 3 {
		t.Fatalf("window holds %d, want 3", tw.len())
	}
	tw.done(a0)
	bs, n = tw.committable()
	if got := prefixes(bs); n != 3 || got[0] != 13 {
		t.Fatalf("committable %v (%d); want partition 0 up to 13", got, n)
	}
	tw.committed(bs)
	if tw.len() != 0 {
		t.Fatalf("window holds %d after committing everything", tw.len())
	}
}

func TestWindowBoundsWorkers(t *testing.T) {
	tw := newTestWindow(2)
	var ss []*slot
	for i := range 5 {
		ss = append(ss, testSlot(0, int64(i), 1, fmt.Sprintf("/f%d", i)))
	}
	tw.add(0, ss)
	if got := slotNames(tw.started); !slices.Equal(got, []string{"p0@0", "p0@1"}) {
		t.Fatalf("started %v; want the two oldest", got)
	}
	tw.done(ss[1])
	if got := slotNames(tw.started); len(got) != 3 || got[2] != "p0@2" {
		t.Fatalf("started %v; want p0@2 next", got)
	}
}

// Two tasks with the same target never copy at once; the lower event ID
// goes first (then the earlier offset), whatever partition it is in.
func TestWindowSerialisesSameTarget(t *testing.T) {
	tw := newTestWindow(8)
	a7 := testSlot(0, 0, 7, "hdfs://dr/t/000000_0")
	a5 := testSlot(1, 0, 5, "hdfs://dr/t/000000_0")
	a9 := testSlot(0, 1, 9, "hdfs://dr/t/000000_0")
	a9b := testSlot(0, 2, 9, "hdfs://dr/t/000000_0")
	b1 := testSlot(2, 0, 1, "hdfs://dr/t/000001_0")
	tw.add(0, []*slot{a7, a9, a9b, a5, b1})
	if got := slotNames(tw.started); !slices.Equal(got, []string{"p1@0", "p2@0"}) {
		t.Fatalf("started %v; want event 5's copy of the shared target, and the other target", got)
	}
	for i, prev := range []*slot{a5, a7, a9} {
		next := []*slot{a7, a9, a9b}[i]
		if n := len(tw.started); n != 2+i {
			t.Fatalf("started %v while %s copies", slotNames(tw.started), prev.task.TaskID)
		}
		tw.done(prev)
		if got := tw.started[len(tw.started)-1]; got != next {
			t.Fatalf("after %s finished, %s started; want %s", prev.task.TaskID, got.task.TaskID, next.task.TaskID)
		}
	}
	if len(tw.started) != 5 {
		t.Fatalf("started %v", slotNames(tw.started))
	}
}

// A dropped copy still holds its target until it returns: a task for the
// same target delivered again waits for it.
func TestWindowDroppedCopyHoldsTarget(t *testing.T) {
	tw := newTestWindow(8)
	old := testSlot(0, 0, 1, "/t")
	tw.add(0, []*slot{old})
	exits := tw.drop([]int32{0}, false, true)
	if len(exits) != 1 || len(tw.cancelled) != 1 {
		t.Fatalf("drop: %d exits, %d cancelled; want the running copy cancelled", len(exits), len(tw.cancelled))
	}
	again := testSlot(0, 0, 1, "/t")
	if tw.add(0, []*slot{again}) {
		t.Fatal("add with a revoke count from before the revoke was taken")
	}
	if !tw.add(tw.revokeCount(), []*slot{again}) {
		t.Fatal("add refused")
	}
	if len(tw.started) != 1 {
		t.Fatalf("the redelivered task started while the dropped copy of its target runs")
	}
	tw.done(old) // its result is thrown away
	select {
	case <-exits[0]:
	default:
		t.Fatal("exit channel not closed")
	}
	if len(tw.started) != 2 || tw.started[1] != again {
		t.Fatalf("started %v; want the redelivered task once the old copy returned", slotNames(tw.started))
	}
	if _, n := tw.committable(); n != 0 {
		t.Fatalf("%d committable; the dropped copy's result must be thrown away", n)
	}
	tw.done(again)
	if bs, n := tw.committable(); n != 1 || bs[0].slots[0] != again {
		t.Fatalf("committable %d; want the redelivered task", n)
	}
}

// Halting cancels running copies and throws their results away; what
// finished before stays committable, up to the first cancelled task.
func TestWindowHalt(t *testing.T) {
	tw := newTestWindow(2)
	s0, s1, s2, s3 := testSlot(0, 0, 1, "/0"), testSlot(0, 1, 1, "/1"), testSlot(0, 2, 1, "/2"), testSlot(0, 3, 1, "/3")
	tw.add(0, []*slot{s0, s1, s2, s3})
	tw.done(s0) // starts s2
	exits := tw.halt()
	if len(exits) != 2 {
		t.Fatalf("halt cancelled %d copies, want 2", len(exits))
	}
	tw.done(s1)
	tw.done(s2)
	if len(tw.started) != 3 {
		t.Fatalf("started %v after halt", slotNames(tw.started))
	}
	bs, n := tw.committable()
	if n != 1 || bs[0].next != 1 {
		t.Fatalf("committable %v (%d); want only offset 0", prefixes(bs), n)
	}
}

func TestWindowRefusesOutOfOrder(t *testing.T) {
	tw := newTestWindow(2)
	tw.add(0, []*slot{testSlot(0, 5, 1, "/a")})
	if tw.add(0, []*slot{testSlot(0, 5, 1, "/a")}) {
		t.Fatal("an offset taken twice was accepted")
	}
}

// A record that did not decode is finished when taken and commits in its
// place.
func TestWindowUndecodedRecord(t *testing.T) {
	tw := newTestWindow(2)
	bad := &slot{part: 0, offset: 0, state: slotDone}
	good := testSlot(0, 1, 1, "/a")
	tw.add(0, []*slot{bad, good})
	if len(tw.started) != 1 {
		t.Fatalf("started %v", slotNames(tw.started))
	}
	tw.done(good)
	if _, n := tw.committable(); n != 2 {
		t.Fatalf("committable %d, want 2", n)
	}
}
