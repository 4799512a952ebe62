package sim

import (
	"context"
	"flag"
	"sync"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/exactlyonce/retry/idempotency"
)

var (
	seedsFlag  = flag.Int("seeds", 0, "sim: how many seeds to run (0: the test's own number)")
	seedFlag   = flag.Int64("seed", 0, "sim: run this seed only, printing its event trace (0: none)")
	eventsFlag = flag.Int("events", 0, "sim: how many events each seed draws (0: the test's own number)")
)

// Harness is the store a simulation runs on, shared by all its seeds: each
// seed keys its records by a caller of its own.
type Harness struct {
	// Store is the store under test.
	Store idempotency.Store
	// Now returns the store's time now: the time its leases and
	// expiries are read against.
	Now func() time.Time
	// Advance moves the store's time on by d (a TimeShift's Advance, or
	// a Clock's Add).
	Advance func(d time.Duration)
	// LocalWrite, for a TxStore, writes name in the transaction that ctx
	// carries (the execution's own local write, committed with its
	// outcome). Nil for another store.
	LocalWrite func(ctx context.Context, name string) error
	// FailWrite, for a TxStore, makes a statement of the transaction
	// that ctx carries fail as a deadlock or a serialization failure
	// would (a transient failure), and returns its error. Nil: the
	// simulation draws no such failure.
	FailWrite func(ctx context.Context) error
	// LocalWrites returns the names of the committed local writes that
	// start with prefix.
	LocalWrites func(ctx context.Context, prefix string) ([]string, error)
}

// Options sets how much a test simulates.
type Options struct {
	// Seeds is how many seeds run (default 100); -seeds overrides it.
	Seeds int
	// Events is how many events each seed draws before the end (default
	// 60).
	Events int
}

// Clock is a manual clock for a store that reads time from a clock.Clock
// (a MemoryStore): its time moves only by Add, and its timers never fire.
type Clock struct {
	mu    sync.Mutex
	now   time.Time
	never *clock.Mock
}

var _ clock.Clock = (*Clock)(nil)

// NewClock returns a Clock at a fixed instant.
func NewClock() *Clock {
	return &Clock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), never: clock.NewMock()}
}

// Add moves the clock on by d.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Since returns the time since t.
func (c *Clock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// Until returns the time until t.
func (c *Clock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }

// After returns a channel that never receives.
func (c *Clock) After(d time.Duration) <-chan time.Time { return c.never.After(d) }

// AfterFunc returns a timer that never fires.
func (c *Clock) AfterFunc(d time.Duration, f func()) *clock.Timer { return c.never.AfterFunc(d, f) }

// Sleep returns at once.
func (c *Clock) Sleep(time.Duration) {}

// Tick returns a channel that never receives.
func (c *Clock) Tick(d time.Duration) <-chan time.Time { return c.never.Tick(d) }

// Ticker returns a ticker that never ticks.
func (c *Clock) Ticker(d time.Duration) *clock.Ticker { return c.never.Ticker(d) }

// Timer returns a timer that never fires.
func (c *Clock) Timer(d time.Duration) *clock.Timer { return c.never.Timer(d) }

// WithDeadline returns a context that ends with parent only.
func (c *Clock) WithDeadline(parent context.Context, _ time.Time) (context.Context, context.CancelFunc) {
	return context.WithCancel(parent)
}

// WithTimeout returns a context that ends with parent only.
func (c *Clock) WithTimeout(parent context.Context, _ time.Duration) (context.Context, context.CancelFunc) {
	return context.WithCancel(parent)
}

// runnerClock is the Runners' clock: the store's time, timers that never
// fire (the simulation never waits on a lease's context).
type runnerClock struct {
	*Clock
	now func() time.Time
}

func (c runnerClock) Now() time.Time                  { return c.now() }
func (c runnerClock) Since(t time.Time) time.Duration { return c.now().Sub(t) }
func (c runnerClock) Until(t time.Time) time.Duration { return t.Sub(c.now()) }
