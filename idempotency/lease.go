package idempotency

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
)

// ErrLeaseExpired is the cause (context.Cause) of the end of a Work's
// context when the execution's lease ran out: the work ran longer than its
// lease and did not renew it (Execution.Extend, a recovery point). Another
// attempt may take the key over from then on.
var ErrLeaseExpired = errors.New("idempotency: the execution's lease ran out")

// leaseContext is the context a Work runs in. It carries the values of the
// context given to Runner.Do but not its cancellation or deadline, so that
// once execution runs, a caller that goes away (a client disconnecting from
// the Middleware) does not decide the outcome. It is bounded by the lease
// instead: its deadline is the end of the lease, which each recovery point
// and Execution.Extend moves on; when the deadline passes it ends (Err:
// context.DeadlineExceeded; cause ErrLeaseExpired), and when the Work
// returns it ends too (context.Canceled). The deadline follows the Runner's
// clock.
//
// It embeds a standard cancelable context, so that the contexts derived
// from it (and context.AfterFunc, which pgx uses for every query) attach to
// it directly, without a goroutine each. Those derived contexts end with
// context.Canceled and the cause ErrLeaseExpired.
//
// The timer that ends it is armed by the first call to Done (which every
// waiter, derived context and AfterFunc makes): a Work that never waits on
// its context costs no timer, and Err reads the clock itself.
type leaseContext struct {
	context.Context
	cancel context.CancelCauseFunc
	clock  clock.Clock
	armed  atomic.Bool

	mu       sync.Mutex
	deadline time.Time
	timer    *clock.Timer // nil until armed
}

// newLeaseContext returns a leaseContext with parent's values that ends at
// deadline.
func newLeaseContext(parent context.Context, clk clock.Clock, deadline time.Time) *leaseContext {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(parent))
	return &leaseContext{Context: ctx, cancel: cancel, clock: clk, deadline: deadline}
}

// Done implements context.Context; the first call arms the timer.
func (c *leaseContext) Done() <-chan struct{} {
	if !c.armed.Load() {
		c.arm()
	}
	return c.Context.Done()
}

// arm starts the timer that ends the context at its deadline (or ends it
// now, if the deadline passed), unless it ended already.
func (c *leaseContext) arm() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.armed.Load() {
		return
	}
	c.armed.Store(true)
	if c.Context.Err() != nil {
		return
	}
	if d := c.deadline.Sub(c.clock.Now()); d > 0 {
		c.timer = c.clock.AfterFunc(d, c.expire)
	} else {
		c.cancel(ErrLeaseExpired)
	}
}

// Deadline implements context.Context: the end of the lease, as it stands.
func (c *leaseContext) Deadline() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.deadline, true
}

// Err implements context.Context. It reads the clock itself, so that it is
// exact even before the timer has fired.
func (c *leaseContext) Err() error {
	c.expire()
	err := c.Context.Err()
	if err != nil && context.Cause(c.Context) == ErrLeaseExpired {
		return context.DeadlineExceeded
	}
	return err
}

// String describes the context, as the standard contexts do.
func (c *leaseContext) String() string { return "idempotency.leaseContext" }

// expire ends the context if its deadline passed; the timer calls it.
func (c *leaseContext) expire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.clock.Now().Before(c.deadline) {
		c.cancel(ErrLeaseExpired)
	}
}

// renew moves the deadline on, when the lease was renewed; an ended context
// stays ended.
func (c *leaseContext) renew(deadline time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.Context.Err() != nil || !deadline.After(c.deadline) {
		return
	}
	c.deadline = deadline
	if c.timer != nil {
		c.timer.Reset(deadline.Sub(c.clock.Now()))
	}
}

// stop ends the context, when the Work returned.
func (c *leaseContext) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.timer != nil {
		c.timer.Stop()
	}
	c.cancel(nil)
}
