package retry

import (
	"context"
	"sync"
	"sync/atomic"
)

// attemptCtx is the context of one attempt whose parent can never end (its
// Done is nil) and that a timer may cut: what context.WithCancel would
// give, without its allocations. It lives inside the attempt's outgoing
// request (see outgoing), so it costs nothing of its own; its Done channel
// is made only when asked for.
//
// It has the AfterFunc method that package context looks for (see
// context.AfterFunc), so a context derived from it, as net/http derives
// one per round trip, registers a func here instead of starting a
// goroutine to wait for it. A registration is dropped when the context
// ends; its stop func does not remove it earlier (and so reports false),
// which is harmless for package context, whose funcs do nothing once their
// own context has ended and which guards its own AfterFunc with a
// sync.Once. An attempt registers one such func, from net/http's round
// trip, so nothing accumulates.
type attemptCtx struct {
	context.Context // the loop's: it never ends

	done atomic.Value // chan struct{}: made on first use, closed when the context ends

	mu    sync.Mutex
	err   error    // context.Canceled once the context has ended
	first func()   // the first registered AfterFunc
	more  []func() // the others
}

// closedDone is the Done channel of a context that ended before anyone
// asked for it.
var closedDone = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// init makes c a fresh context under parent, whose Done must be nil.
func (c *attemptCtx) init(parent context.Context) { c.Context = parent }

// Done returns a channel closed when the context ends.
func (c *attemptCtx) Done() <-chan struct{} {
	if d, ok := c.done.Load().(chan struct{}); ok {
		return d
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.done.Load().(chan struct{})
	if !ok {
		d = make(chan struct{})
		c.done.Store(d)
	}
	return d
}

// Err returns context.Canceled once the context has ended, else nil.
func (c *attemptCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// AfterFunc arranges for f to be called once the context ends, or at once
// on a goroutine of its own if it has ended; see the type's doc for stop.
func (c *attemptCtx) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		go f()
		return stopNothing
	}
	if c.first == nil {
		c.first = f
	} else {
		c.more = append(c.more, f)
	}
	c.mu.Unlock()
	return stopNothing
}

// stopNothing is the stop func of an attemptCtx's AfterFunc.
func stopNothing() bool { return false }

// cancel ends the context, if it has not ended, and calls the funcs
// registered with AfterFunc.
func (c *attemptCtx) cancel() {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = context.Canceled
	if d, ok := c.done.Load().(chan struct{}); ok {
		close(d)
	} else {
		c.done.Store(closedDone)
	}
	first, more := c.first, c.more
	c.first, c.more = nil, nil
	c.mu.Unlock()
	if first != nil {
		first()
	}
	for _, f := range more {
		f()
	}
}

// String names the context, as package context's own do.
func (c *attemptCtx) String() string { return "retry.attemptContext" }
