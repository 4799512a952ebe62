package retry

import (
	"math/rand/v2"
	"time"
)

// Pacing of the releases after a recovery (see RideThrough).
const (
	// The release rate is the rate at which requests have asked for the
	// dependency since it went down, measured anew at every release, times
	// a ramp from 1 to rampTop over rampTime, and never below
	// minReleaseRate per second.
	rampTime       = 500 * time.Millisecond
	rampTop        = 1.8
	minReleaseRate = 20.0
)

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

// offered is the rate, per second, at which requests have asked for the
// dependency since it went down: every arrival counts, those that waited,
// failed at once or went as the probe, and those let go while it recovers.
// Measured over the whole time since, it converges on the offered rate
// however soon after the outage began the dependency answered again.
func (d *dependency) offered(now time.Time) float64 {
	return float64(d.arrivals) / max(now.Sub(d.downSince), probeFirst).Seconds()
}

// pace is the release rate at now: the offered rate, ramping up to rampTop
// times it over rampTime, so waiters who queued during the outage drain
// while new arrivals keep coming.
func (d *dependency) pace(now time.Time) float64 {
	ramp := min(float64(now.Sub(d.recStart))/float64(rampTime), 1)
	return max(d.offered(now), minReleaseRate) * (1 + (rampTop-1)*ramp)
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
