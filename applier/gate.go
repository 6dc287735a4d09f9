package applier

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The fetch gate. A worker pauses its own topic when its queue passes its
// share of applier.look_ahead_bytes (push), but a topic not fetched yet
// has no queue to pass: each topic's first fetch comes in whole (up to
// partitionFetch). With 2,000 databases behind on their topics those
// first fetches alone held 226 MiB against the 16 MiB default, and the
// decoded events three times that. So while the queues of the workers
// that are applying hold more than the budget together, the gate holds
// back the fetching of every topic the applier owns, and lets it go once
// they are down to half the budget.
//
// What a stalled worker queues is not counted: one that waits (for file
// copies, for another database's worker to reach a rename, for a
// bootstrap's rounds) or is halted does not drain its queue by applying,
// and may need more of a topic to go on (another database's, or its own
// for a bootstrap's BEGIN). Counted, it could keep the gate shut for
// good; uncounted, the workers still bound it by their shares (push), as
// without a gate. The gate pauses partitions and the workers pause
// topics: franz-go keeps the two apart, so neither undoes the other.

// fetchGate is the gate's state (Applier.gate).
type fetchGate struct {
	shut atomic.Bool // read without mu on every push and pop
	mu   sync.Mutex
	held map[string][]int32 // the partitions it paused, by topic
}

// applying is the encoded size of what the workers that are not stalled
// queue: what the gate weighs against the budget.
func (a *Applier) applying() int64 {
	return a.buffered.Load() - a.stalled.Load()
}

// gateCheck shuts the gate when the applying workers' queues hold more
// than the budget, and opens it when they are down to half of it. It is
// called without any worker's lock held, after every change to the
// queues or to a worker's stall.
func (a *Applier) gateCheck() {
	budget := a.cfg.LookAheadBytes
	g := &a.gate
	n := a.applying()
	if shut := g.shut.Load(); !shut && n <= budget || shut && n > budget/2 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	n = a.applying()
	switch shut := g.shut.Load(); {
	case !shut && n > budget:
		a.mu.Lock()
		held := make(map[string][]int32, len(a.owned))
		for t, parts := range a.owned {
			held[t] = slices.Clone(parts)
		}
		cl := a.cl
		a.mu.Unlock()
		if cl == nil || len(held) == 0 {
			return
		}
		cl.PauseFetchPartitions(held)
		g.held = held
		g.shut.Store(true)
		a.m.fetchGated.Set(1)
		a.log.Debug("look-ahead budget full: fetching held back", "applying_bytes", n, "budget", budget, "topics", len(held))
	case shut && n <= budget/2:
		a.openGate()
	}
}

// gateAdmit holds back newly assigned partitions too while the gate is
// shut (before the client fetches them): topics are assigned as their
// databases appear, and a backlog's new databases came in after the gate
// shut, each with its first fetch whole.
func (a *Applier) gateAdmit(cl *kgo.Client, assigned map[string][]int32) {
	g := &a.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.shut.Load() || len(assigned) == 0 {
		return
	}
	cl.PauseFetchPartitions(assigned)
	addPartitions(g.held, assigned)
}

// addPartitions adds the partitions of add to m, each topic's once.
func addPartitions(m, add map[string][]int32) {
	for t, parts := range add {
		for _, p := range parts {
			if !slices.Contains(m[t], p) {
				m[t] = append(m[t], p)
			}
		}
	}
}

// openGate resumes what the gate paused; under a.gate.mu.
func (a *Applier) openGate() {
	g := &a.gate
	a.mu.Lock()
	cl := a.cl
	a.mu.Unlock()
	if cl != nil && len(g.held) > 0 {
		cl.ResumeFetchPartitions(g.held)
	}
	g.held = nil
	g.shut.Store(false)
	a.m.fetchGated.Set(0)
	a.log.Debug("look-ahead under half the budget: fetching again", "applying_bytes", a.applying(), "budget", a.cfg.LookAheadBytes)
}

// setStalled marks w stalled (waiting or halted) or applying again, and
// moves what it queues out of or into what the gate weighs; under w.mu.
func (w *worker) setStalled(on bool) {
	if w.stalled == on {
		return
	}
	w.stalled = on
	if w.exited {
		return
	}
	if on {
		w.a.stalled.Add(w.bytes)
	} else {
		w.a.stalled.Add(-w.bytes)
	}
}

// stall is setStalled taking w.mu, then checks the gate.
func (w *worker) stall(on bool) {
	w.mu.Lock()
	w.setStalled(on)
	w.mu.Unlock()
	w.a.gateCheck()
}
