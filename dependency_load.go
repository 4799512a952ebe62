package retry

import (
	"math"
	"sync/atomic"
	"time"
)

// Overload of a dependency that answers, only slowly (see RideThrough).
const (
	// slowFactor and slowSlack: an answer is slow when it took longer
	// than slowFactor times the dependency's healthy latency plus
	// slowSlack. The slack keeps a host that answers in microseconds from
	// being taken as overloaded by a scheduler's hiccup.
	slowFactor = 3
	slowSlack  = 10 * time.Millisecond
	// slowAfter is how many answers in a row must come slow for a
	// dependency that is up to be taken as overloaded.
	slowAfter = 4
	// healthyTrust is how many answers the healthy latency must have
	// seen before a slow answer counts; healthyWeight is the weight of
	// the answers before each new one in it, once it has seen as many.
	healthyTrust  = 20
	healthyWeight = 32
	// answerWeight is, likewise, the weight of the answers before each
	// new one in the latency that says which waiters may still go
	// (answerTime) while the window holds requests back.
	answerWeight = 8
)

// healthGauge is what a dependency's answers while it is up say of its
// latency. Every answer writes it, so it keeps off the cache line of the
// dependency's read-mostly fields, as answerMeter does.
type healthGauge struct {
	_ [64]byte
	// healthy is the latency the dependency shows while up (see
	// healthyLatency), in nanoseconds; healthyN counts its samples, up to
	// healthyTrust; slowRun counts the answers in a row that came slow
	// while it was up.
	healthy  atomic.Int64
	healthyN atomic.Int32
	slowRun  atomic.Int32
	_        [64]byte
}

// slowAt is the latency past which an answer of a dependency whose healthy
// latency is healthy came slow.
func slowAt(healthy time.Duration) time.Duration {
	return slowFactor*healthy + slowSlack
}

// healthyLatency is what the dependency took to answer while it was up:
// the mean of its answers in time (not slow), recent ones weighing most.
func (d *dependency) healthyLatency() time.Duration {
	return time.Duration(d.health.healthy.Load())
}

// answeredUp learns from the latency of an answer while the dependency is
// up: an answer in time feeds the healthy latency, and slowAfter answers in
// a row that came slow take the dependency as overloaded. It takes no
// lock; a sample lost to a concurrent one is no harm to a mean.
func (d *dependency) answeredUp(lat time.Duration) {
	h, n := d.healthyLatency(), d.health.healthyN.Load()
	if n == 0 || lat <= slowAt(h) {
		if d.health.slowRun.Load() != 0 {
			d.health.slowRun.Store(0)
		}
		d.health.healthy.Store(int64(h + (lat-h)/time.Duration(min(n+1, healthyWeight))))
		if n < healthyTrust {
			d.health.healthyN.Add(1)
		}
		return
	}
	if n >= healthyTrust && d.health.slowRun.Add(1) >= slowAfter {
		d.overloaded(lat)
	}
}

// overloaded takes a dependency that is up, whose answers come slow, as
// overloaded: from now on its requests go through a window, as after an
// outage, that holds the others back (earliest deadline first, and none
// with less time left than the dependency takes to answer). The window
// starts at initialWindow and doubles with every round answered in time up
// to twice the attempts the dependency had out while healthy (its rate
// times its healthy latency), then grows by one a round.
func (d *dependency) overloaded(lat time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.state.Load() != depUp {
		return
	}
	now := d.clock.Now()
	d.health.slowRun.Store(0)
	d.stats.Overloads++
	rate := d.answers.rate(now)
	d.setWindow(now, initialWindow, 1, max(initialWindow, math.Ceil(2*rate*d.healthyLatency().Seconds())))
	d.slowed.Store(true)
	d.answeredAt.Store(now.UnixNano())
	d.answerTime = lat
	d.drainRate = max(drainShare*rate, minDrainRate)
	d.credit, d.creditAt = 1, now
	d.state.Store(depRecovering)
}

// answered learns from the latency of an answer while the window holds
// requests back, and reports whether it came in time: within what is slow
// for the dependency's healthy latency, or twice the fastest answer since
// the window was set up (a host whose every answer takes longer now, loaded
// or not, is asked as much as answers in time show it can take).
func (d *dependency) answered(lat time.Duration) bool {
	d.answeredAt.Store(d.clock.Now().UnixNano())
	if d.fastest == 0 || lat < d.fastest {
		d.fastest = lat
	}
	d.answerTime += (lat - d.answerTime) / answerWeight
	return lat <= max(slowAt(d.healthyLatency()), 2*d.fastest)
}

// settled is called when nobody waits any more, as the dependency is up
// again: if even its fastest answer since the window was set up came slow
// for its healthy latency, its latency has changed for good, and that
// answer is its healthy latency from now on.
func (d *dependency) settled() {
	d.health.slowRun.Store(0)
	d.slowed.Store(false)
	if h := d.healthyLatency(); d.fastest > slowAt(h) {
		d.health.healthy.Store(int64(d.fastest))
	}
}

// answering reports whether the window holds requests back because the
// dependency was overloaded, and it answered within lostAfter: its
// failures (attempts cut by their timeout, mostly) say it is slow, not
// down.
func (d *dependency) answering() bool {
	return d.slowed.Load() && d.clock.Now().UnixNano()-d.answeredAt.Load() < int64(lostAfter)
}
