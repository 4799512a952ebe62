package retry

import (
	"context"
	"net/http"
	"time"
)

// DefaultAttemptTimeout bounds the wait for a response when neither a
// deadline nor WithAttemptTimeout (nor WithAdaptiveTimeout) says otherwise:
// no attempt of a Transport is ever unbounded. It covers the wait for the
// response's headers, not the reading of its body. For a Transport made with
// a nil base it is the cloned transport's ResponseHeaderTimeout, at no cost
// per request; for another base it is a timer per attempt, unless the base
// bounds its attempts itself (see AttemptBounder).
const DefaultAttemptTimeout = 30 * time.Second

// AdaptiveTimeout sets each attempt's timeout from the latency the
// Transport measured for the same host: Multiplier x the Quantile of recent
// attempt latencies (time to the response's headers), clamped to
// [Floor, Ceiling], and never beyond the time left before the deadline.
// Until MinSamples latencies are known, Initial applies. Zero fields take the
// defaults shown on each.
type AdaptiveTimeout struct {
	// Quantile of recent latencies (default 0.999).
	Quantile float64
	// Multiplier applied to it (default 3): room for the tail's own tail.
	Multiplier float64
	// Floor is the shortest timeout (default 50 ms).
	Floor time.Duration
	// Ceiling is the longest timeout (default DefaultAttemptTimeout).
	Ceiling time.Duration
	// Initial is the timeout before MinSamples are known (default 10 s).
	Initial time.Duration
	// MinSamples needed before the estimate is trusted (default 50).
	MinSamples int
}

// Hedging sends a second attempt of an idempotent or keyed request when the
// first has not answered within Quantile of the host's recent latencies (at
// least MinDelay), without cancelling the first: the first good response
// wins, the other attempt is cancelled and drained. Each hedge is charged to
// the retry budget, so during an outage hedges stop as retries do. Requests
// whose body cannot be replayed at once (no GetBody) are not hedged.
type Hedging struct {
	// Quantile of recent latencies after which to hedge (default 0.95).
	Quantile float64
	// MinDelay is the shortest wait before hedging (default 10 ms); it is
	// also the wait while no latency is known.
	MinDelay time.Duration
}

// adaptiveConfig is the resolved form of AdaptiveTimeout and Hedging.
type adaptiveConfig struct {
	timeout    bool
	quantile   float64
	multiplier float64
	floor      time.Duration
	ceiling    time.Duration
	initial    time.Duration
	minSamples uint64

	hedge         bool
	hedgeQuantile float64
	hedgeMinDelay time.Duration
}

// WithAdaptiveTimeout turns on attempt timeouts learned from measured
// latency (see AdaptiveTimeout). It is off by default: a learned timeout is
// only as good as the traffic it learned from, and a service whose normal
// latency is bimodal (cache hit or miss) needs a Quantile chosen for it.
func WithAdaptiveTimeout(a AdaptiveTimeout) Option {
	if !(a.Quantile > 0 && a.Quantile < 1) {
		a.Quantile = 0.999
	}
	if !(a.Multiplier >= 1) {
		a.Multiplier = 3
	}
	if a.Floor <= 0 {
		a.Floor = 50 * time.Millisecond
	}
	if a.Ceiling <= 0 {
		a.Ceiling = DefaultAttemptTimeout
	}
	if a.Ceiling < a.Floor {
		a.Ceiling = a.Floor
	}
	if a.Initial <= 0 {
		a.Initial = 10 * time.Second
	}
	a.Initial = min(max(a.Initial, a.Floor), a.Ceiling)
	if a.MinSamples <= 0 {
		a.MinSamples = 50
	}
	return func(c *config) {
		c.adaptive.timeout = true
		c.adaptive.quantile, c.adaptive.multiplier = a.Quantile, a.Multiplier
		c.adaptive.floor, c.adaptive.ceiling, c.adaptive.initial = a.Floor, a.Ceiling, a.Initial
		c.adaptive.minSamples = uint64(a.MinSamples)
	}
}

