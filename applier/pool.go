package applier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/hivedr/hivedr/internal/hms"
)

// pool is the applier's bounded set of DR metastore connections, shared
// by its database workers (applier.dr_connections). A worker takes one
// for a step (get) and gives it back after (put, or discard when the
// connection broke), so the number of databases never decides the number
// of connections, and a metastore whose own connection pool is small is
// never sent more calls at once than it can serve.
//
// Waiting workers are served first come, first served: a connection given
// back goes to the longest waiting worker, and a worker that wants another
// one queues behind those already waiting, so a database with a long
// backlog takes its turn like the others instead of keeping a connection.
//
// A connection that broke is closed and dialled again by the next worker
// that needs one. After a failed dial or a broken connection, dials wait
// an exponential backoff (with jitter, capped at poolMaxBackoff) that the
// next healthy connection resets: a metastore that refuses or times out
// is given time to recover instead of being hammered by every worker.
type pool struct {
	dial func(ctx context.Context) (Metastore, func() error, error)
	size int
	log  *slog.Logger
	m    *Metrics

	mu   sync.Mutex
	idle []*conn
	// open counts the connections made or being made: idle, in use and
	// dialling; never more than size.
	open    int
	waiters []chan grant // FIFO
	// failures counts the failed dials and broken connections since the
	// last healthy one; dials wait until notBefore.
	failures  int
	notBefore time.Time
	// conns counts the connections made (idle and in use), peak the most
	// at once.
	conns, peak int
}

// conn is one DR metastore connection of a pool.
type conn struct {
	ms    Metastore
	close func() error
	once  sync.Once
	// stop ends the interruption of the connection by the context it was
	// taken with (get); false when that already closed it.
	stop func() bool
}

func (c *conn) shut() { c.once.Do(func() { c.close() }) }

// grant is what a waiting worker is given: a connection, or (c nil) the
// right to dial one.
type grant struct{ c *conn }

// poolBackoff is the first wait after a failure; it doubles per failure
// up to poolMaxBackoff.
const (
	poolBackoff    = 250 * time.Millisecond
	poolMaxBackoff = 30 * time.Second
)

func newPool(size int, dial func(ctx context.Context) (Metastore, func() error, error), log *slog.Logger, m *Metrics) *pool {
	return &pool{dial: dial, size: max(1, size), log: log, m: m}
}

// get returns a connection, waiting for one to be given back when all
// are in use, or dialling one when fewer than size are open (after the
// backoff of earlier failures). It returns ctx's error when ctx ends
// first. While the caller holds it, the connection is closed when ctx
// ends, which ends a call in progress on it at once.
func (p *pool) get(ctx context.Context) (*conn, error) {
	start := time.Now()
	p.mu.Lock()
	var g grant
	switch {
	case len(p.waiters) == 0 && len(p.idle) > 0:
		g.c = p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		p.mu.Unlock()
	case len(p.waiters) == 0 && p.open < p.size:
		p.open++
		p.mu.Unlock()
	default:
		ch := make(chan grant, 1)
		p.waiters = append(p.waiters, ch)
		p.mu.Unlock()
		select {
		case g = <-ch:
		case <-ctx.Done():
			p.mu.Lock()
			for i, w := range p.waiters {
				if w == ch {
					p.waiters = append(p.waiters[:i], p.waiters[i+1:]...)
					p.mu.Unlock()
					p.m.drWait.Observe(time.Since(start).Seconds())
					return nil, ctx.Err()
				}
			}
			p.mu.Unlock()
			// Given something meanwhile: pass it on.
			if g = <-ch; g.c != nil {
				p.mu.Lock()
				p.pass(g)
				p.mu.Unlock()
			} else {
				p.release(false)
			}
			p.m.drWait.Observe(time.Since(start).Seconds())
			return nil, ctx.Err()
		}
	}
	p.m.drWait.Observe(time.Since(start).Seconds())
	if g.c == nil {
		c, err := p.connect(ctx)
		if err != nil {
			p.release(ctx.Err() == nil)
			return nil, err
		}
		g.c = c
	}
	g.c.stop = context.AfterFunc(ctx, g.c.shut)
	return g.c, nil
}

