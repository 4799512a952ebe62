package sim

import (
	"context"
	"fmt"
	"time"

	"github.com/benbjohnson/clock"
)

// gateClock is a consumer's clock. Its time is the store's. A timer is a
// wait: a gate (the scheduler decides when the wait ends), after which the
// world's clock moves on by the wait and the timer has fired. Tickers
// (keep-alives) and AfterFuncs (the stop's grace period) never fire,
// except that a crash ends the grace periods: keep-alives are not
// simulated (a handler that runs past its lease is a pause), and a
// stopping consumer waits as long as its handlers take.
type gateClock struct {
	a *actor
	// fired makes the timers of waits, which fire at once (a real
	// clock's, of no duration); never makes those that never fire (it
	// is never moved).
	fired clock.Clock
	never *clock.Mock
}

var _ clock.Clock = (*gateClock)(nil)

func newGateClock(a *actor) *gateClock {
	return &gateClock{a: a, fired: clock.New(), never: clock.NewMock()}
}

// Now returns the store's time.
func (c *gateClock) Now() time.Time { return c.a.w.now() }

// Since returns the time since t.
func (c *gateClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// Until returns the time until t.
func (c *gateClock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }

// Timer waits at a gate, moves the world's clock by d, and returns a timer
// that fires at once.
//
// A wait of a second or more is rounded up to whole seconds: the consumer
// computes some from a lease read off a server's clock, which the real
// time moves, and rounded they replay.
func (c *gateClock) Timer(d time.Duration) *clock.Timer {
	if d >= time.Second {
		d = d.Truncate(time.Second) + time.Second
	}
	if c.a.gate(fmt.Sprintf("wait %v", d)) == nil {
		c.a.w.advance(d)
	}
	return c.fired.Timer(0)
}

// After is Timer(d).C.
func (c *gateClock) After(d time.Duration) <-chan time.Time { return c.Timer(d).C }

// Sleep is a wait of d.
func (c *gateClock) Sleep(d time.Duration) { <-c.After(d) }

// AfterFunc returns a timer that never fires; a crash of the actor runs f.
func (c *gateClock) AfterFunc(d time.Duration, f func()) *clock.Timer {
	c.a.addGrace(f)
	return c.never.AfterFunc(d, f)
}

// Ticker returns a ticker that never ticks.
func (c *gateClock) Ticker(d time.Duration) *clock.Ticker { return c.never.Ticker(d) }

// Tick returns the channel of a ticker that never ticks.
func (c *gateClock) Tick(d time.Duration) <-chan time.Time { return c.never.Tick(d) }

// WithDeadline returns a context that ends with parent only.
func (c *gateClock) WithDeadline(parent context.Context, _ time.Time) (context.Context, context.CancelFunc) {
	return context.WithCancel(parent)
}

// WithTimeout returns a context that ends with parent only.
func (c *gateClock) WithTimeout(parent context.Context, _ time.Duration) (context.Context, context.CancelFunc) {
	return context.WithCancel(parent)
}