// WithHedging turns on hedged requests (see Hedging). Off by default: a
// hedge doubles the load of every slow request.
func WithHedging(h Hedging) Option {
	if !(h.Quantile > 0 && h.Quantile < 1) {
		h.Quantile = 0.95
	}
	if h.MinDelay <= 0 {
		h.MinDelay = 10 * time.Millisecond
	}
	return func(c *config) {
		c.adaptive.hedge = true
		c.adaptive.hedgeQuantile, c.adaptive.hedgeMinDelay = h.Quantile, h.MinDelay
	}
}

// measures reports whether the Transport keeps latency estimates.
func (a *adaptiveConfig) measures() bool { return a.timeout || a.hedge }

// attemptTimeoutFor returns the learned timeout for a host's estimate.
func (a *adaptiveConfig) attemptTimeoutFor(e *latencyEstimate) time.Duration {
	if e == nil || e.Samples() < a.minSamples {
		return a.initial
	}
	d := time.Duration(float64(e.High()) * a.multiplier)
	return min(max(d, a.floor), a.ceiling)
}

// hedgeDelayFor returns how long to wait before hedging.
func (a *adaptiveConfig) hedgeDelayFor(e *latencyEstimate) time.Duration {
	if e == nil {
		return a.hedgeMinDelay
	}
	return max(e.HedgeDelay(), a.hedgeMinDelay)
}

// withHeaderTimeout gives a transport the Transport made for itself the
// finite default wait for response headers.
func withHeaderTimeout(t *http.Transport) *http.Transport {
	if t.ResponseHeaderTimeout == 0 {
		t.ResponseHeaderTimeout = DefaultAttemptTimeout
	}
	return t
}

// attemptTimeoutFor is the time one attempt under policy c may wait for its
// response: the learned timeout (from estimate) with WithAdaptiveTimeout,
// else the configured one, else DefaultAttemptTimeout when there is no
// deadline and the base does not bound the wait itself; never beyond the
// deadline (zero: none). 0 means no timer.
func (t *Transport) attemptTimeoutFor(c *config, estimate *latencyEstimate, deadline time.Time) time.Duration {
	var d time.Duration
	switch {
	case c.adaptive.timeout:
		d = c.adaptive.attemptTimeoutFor(estimate)
	case c.attemptTimeout > 0:
		d = c.attemptTimeout
	case deadline.IsZero() && !t.bounded:
		d = DefaultAttemptTimeout
	default:
		return 0
	}
	if deadline.IsZero() {
		return d
	}
	return attemptTimeout(d, deadline, c.clock.Now())
}

// sendMeasured makes one request of the base transport and, when an
// estimate is kept for its host, adds the time to its response to it.
func (t *Transport) sendMeasured(c *config, estimate *latencyEstimate, req *http.Request) (*http.Response, error) {
	if estimate == nil {
		return t.base.RoundTrip(req)
	}
	start := c.clock.Now()
	resp, err := t.base.RoundTrip(req)
	if err == nil {
		estimate.Observe(c.clock.Since(start))
	}
	return resp, err
}

// endedByTimer reports whether an attempt whose context is attempt, below
// the loop's context loop, was ended by its own timer: its context is done
// and nothing above it is (its other canceller, the Transport, has not
// acted yet when this is asked).
func endedByTimer(attempt, loop context.Context) bool {
	return attempt.Err() != nil && loop.Err() == nil
}

// AttemptBounder is implemented by a base RoundTripper that bounds every
// request itself (an in-memory transport, or one with its own timeouts):
// when BoundsAttempts returns true, the Transport adds no timer of its own
// for DefaultAttemptTimeout. An *http.Transport counts as bounded when its
// ResponseHeaderTimeout is set.
type AttemptBounder interface {
	BoundsAttempts() bool
}

// boundedBase reports whether base bounds the wait for headers on its own.
func boundedBase(base http.RoundTripper) bool {
	switch b := base.(type) {
	case *http.Transport:
		return b.ResponseHeaderTimeout > 0
	case AttemptBounder:
		return b.BoundsAttempts()
	}
	return false
}
