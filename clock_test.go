package retry_test

import (
	"sync"
	"time"

	"github.com/benbjohnson/clock"
)

// autoClock is a mock clock whose timers fire at once, moving the clock
// forward by their duration: every wait of the code under test takes no real
// time, and the clock shows exactly how long it waited.
type autoClock struct {
	*clock.Mock
	mu     sync.Mutex
	slept  []time.Duration
	origin time.Time
}

func newAutoClock() *autoClock {
	m := clock.NewMock()
	start := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	m.Set(start)
	return &autoClock{Mock: m, origin: start}
}

// Timer moves the clock forward by d and returns a timer that has fired.
func (c *autoClock) Timer(d time.Duration) *clock.Timer {
	c.mu.Lock()
	c.slept = append(c.slept, d)
	c.mu.Unlock()
	c.Mock.Add(d)
	return c.Mock.Timer(0)
}

// Waits returns the waits started so far.
func (c *autoClock) Waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.slept...)
}

// Elapsed is the mock time since the clock was made.
func (c *autoClock) Elapsed() time.Duration { return c.Now().Sub(c.origin) }
