package idempotency

import (
	"context"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
)

// leaseContext is the context a Work runs in. It carries the values of the
// context given to Runner.Do but not its cancellation or deadline, so that
// once execution runs, a caller that goes away (a client disconnecting from
// the Middleware) does not decide the outcome. It ends instead when the
// execution's lease runs out (Err: context.DeadlineExceeded), which each
// recovery point and Execution.Extend moves on, or when the Work returns
// (context.Canceled). Its deadline follows the Runner's clock.
type leaseContext struct {
	values context.Context
	clock  clock.Clock
	done   chan struct{}

	mu       sync.Mutex
	deadline time.Time
	timer    *clock.Timer
	err      error
}

var _ context.Context = (*leaseContext)(nil)

// newLeaseContext returns a leaseContext with parent's values that ends at
// deadline.
func newLeaseContext(parent context.Context, clk clock.Clock, deadline time.Time) *leaseContext {
	c := &leaseContext{values: context.WithoutCancel(parent), clock: clk, done: make(chan struct{}), deadline: deadline}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timer = clk.AfterFunc(deadline.Sub(clk.Now()), c.expire)
	return c
}

// Deadline implements context.Context: the end of the lease, as it stands.
func (c *leaseContext) Deadline() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.deadline, true
}

// Done implements context.Context.
func (c *leaseContext) Done() <-chan struct{} { return c.done }

// Err implements context.Context. It reads the clock itself, so that it is
// exact even before the timer has fired.
func (c *leaseContext) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil && !c.clock.Now().Before(c.deadline) {
		c.endLocked(context.DeadlineExceeded)
	}
	return c.err
}

// Value implements context.Context.
func (c *leaseContext) Value(key any) any { return c.values.Value(key) }

// String describes the context, as the standard contexts do.
func (c *leaseContext) String() string { return "idempotency.leaseContext" }

// expire ends the context if its deadline passed; the timer calls it.
func (c *leaseContext) expire() {
	_ = c.Err()
}

// renew moves the deadline, when the lease was renewed; an ended context
// stays ended.
func (c *leaseContext) renew(deadline time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil || !deadline.After(c.deadline) {
		return
	}
	c.deadline = deadline
	c.timer.Reset(deadline.Sub(c.clock.Now()))
}

// stop ends the context, when the Work returned.
func (c *leaseContext) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timer.Stop()
	if c.err == nil {
		c.endLocked(context.Canceled)
	}
}

func (c *leaseContext) endLocked(err error) {
	c.err = err
	close(c.done)
}
