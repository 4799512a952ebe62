package retry

import (
	"math"
	"math/rand/v2"
	"time"
)

// Release after a recovery (see RideThrough).
const (
	// initialWindow is how many attempts may be out at once through a
	// dependency that has just answered again. Each one that succeeds lets
	// one more go, so the window doubles with every round of attempts that
	// succeeds (TCP's slow start); a failure halves it.
	initialWindow = 4
	// drainShare is the most the backlog of waiters is released at, as a
	// share of the rate at which requests asked for the dependency: new
	// arrivals and the backlog together stay under twice that rate, so a
	// fast host that answers again is not hit by the whole backlog at once.
	drainShare = 0.7
	// minDrainRate is the least rate, per second, at which waiters are
	// released while the window has room.
	minDrainRate = 20.0
	// lostAfter is how long the window may stay full without any attempt
	// telling its outcome before the attempts out are taken as lost (their
	// code panicked): the release goes on.
	lostAfter = time.Second
)

// learn is what an attempt's outcome tells the gate: when a run of
// failures began (for the rate requests asked at before the outage was
// seen, and the rate they were answered at just before), an answer (for
// that rate, and for its latency: see healthyLatency) and, while the
// window holds requests back, whether it grows or shrinks. ticket is the
// window that counts the attempt (zero: none).
func (d *dependency) learn(o outcome, sent time.Time, ticket uint64) {
	unhealthy, alive := o.unhealthy(), o.alive()
	lat := time.Duration(-1) // unknown
	switch {
	case unhealthy && d.failures.Load() == 0:
		now := d.clock.Now()
		if sent.IsZero() || sent.After(now) {
			sent = now
		}
		d.streakAt.Store(now.UnixNano())
		d.firstSent.Store(sent.UnixNano())
		d.servedAtFailure.Store(math.Float64bits(d.answers.rate(sent)))
	case alive && !sent.IsZero():
		d.answers.mark(sent)
		lat = max(d.clock.Since(sent), 0)
	}
	state := d.state.Load()
	if state == depUp && lat >= 0 {
		d.answeredUp(lat)
		return
	}
	if state != depRecovering {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.state.Load() != depRecovering {
		return
	}
	now := d.clock.Now()
	growth := 0.0
	switch {
	case alive && lat >= 0:
		growth = -1 // slow: the host queues
		if d.answered(lat) {
			growth = 1
		}
	case alive:
		growth = 1
	case unhealthy:
		growth = -1
	}
	d.acked(now, growth, ticket, sent)
	d.release(now)
	d.schedule(now)
}

// acked counts an attempt let go in the window as back: growth 1 for an
// answer in time (the window grows by one, or by one a round past
// ssthresh), -1 for an answer that came slow or a failure (it halves,
// down to minWindow, once a round: not again for an attempt sent before it
// last shrank), 0 for an outcome that says nothing. Only an attempt the
// current window let go (ticket) frees a place in it.
func (d *dependency) acked(now time.Time, growth float64, ticket uint64, sent time.Time) {
	if ticket != 0 && ticket == d.epoch {
		d.inFlight = max(d.inFlight-1, 0)
	}
	d.lastAck = now
	switch {
	case growth > 0 && d.window < d.ssthresh:
		d.window += growth
	case growth > 0:
		d.window += growth / d.window
	case growth < 0 && (sent.IsZero() || !sent.Before(d.shrunkAt)):
		d.window = max(d.window/2, d.minWindow)
		d.ssthresh, d.shrunkAt = d.window, now
	}
}

// setWindow sets up a new window of size, which never shrinks below least
// and grows by one a round from ssthresh on; attempts out before it count
// in none.
func (d *dependency) setWindow(now time.Time, size, least, ssthresh float64) {
	d.epoch++
	d.window, d.minWindow, d.ssthresh = size, least, ssthresh
	d.inFlight, d.lastAck, d.shrunkAt, d.fastest = 0, now, now, 0
}

// forgetLost takes the attempts out as lost when none has told its outcome
// for lostAfter while the window is full.
func (d *dependency) forgetLost(now time.Time) {
	if d.inFlight >= int(d.window) && now.Sub(d.lastAck) >= lostAfter {
		d.inFlight, d.lastAck = 0, now
	}
}

// startRelease sets the release up when the dependency answers again: the
// first window, and the backlog's drain rate from the rate at which
// requests asked for the dependency: since its failures began, while they
// came, or the rate it answered at just before, whichever is highest.
// Callers in a closed loop ask only while they are not waiting: the rate
// of the failures that took the dependency down (halved: retries are among
// them), or the rate they were served at before, is what they asked.
func (d *dependency) startRelease(now time.Time) {
	d.setWindow(now, initialWindow, 1, math.Inf(1))
	d.slowed.Store(false)
	asked := d.asked(now)
	d.drainRate = max(drainShare*max(asked, d.askedBefore/2, d.servedBefore-asked), minDrainRate)
	d.credit, d.creditAt = 1, now
}

// asked is the rate, per second, at which requests have asked for the
// dependency since the failures that took it down began: those failures,
// and every arrival since (those that waited, failed at once or went as
// the probe). It is what callers offered, however short the outage.
func (d *dependency) asked(now time.Time) float64 {
	return float64(d.arrivals) / max(now.Sub(d.askedFrom), time.Millisecond).Seconds()
}

// release lets go of as many waiters, earliest deadline first, as the
// window and the drain rate allow; once none waits, the dependency is up.
// A waiter with less time left than the dependency took to answer its
// probe is not let go: its attempt would only give the dependency work
// nobody waits for. It waits on until its deadline, unless the backlog
// ahead of it drains first.
func (d *dependency) release(now time.Time) {
	from := d.releasableFrom(now)
	for d.fresh.Len() > 0 && d.inFlight < int(d.window) {
		s := d.fresh.firstEndingFrom(from)
		if s == nil {
			break
		}
		d.fresh.release(s, false)
		d.inFlight++
		d.stats.Released++
	}
	d.refill(now)
	for d.credit >= 1 && d.queue.Len() > 0 && d.inFlight < int(d.window) {
		s := d.queue.firstEndingFrom(from)
		if s == nil {
			break
		}
		d.queue.release(s, false)
		d.credit--
		d.inFlight++
		d.stats.Released++
	}
	if d.waiting() == 0 {
		d.settled()
		d.state.Store(depUp)
	}
}

// releasableFrom is the earliest slot whose waiters may be let go at now:
// those with at least answerTime left (the time the probe that ended an
// outage took, then the latency of the answers since, smoothed).
func (d *dependency) releasableFrom(now time.Time) int64 {
	return slotOf(now.Add(d.answerTime))
}

// releasable reports whether a waiter may be let go at now. Waiters only
// lose time: one that may not go now never may.
func (d *dependency) releasable(now time.Time) bool {
	return d.queue.firstEndingFrom(d.releasableFrom(now)) != nil
}

// refill adds the releases due since the last refill, never more than a
// few at once, so a late tick does not become a burst.
func (d *dependency) refill(now time.Time) {
	if d.state.Load() != depRecovering {
		return
	}
	d.credit = min(d.credit+d.drainRate*now.Sub(d.creditAt).Seconds(), max(1, d.drainRate/50))
	d.creditAt = now
}

// schedule sets the timer for the next thing due: a probe, a paced
// release (jittered) while the window has room, the check for lost
// attempts while it is full, or the earliest wait to expire.
func (d *dependency) schedule(now time.Time) {
	if d.waiting() == 0 {
		return
	}
	var next time.Time
	for _, q := range [...]*waitQueue{&d.queue, &d.fresh} {
		if s := q.first(); s != nil && (next.IsZero() || slotEnd(s.key.end).Before(next)) {
			next = slotEnd(s.key.end)
		}
	}
	switch d.state.Load() {
	case depDown:
		if _, at, ok := d.probeDue(); ok && at.Before(next) {
			next = at
		}
	case depRecovering:
		at := d.lastAck.Add(lostAfter)
		if d.inFlight < int(d.window) && d.releasable(now) {
			gap := time.Duration((1 - min(d.credit, 1)) / d.drainRate * (0.5 + rand.Float64()) * float64(time.Second))
			at = now.Add(max(gap, time.Millisecond))
		}
		if at.Before(next) {
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
