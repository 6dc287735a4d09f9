package copyd

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"github.com/hivedr/hivedr/schemas"
)

// The sliding window: the copy tasks a daemon has taken from the manifests
// topic and not yet committed, per partition, in offset order. It decides
// which task runs next and which completions may be committed; it knows
// nothing of Kafka (the Daemon does the polling and the transactions).
//
// Invariants, kept here:
//
//   - Offset order. A partition's slots are exactly the records of the
//     partition from the group's committed offset up to the fetch position,
//     in offset order (the Daemon adds every polled record, and drops a
//     partition's slots whenever Kafka may deliver them again).
//   - Commit prefix. committable returns, per partition, only the
//     contiguous run of finished slots at the front: an offset committed
//     just past that run never passes an unfinished task. Finished slots
//     behind an unfinished one wait in memory for their turn.
//   - Bounded memory. A partition holds at most max_batch slots, finished but
//     uncommitted ones included: the Daemon pauses fetching a partition
//     that holds that many, and polls no more records than the fullest
//     unpaused partition has room for. The bound is per partition so that
//     a slow file, and the finished tasks waiting behind it, hold back
//     only their own partition, never the others.
//   - Bounded work. At most workers copies run at once, dropped ones
//     included until they return.
//   - Same target, one at a time. Two slots with the same target (the
//     normalised TargetURI) never copy at once, even when one of them was
//     dropped and is still winding down; among the queued slots of one
//     target the lowest event ID (then the earliest taken: the lower
//     offset in one partition) goes first. An INSERT OVERWRITE can reuse
//     a file name: an older copy must not land after a newer one.
//   - Dropped means forgotten. A dropped slot's result is thrown away, so
//     a copy cancelled by a revoke or a shutdown (FAILED, "interrupted")
//     is never published; its task is delivered again to whoever owns the
//     partition next.

// slotState is where a slot's task is.
type slotState uint8

const (
	slotQueued  slotState = iota // waiting for a worker, or for its target
	slotRunning                  // its copy is running
	slotDone                     // its completion is ready to commit
)

// slot is one copy task taken from the manifests topic.
type slot struct {
	part   int32
	offset int64
	epoch  int32  // the record's leader epoch, committed with the offset
	seq    uint64 // order in which the window took it
	task   schemas.CopyTask
	target string // same-target key; "" for a record that did not decode

	// Guarded by window.mu.
	state   slotState
	comp    schemas.CopyCompletion
	dropped bool               // out of the window: the result is thrown away
	passed  bool               // outside the site's scope: committed, no completion
	cancel  context.CancelFunc // cancels its copy (running slots)
	exited  chan struct{}      // closed once its copy returned (running slots)
}

// batch is a partition's committable prefix: its completions, and the
// offset to commit (just past the last of them) with that record's epoch.
type batch struct {
	part  int32
	slots []*slot
	next  int64
	epoch int32
}

// window is the daemon's sliding window. Its methods are safe for
// concurrent use: the Daemon's loop adds and commits, copies finish on
// their own goroutines, and revokes come from the Kafka client's.
type window struct {
	workers int
	// start runs s's copy on a new goroutine that calls finish when the
	// copy returns. It is called with mu held and must not block; it sets
	// s.cancel.
	start func(s *slot)
	// changed is signalled (without blocking) when a copy finishes.
	changed chan struct{}
	// onSize reports the number of slots held (a gauge), or is nil.
	onSize func(n int)

	mu      sync.Mutex
	parts   map[int32][]*slot
	size    int
	seq     uint64
	running int              // copies running, dropped ones included
	busy    map[string]*slot // target -> the slot copying to it
	halted  bool             // no new copies start
	revokes uint64           // partitions dropped by revokes, ever
	peak    int              // the most slots one partition ever held (tests)
}

func newWindow(workers int, start func(*slot)) *window {
	return &window{
		workers: workers, start: start,
		changed: make(chan struct{}, 1),
		parts:   map[int32][]*slot{},
		busy:    map[string]*slot{},
	}
}

// len returns how many slots the window holds, queued, running and
// finished.
func (w *window) len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.size
}

// counts returns how many slots each partition holds.
func (w *window) counts() map[int32]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[int32]int, len(w.parts))
	for p, ss := range w.parts {
		out[p] = len(ss)
	}
	return out
}

// revokeCount returns how many times partitions were dropped by a revoke.
func (w *window) revokeCount() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.revokes
}

