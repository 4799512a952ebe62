package retry

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
)

// States of a dependency.
const (
	depUp         int32 = iota // requests go
	depDown                    // requests wait; only probes go
	depRecovering              // waiting requests are released, paced
)

// Tuning of the gate (see RideThrough).
const (
	// downAfter is how many attempts in a row must fail for a dependency
	// to be taken as down: with independent failures of 30%, a run this
	// long happens once in 15,000 attempts or so.
	downAfter = 8
	// probeFirst is the wait before the first probe of a dependency that
	// went down; each failed probe doubles it, up to probeMax.
	probeFirst = 100 * time.Millisecond
	probeMax   = time.Second
	// The release rate after a recovery ramps from the rate at which
	// requests arrived to rampTop times that over rampTime, and is never
	// below minReleaseRate per second.
	rampTime       = 500 * time.Millisecond
	rampTop        = 1.8
	minReleaseRate = 20.0
)

// dependency is what a Transport (per host) or a Budget (for Do) knows of
// one dependency's health, and the requests waiting for it to come back.
// While it is up, asking it costs one atomic load. A request waits on its
// own goroutine, on a channel it shares with the requests whose waits end
// in the same slotWidth, and the dependency's one timer releases waiters.
type dependency struct {
	clock      clock.Clock
	maxWait    time.Duration
	maxWaiters int

	state  atomic.Int32
	streak atomic.Int32 // attempts in a row that failed

	mu        sync.Mutex
	queue     waitQueue // earliest deadline first
	timer     stopper   // the next tick; nil when none is due
	timerAt   time.Time
	downSince time.Time
	arrivals  int // requests that waited since downSince
	probeGap  time.Duration
	nextProbe time.Time
	probing   bool // a probe is out
	rate      float64
	recStart  time.Time
	credit    float64 // releases due
	creditAt  time.Time
	stats     DependencyStats
}

func newDependency(name string, clk clock.Clock, ride rideConfig) *dependency {
	return &dependency{clock: clk, maxWait: ride.maxWait, maxWaiters: ride.maxWaiters,
		stats: DependencyStats{Name: name}}
}

// admit lets an attempt go, or holds it while the dependency is down, until
// it is released (as a probe, or paced after a recovery), its context ends,
// or it has waited too long. probed says the request already probed once:
// it never probes again. A request without a deadline waits until *bound,
// set to MaxWait from its first wait. A nil dependency lets everything go.
func (d *dependency) admit(ctx context.Context, deadline time.Time, probed bool, bound *time.Time) (probe bool, err error) {
	if d == nil || d.state.Load() == depUp {
		return false, nil
	}
	s, probe, err := d.enqueue(deadline, probed, bound)
	if s == nil {
		return probe, err
	}
	select {
	case _, released := <-s.ch:
		if !released {
			return false, ErrDependencyDown
		}
		return d.woken(s), nil
	case <-ctx.Done():
		d.abandon(s)
		if ctx.Err() == context.DeadlineExceeded {
			return false, ErrDependencyDown
		}
		return false, ErrCancelled
	}
}

// enqueue lets the attempt go at once (a nil slot) or queues it.
func (d *dependency) enqueue(deadline time.Time, probed bool, bound *time.Time) (*waitSlot, bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.clock.Now()
	switch d.state.Load() {
	case depUp:
		return nil, false, nil
	case depDown:
		if !probed && !d.probing && !now.Before(d.nextProbe) && d.queue.Len() == 0 {
			d.probing = true
			d.stats.Probes++
			return nil, true, nil
		}
	case depRecovering:
		d.refill(now)
		if d.queue.Len() == 0 && d.credit >= 1 {
			d.credit--
			return nil, false, nil
		}
	}
	if d.queue.Len() >= d.maxWaiters {
		d.stats.Rejected++
		return nil, false, ErrDependencyDown
	}
	if deadline.IsZero() {
		if bound.IsZero() {
			*bound = now.Add(d.maxWait)
		}
		deadline = *bound
	}
	s := d.queue.join(slotOf(deadline), probed)
	d.arrivals++
	d.stats.Waited++
	d.schedule(now)
	return s, false, nil
}

// woken tells a released waiter whether it was released as the probe.
func (d *dependency) woken(s *waitSlot) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s.probes > 0 {
		s.probes--
		return true
	}
	return false
}

// abandon takes a waiter whose context ended out of its slot. If its
// release was already sent, another waiter of the slot takes it; a probe
// nobody takes goes to someone else.
func (d *dependency) abandon(s *waitSlot) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s.index >= 0 {
		d.queue.leave(s)
		d.stats.Abandoned++
		return
	}
	if s.probes > 0 {
		s.probes--
		d.probing = false
		d.schedule(d.clock.Now())
	}
}

// observe learns from an attempt's outcome; probe says the attempt was
// the dependency's probe.
func (d *dependency) observe(o outcome, probe bool) {
	if d == nil {
		return
	}
	switch {
	case o.err == nil && !o.bad && !o.pending:
		if d.streak.Load() != 0 {
			d.streak.Store(0)
		}
		if probe || d.state.Load() == depDown {
			d.recovered()
		}
	case o.unhealthy():
		n := d.streak.Add(1)
		switch {
		case probe:
			d.probeFailed()
		case n >= downAfter && d.state.Load() != depDown:
			d.markDown()
		}
	case probe: // it says nothing: the probe goes to someone else
		d.probeFailed()
	}
}

