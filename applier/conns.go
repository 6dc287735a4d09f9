package applier

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// A worker's extra DR metastore connections: a run of events on several
// tables (Decision.Tables) makes each table's calls on a connection of
// its own, so a database whose warehouse loads many tables at once waits
// for the slowest table's calls, not for the sum of all. Thrift clients
// are not safe for concurrent use: one connection per table in flight.
// The extra connections are dialed when a run first needs them, kept for
// the next runs, and closed with the worker's own (reconnect, stop).

// extraConns returns up to n extra connections, dialing the missing ones.
// A dial that fails ends the list there (the run goes on with fewer; the
// next run dials again), logged once until one succeeds.
func (w *worker) extraConns(ctx context.Context, n int) []Metastore {
	for len(w.extra) < n {
		ms, closeFn, err := w.a.cfg.Dial(ctx)
		if err != nil {
			if !w.extraFailed {
				w.log.Warn("could not open another connection to the DR metastore; the run's tables go on the connections open", "open", 1+len(w.extra), "err", err)
			}
			w.extraFailed = true
			break
		}
		w.extraFailed = false
		w.extra = append(w.extra, ms)
		w.closeExtra = append(w.closeExtra, closeFn)
	}
	return w.extra[:min(n, len(w.extra))]
}

// dropExtra closes the extra connections.
func (w *worker) dropExtra() {
	for _, c := range w.closeExtra {
		c()
	}
	w.extra, w.closeExtra = nil, nil
}

// runTables runs acts, a decision's span of tables (Decision.Tables):
// each table's actions in order, different tables' at once, on x's
// connection and up to applier.run_connections-1 extra ones. It returns
// once every call made has returned (none is left in flight), with nil
// or the error of a table whose actions failed; after a failure no
// further table is begun. A transport error is returned before a refusal:
// the caller then drops every connection and plans again, and the
// refusal, if it still holds, comes back then.
func (w *worker) runTables(ctx context.Context, x *executor, acts []Action) error {
	cs, ok := chains(acts)
	if !ok {
		return fmt.Errorf("a plan's span of tables holds another action: %v (a bug)", acts)
	}
	conns := []Metastore{x.ms}
	if n := min(len(cs), w.a.cfg.RunConnections); n > 1 {
		conns = append(conns, w.extraConns(ctx, n-1)...)
	}
	return runChains(ctx, x, conns, cs)
}

// runChains runs the chains of actions on the connections, each chain on
// one connection in order, the connections at once; see runTables.
func runChains(ctx context.Context, x *executor, conns []Metastore, cs [][]Action) error {
	next := make(chan []Action, len(cs))
	for _, c := range cs {
		next <- c
	}
	close(next)
	var (
		wg     sync.WaitGroup
		failed atomic.Bool
		errs   = make([]error, len(conns))
	)
	for i, ms := range conns {
		sub := *x
		sub.ms = ms
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range next {
				if failed.Load() {
					return
				}
				for _, a := range c {
					if err := sub.run(ctx, a); err != nil {
						errs[i] = err
						failed.Store(true)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	return firstError(errs)
}

// firstError is the first transport (or other non-refusal) error of
// errs, else the first refusal, else nil.
func firstError(errs []error) error {
	var refused error
	for _, err := range errs {
		var r *RefusedError
		switch {
		case err == nil:
		case errors.As(err, &r):
			if refused == nil {
				refused = err
			}
		default:
			return err
		}
	}
	return refused
}
