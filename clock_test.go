package retry_test

import (
	"context"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/exactlyonce/retry"
)

// autoClock is a mock clock whose timers fire at once, moving the clock
// forward by their duration: every wait of the code under test takes no real
// time, and the clock shows exactly how long it waited. Its AfterFunc timers
// and contexts follow the embedded mock, which tests move with Add. It is
// safe for concurrent use.
type autoClock struct {
	*clock.Mock
	mu     sync.Mutex
	slept  []time.Duration
	waited time.Duration
	origin time.Time
}

var realClock = clock.New()

func newAutoClock() *autoClock {
	m := clock.NewMock()
	start := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	m.Set(start)
	return &autoClock{Mock: m, origin: start}
}

// Now is the mock's time plus every wait so far.
func (c *autoClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Mock.Now().Add(c.waited)
}

// Since is Now() - t.
func (c *autoClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// Timer moves the clock forward by d and returns a timer that fires at once.
func (c *autoClock) Timer(d time.Duration) *clock.Timer {
	c.mu.Lock()
	c.slept = append(c.slept, d)
	c.waited += d
	c.mu.Unlock()
	return realClock.Timer(0)
}

// Waits returns the waits started so far.
func (c *autoClock) Waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.slept...)
}

// Elapsed is the clock's time since it was made.
func (c *autoClock) Elapsed() time.Duration { return c.Now().Sub(c.origin) }

// onAttempt is a trace that calls fn with every attempt the loop decided on.
func onAttempt(fn func(retry.Attempt)) retry.Option {
	return retry.WithTrace(&retry.Trace{Decided: func(_ context.Context, a retry.Attempt) { fn(a) }})
}

// onRetry is a trace that calls fn before every wait that precedes a retry.
func onRetry(fn func(retry.Attempt)) retry.Option {
	return retry.WithTrace(&retry.Trace{Decided: func(_ context.Context, a retry.Attempt) {
		if a.Retrying {
			fn(a)
		}
	}})
}

// noRideThrough turns riding through outages off.
var noRideThrough = retry.WithoutRideThrough()
