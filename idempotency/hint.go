package idempotency

import (
	"sync"
	"time"
)

// minRetryAfter is the shortest Retry-After hint: HTTP's Retry-After counts
// whole seconds.
const minRetryAfter = time.Second

// executionTimes estimates how long a Runner's executions take, from the
// ones that ended, as TCP estimates a round-trip time (RFC 6298): a smoothed
// mean and mean deviation, each sample weighing 1/8 and 1/4. Safe for
// concurrent use; the zero value has seen no execution.
type executionTimes struct {
	mu        sync.Mutex
	mean, dev time.Duration
	seen      bool
}

// observe adds the duration of an execution that ended.
func (e *executionTimes) observe(d time.Duration) {
	d = max(d, 0)
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.seen {
		e.mean, e.dev, e.seen = d, d/2, true
		return
	}
	diff := e.mean - d
	if diff < 0 {
		diff = -diff
	}
	e.dev += (diff - e.dev) / 4
	e.mean += (d - e.mean) / 8
}

// typical returns how long an execution usually takes: the mean plus twice
// the mean deviation (long enough for most), 0 before any execution ended.
func (e *executionTimes) typical() time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.mean + 2*e.dev
}

// retryAfter is the hint for a repeat that found the key held until
// lockedUntil: about how long this Runner's executions take (at least
// minRetryAfter), and never more than the time left on the holder's lease,
// after which the repeat may take over.
func (r *Runner) retryAfter(lockedUntil time.Time) time.Duration {
	left := lockedUntil.Sub(r.clock.Now())
	return max(min(r.times.typical(), left), minRetryAfter)
}