// add takes slots (each partition's in offset order) unless a revoke
// happened since the caller read revokeCount as before: then the slots
// may belong to a partition this daemon no longer owns, or start past its
// committed offset, and add takes none and returns false. The check and
// the adding are atomic with respect to revokes.
func (w *window) add(before uint64, slots []*slot) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.revokes != before {
		return false
	}
	for _, s := range slots {
		ss := w.parts[s.part]
		if n := len(ss); n > 0 && ss[n-1].offset >= s.offset {
			// Delivered twice without a drop in between: the offset
			// order no longer holds. Cannot happen with a correct
			// client; taking nothing forces the caller to reset.
			return false
		}
	}
	for _, s := range slots {
		s.seq = w.seq
		w.seq++
		w.parts[s.part] = append(w.parts[s.part], s)
		w.size++
		w.peak = max(w.peak, len(w.parts[s.part]))
	}
	w.sizeChangedLocked()
	w.dispatchLocked()
	return true
}

// before orders the queued slots of one target: lower event ID first,
// then the one taken first.
func before(a, b *slot) bool {
	if a.task.EventID != b.task.EventID {
		return a.task.EventID < b.task.EventID
	}
	return a.seq < b.seq
}

// dispatchLocked starts queued copies while workers are free, oldest taken
// first (so that the commit prefixes move), skipping a slot whose target is
// being written or has an earlier queued slot.
func (w *window) dispatchLocked() {
	if w.halted || w.running >= w.workers {
		return
	}
	var queued []*slot
	first := map[string]*slot{} // target -> its queued slot that goes first
	for _, ss := range w.parts {
		for _, s := range ss {
			if s.state != slotQueued {
				continue
			}
			queued = append(queued, s)
			if f, ok := first[s.target]; !ok || before(s, f) {
				first[s.target] = s
			}
		}
	}
	slices.SortFunc(queued, func(a, b *slot) int { return cmp.Compare(a.seq, b.seq) })
	for _, s := range queued {
		if w.running >= w.workers {
			return
		}
		if w.busy[s.target] != nil || first[s.target] != s {
			continue
		}
		s.state = slotRunning
		s.exited = make(chan struct{})
		w.busy[s.target] = s
		w.running++
		// The target's next queued slot may go once this one is done.
		delete(first, s.target)
		w.start(s)
	}
}

// finish records the completion of s's copy, frees its worker and target,
// and starts what can start.
func (w *window) finish(s *slot, c schemas.CopyCompletion) {
	w.mu.Lock()
	w.running--
	if w.busy[s.target] == s {
		delete(w.busy, s.target)
	}
	if !s.dropped {
		s.state, s.comp = slotDone, c
	}
	w.dispatchLocked()
	w.mu.Unlock()
	close(s.exited)
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

// committable returns each partition's committable prefix (in partition
// order) and the number of completions in them.
func (w *window) committable() ([]batch, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []batch
	total := 0
	for p, ss := range w.parts {
		n := 0
		for n < len(ss) && ss[n].state == slotDone {
			n++
		}
		if n == 0 {
			continue
		}
		last := ss[n-1]
		out = append(out, batch{part: p, slots: slices.Clone(ss[:n]), next: last.offset + 1, epoch: last.epoch})
		total += n
	}
	slices.SortFunc(out, func(a, b batch) int { return cmp.Compare(a.part, b.part) })
	return out, total
}

// committed removes batches that were committed. A partition dropped (and
// perhaps taken again) since committable is left alone: its slots are no
// longer the ones committed.
func (w *window) committed(bs []batch) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, b := range bs {
		ss := w.parts[b.part]
		if len(ss) < len(b.slots) || ss[0] != b.slots[0] {
			continue
		}
		rest := ss[len(b.slots):]
		if len(rest) == 0 {
			delete(w.parts, b.part)
		} else {
			w.parts[b.part] = rest
		}
		w.size -= len(b.slots)
	}
	w.sizeChangedLocked()
	w.dispatchLocked()
}

// drop forgets the slots of parts (all partitions when all is set),
// cancelling their running copies, and returns channels closed when those
// copies have returned. revoked counts it as a revoke (see add).
func (w *window) drop(parts []int32, all, revoked bool) []chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if revoked {
		w.revokes++
	}
	if all {
		parts = parts[:0]
		for p := range w.parts {
			parts = append(parts, p)
		}
	}
	var exits []chan struct{}
	for _, p := range parts {
		for _, s := range w.parts[p] {
			s.dropped = true
			if s.state == slotRunning {
				s.cancel()
				exits = append(exits, s.exited)
			}
		}
		w.size -= len(w.parts[p])
		delete(w.parts, p)
	}
	w.sizeChangedLocked()
	w.dispatchLocked()
	return exits
}

// halt starts no more copies and cancels the running ones, whose results
// are then thrown away; finished slots stay, to be committed one last
// time. It returns channels closed when the cancelled copies returned.
func (w *window) halt() []chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.halted = true
	var exits []chan struct{}
	for _, ss := range w.parts {
		for _, s := range ss {
			if s.state == slotRunning {
				s.dropped = true
				s.cancel()
				exits = append(exits, s.exited)
			}
		}
	}
	return exits
}

func (w *window) sizeChangedLocked() {
	if w.onSize != nil {
		w.onSize(w.size)
	}
}