// markDown takes the dependency as down: requests wait, probes go.
func (d *dependency) markDown() {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.state.Load() == depDown {
		return
	}
	now := d.clock.Now()
	d.state.Store(depDown)
	d.stats.Outages++
	d.downSince, d.arrivals = now, 0
	d.probeGap, d.nextProbe, d.probing = probeFirst, now.Add(probeFirst), false
	d.schedule(now)
}

// probeFailed schedules the next probe, later than the last.
func (d *dependency) probeFailed() {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.clock.Now()
	d.probing = false
	d.probeGap = min(2*d.probeGap, probeMax)
	d.nextProbe = now.Add(d.probeGap)
	d.schedule(now)
}

// recovered starts releasing the waiting requests.
func (d *dependency) recovered() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.probing = false
	if d.state.Load() != depDown {
		return
	}
	now := d.clock.Now()
	arrived := float64(d.arrivals) / max(now.Sub(d.downSince), probeFirst).Seconds()
	d.rate = max(arrived, minReleaseRate)
	d.recStart, d.credit, d.creditAt = now, 1, now
	d.state.Store(depRecovering)
	d.release(now)
	d.schedule(now)
}

// tick is the dependency's timer: it expires waiters, sends the probe,
// releases the paced waiters, and sets itself again.
func (d *dependency) tick() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.timer = nil
	now := d.clock.Now()
	d.expire(now)
	switch d.state.Load() {
	case depDown:
		d.releaseProbe(now)
	case depRecovering:
		d.release(now)
	}
	d.schedule(now)
}

// expire ends the waits that reached their deadline or MaxWait.
func (d *dependency) expire(now time.Time) {
	for s := d.queue.first(); s != nil && !slotEnd(s.key.end).After(now); s = d.queue.first() {
		d.stats.Expired += uint64(d.queue.expire(s))
	}
}

// releaseProbe sends a waiter with the earliest deadline among those that
// have not probed yet, when a probe is due.
func (d *dependency) releaseProbe(now time.Time) {
	if d.probing || now.Before(d.nextProbe) || d.queue.unprobed == 0 {
		return
	}
	d.queue.release(d.queue.firstUnprobed(), true)
	d.probing = true
	d.stats.Probes++
}

// release lets go of as many waiters, earliest deadline first, as the pace
// allows; once none waits, the dependency is up.
func (d *dependency) release(now time.Time) {
	d.refill(now)
	for d.credit >= 1 && d.queue.Len() > 0 {
		d.queue.release(d.queue.first(), false)
		d.credit--
		d.stats.Released++
	}
	if d.queue.Len() == 0 {
		d.state.Store(depUp)
	}
}

// pace is the release rate at now: from the arrival rate up to rampTop
// times it over rampTime.
func (d *dependency) pace(now time.Time) float64 {
	ramp := min(float64(now.Sub(d.recStart))/float64(rampTime), 1)
	return d.rate * (1 + (rampTop-1)*ramp)
}

// refill adds the releases due since the last refill, never more than a
// few at once, so a late tick does not become a burst.
func (d *dependency) refill(now time.Time) {
	if d.state.Load() != depRecovering {
		return
	}
	rate := d.pace(now)
	d.credit = min(d.credit+rate*now.Sub(d.creditAt).Seconds(), max(1, rate/50))
	d.creditAt = now
}

// schedule sets the timer for the next thing due: a probe, a paced
// release (jittered), or the earliest wait to expire.
func (d *dependency) schedule(now time.Time) {
	if d.queue.Len() == 0 {
		return
	}
	next := slotEnd(d.queue.first().key.end)
	switch d.state.Load() {
	case depDown:
		if !d.probing && d.queue.unprobed > 0 && d.nextProbe.Before(next) {
			next = d.nextProbe
		}
	case depRecovering:
		gap := time.Duration((1 - min(d.credit, 1)) / d.pace(now) * (0.5 + rand.Float64()) * float64(time.Second))
		if at := now.Add(max(gap, time.Millisecond)); at.Before(next) {
			next = at
		}
	}
	if d.timer != nil {
		if !next.Before(d.timerAt) {
			return
		}
		d.timer.Stop()
	}
	d.timer, d.timerAt = afterFunc(d.clock, max(next.Sub(now), 0), d.tick), next
}

// Stats returns what the dependency has seen so far.
func (d *dependency) Stats() DependencyStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.stats
	st.State = [...]string{"up", "down", "recovering"}[d.state.Load()]
	st.Waiting = d.queue.Len()
	return st
}

// DependencyStats is what a Transport knows of one host (or a Budget of
// its dependency), for monitoring (see RideThrough). The counters only grow.
type DependencyStats struct {
	// Name is the host (for a Transport); empty for a Budget.
	Name string
	// State is "up", "down" or "recovering".
	State string
	// Waiting is the number of requests waiting now.
	Waiting int
	// Outages counts the times the dependency was taken as down.
	Outages uint64
	// Waited counts the requests that waited; Released, those released
	// after a recovery; Probes, the probes sent.
	Waited, Released, Probes uint64
	// Expired counts waits ended by a deadline or MaxWait; Abandoned,
	// waits whose context ended otherwise; Rejected, requests that found
	// MaxWaiters waiting and failed at once.
	Expired, Abandoned, Rejected uint64
}
