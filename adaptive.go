package retry

import (
	"time"
)

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
	// Ceiling is the longest timeout (default 30 s).
	Ceiling time.Duration
	// Initial is the timeout before MinSamples are known (default 10 s).
	Initial time.Duration
	// MinSamples needed before the estimate is trusted (default 50).
	MinSamples int
}

// Hedging sends a second attempt of an idempotent or keyed request when the
// first has not answered within Quantile of the host's recent latencies (at
// least MinDelay), without cancelling the first: the first good response
// wins, the other attempt is cancelled and drained before the request (or
// the call) returns, so nothing of it runs after. Each hedge is charged to
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
	a.Multiplier = min(a.Multiplier, 1e6) // +Inf too: the ceiling bounds the timeout anyway
	if a.Floor <= 0 {
		a.Floor = 50 * time.Millisecond
	}
	if a.Ceiling <= 0 {
		a.Ceiling = defaultAttemptTimeout
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
	return optionFunc(func(c *config) {
		c.adaptive.timeout = true
		c.adaptive.quantile, c.adaptive.multiplier = a.Quantile, a.Multiplier
		c.adaptive.floor, c.adaptive.ceiling, c.adaptive.initial = a.Floor, a.Ceiling, a.Initial
		c.adaptive.minSamples = uint64(a.MinSamples)
	})
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
	return optionFunc(func(c *config) {
		c.adaptive.hedge = true
		c.adaptive.hedgeQuantile, c.adaptive.hedgeMinDelay = h.Quantile, h.MinDelay
	})
}

// measures reports whether the Transport keeps latency estimates.
func (a *adaptiveConfig) measures() bool { return a.timeout || a.hedge }

// attemptTimeoutFor returns the learned timeout for a host's estimate.
func (a *adaptiveConfig) attemptTimeoutFor(e *latencyEstimate) time.Duration {
	if e == nil || e.Samples() < a.minSamples {
		return a.initial
	}
	// Clamped in float64: a huge multiplier must give the ceiling, not
	// an overflowed duration.
	d := float64(e.High()) * a.multiplier
	return time.Duration(min(max(d, float64(a.floor)), float64(a.ceiling)))
}

// hedgeDelayFor returns how long to wait before hedging.
func (a *adaptiveConfig) hedgeDelayFor(e *latencyEstimate) time.Duration {
	if e == nil {
		return a.hedgeMinDelay
	}
	return max(e.HedgeDelay(), a.hedgeMinDelay)
}