// connect dials a connection for a slot already counted in open, after
// the backoff of earlier failures; ctx ending ends the wait and the dial.
func (p *pool) connect(ctx context.Context) (*conn, error) {
	p.mu.Lock()
	wait := time.Until(p.notBefore)
	p.mu.Unlock()
	if wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
	type dialed struct {
		c   *conn
		err error
	}
	ch := make(chan dialed, 1)
	go func() {
		ms, closeFn, err := p.dial(ctx)
		if err != nil {
			ch <- dialed{err: err}
			return
		}
		ch <- dialed{c: &conn{ms: ms, close: closeFn}}
	}()
	select {
	case d := <-ch:
		if d.err != nil {
			return nil, fmt.Errorf("connect to the DR metastore: %w", d.err)
		}
		p.opened()
		return d.c, nil
	case <-ctx.Done():
		// A dial cannot be interrupted: close what it makes.
		go func() {
			if d := <-ch; d.c != nil {
				d.c.shut()
			}
		}()
		return nil, ctx.Err()
	}
}

// opened counts a new connection.
func (p *pool) opened() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns++
	p.m.drOpen.Set(float64(p.conns))
	if p.conns > p.peak {
		p.peak = p.conns
		p.m.drPeak.Set(float64(p.peak))
	}
}

// put gives back a connection in step with the metastore: to the longest
// waiting worker, else to the idle ones. A connection its context closed
// is discarded instead.
func (p *pool) put(c *conn) {
	if !c.stop() {
		p.discard(c, false)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failures, p.notBefore = 0, time.Time{}
	p.pass(grant{c: c})
}

// discard closes a connection that is no longer usable (a call on it
// failed in transit). failed: the metastore failed it (not the caller's
// context ending), so dials back off.
func (p *pool) discard(c *conn, failed bool) {
	c.stop()
	c.shut()
	p.mu.Lock()
	p.conns--
	p.m.drOpen.Set(float64(p.conns))
	p.mu.Unlock()
	p.release(failed)
}

// release frees the slot of a connection that is gone (or was never
// made), handing it to the longest waiting worker to dial; failed counts
// a failure for the backoff.
func (p *pool) release(failed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if failed {
		p.failures++
		d := min(poolBackoff<<min(p.failures-1, 16), poolMaxBackoff)
		d = d/2 + time.Duration(rand.Int64N(int64(d)/2+1))
		p.notBefore = time.Now().Add(d)
		if p.failures == 1 || p.failures%10 == 0 {
			p.log.Warn("the DR metastore failed a connection; new connections back off", "failures", p.failures, "next_dial_in", d)
		}
	}
	p.open--
	p.pass(grant{})
}

// pass hands g (a connection, or with c nil a free slot) to the longest
// waiting worker; without one, a connection goes idle and a slot stays
// free. Under p.mu.
func (p *pool) pass(g grant) {
	if len(p.waiters) > 0 {
		if g.c == nil {
			p.open++
		}
		ch := p.waiters[0]
		p.waiters = p.waiters[1:]
		ch <- g // (buffered)
		return
	}
	if g.c != nil {
		p.idle = append(p.idle, g.c)
	}
}

// close closes the idle connections; those in use are closed by their
// workers (discard) or their context.
func (p *pool) close() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.open -= len(idle)
	p.conns -= len(idle)
	p.m.drOpen.Set(float64(p.conns))
	p.mu.Unlock()
	for _, c := range idle {
		c.shut()
	}
}

// connBroken reports whether a connection a step ended with err on is
// out of step with the metastore and must be discarded: a call on it
// failed in transit (a transport or protocol error, a timeout, the
// metastore closing it, the call cut off). After the metastore's own
// answer (a refusal, an exception), or an error of something else (the
// completion store, the filesystem, a fence), it is kept.
func connBroken(err error) bool {
	if err == nil {
		return false
	}
	var refused *RefusedError
	if errors.As(err, &refused) || hms.Answered(err) {
		return false
	}
	var te thrift.TTransportException
	var pe thrift.TProtocolException
	var ne net.Error
	return errors.As(err, &te) || errors.As(err, &pe) || errors.As(err, &ne) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
