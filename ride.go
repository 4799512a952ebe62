package retry

import (
	"time"
)

// RideThrough is how requests ride through an outage of their dependency
// (a host, for a Transport; the Budget, for Do) instead of failing or
// hammering it. It is on by default.
//
// The dependency is taken to be down when its attempts fail several times
// in a row (5xx, 429, transport failures; never a 4xx), or when the retry
// budget denies a retry. While it is down, requests to it are not sent: they
// wait (on their own goroutine, within their own deadline and context),
// except for a probe now and then: the first after 100 ms, then at doubling
// intervals up to one a second, each request probing at most once. When an
// attempt succeeds again, the waiting requests are released earliest
// deadline first, paced: from the rate at which they arrived, ramping to
// 1.8 times that over half a second, with jitter, so the recovering
// dependency is not knocked down again. A request whose deadline comes
// while it waits ends then, with ErrDependencyDown (and the last error or
// status it saw); cancelling its context releases it at once.
//
// A keyed 409 (an earlier copy of the request still running) is waited out
// the same way the server asks (Retry-After), without spending the retry
// budget or the attempt limit: the outcome is coming.
//
// Attempts sent before the outage is seen count as usual: a request that
// spends all its attempts in the moment it takes to see it (eight failures
// in a row, or a denied retry) fails with ErrAttemptsExhausted. With the
// default full-jitter backoff that is rare (its first three waits must add
// up to less than that moment); a backoff with a floor, such as
// EqualJitter, rules it out.
//
// Independent failures (a brownout) do not mark a dependency down, and a
// retry that succeeds earns its budget token back, so they are retried as
// long as retries keep succeeding.
type RideThrough struct {
	// Off turns riding through outages off: a request whose retry the
	// budget denies fails at once with ErrBudgetDenied (handing back the
	// last response), and requests are sent whatever their dependency's
	// state. Turn it off for callers that must fail fast and do something
	// else (serve a cached value, try another region) rather than wait.
	Off bool
	// MaxWait bounds the wait of a request that has no deadline (default
	// DefaultMaxWait).
	MaxWait time.Duration
	// MaxWaiters is the most requests waiting for one dependency at once
	// (default DefaultMaxWaiters).
	MaxWaiters int
}

// rideConfig is the resolved RideThrough.
type rideConfig struct {
	off        bool
	maxWait    time.Duration
	maxWaiters int
}

func defaultRideConfig() rideConfig {
	return rideConfig{maxWait: DefaultMaxWait, maxWaiters: DefaultMaxWaiters}
}

// WithRideThrough sets how requests ride through an outage (see
// RideThrough); zero fields take the defaults. It is on by default;
// WithRideThrough(RideThrough{Off: true}) turns it off.
func WithRideThrough(r RideThrough) Option {
	if r.MaxWait <= 0 {
		r.MaxWait = DefaultMaxWait
	}
	if r.MaxWaiters <= 0 {
		r.MaxWaiters = DefaultMaxWaiters
	}
	return optionFunc(func(c *config) {
		c.ride = rideConfig{off: r.Off, maxWait: r.MaxWait, maxWaiters: r.MaxWaiters}
	})
}
