package retry

import (
	"time"
)

// RideThrough is how requests ride through an outage of their dependency
// (a host, for a Transport; the Budget, for Do) instead of failing or
// hammering it: on by default, with a MaxWait of 10 s and a MaxWaiters of
// 10,000; WithRideThrough sets them, WithoutRideThrough turns it off.
//
// The dependency is taken to be down when eight of its attempts in a row
// have failed (5xx, 429, transport failures; never a 4xx, and any answer
// that is not a failure ends the streak: a dependency that answers is
// alive, whatever it answers) and either they came one after another
// (each sent after the one before it had failed) or the first of them was
// sent at least 50 ms before the last failed; or when the retry budget
// denies a retry after its last two attempts failed (a budget that another
// host's outage drained denies a healthy host's retry as usual,
// ErrBudgetDenied, and so it does for a host taken as overloaded that still
// answers: see below). Attempts of many requests that were out together and
// fail together, while other requests are answered a moment later, say
// something of those requests, not of the dependency; and a brief cut is
// ridden through by the retries' backoff. While it is down, requests to it
// are not sent: they wait (on their own goroutine, within their own
// deadline and context), except for a probe now and then: the first after
// 100 ms, then at doubling intervals up to one a second, and besides once
// for every ten requests that join the wait, so that a dependency many ask
// for is seen to be back within ten arrivals (probes are then a tenth of
// the requests that wait). In the first 100 ms of an outage of a
// dependency that was answering just before, probes go at a tenth of the
// rate it answered at, each from a waiting request that has not probed:
// callers in a closed loop, who ask nothing once they all wait, find a
// burst of failures that ends after some more attempts (a server shedding
// a burst) over within milliseconds, not probe intervals. The probe is the
// waiting request with the most time left that has not probed, so that a
// slow dependency has the time to answer it; a request probes again only
// when every waiting request has, and with its last attempt only when no
// other can (so a few requests that all probed in vain still see the
// dependency come back). A probe is an attempt like any other:
// WithMaxAttempts caps it too. An attempt cut off by its own request's
// deadline or cancellation says nothing of the dependency: it never counts
// as a failure, and a probe so cut goes to another request without
// lengthening the probe interval.
//
// When an attempt is answered again (a success, a rejection, a keyed 409;
// for a protocol.Caller, a Verdict that is Answered or Pending and not Failing),
// requests are let go by what the dependency shows it can take, as TCP's
// slow start: at first four attempts may be out at once, each answer in
// time lets one more go (the window doubles with every round answered in
// time), and an answer that comes slow or a failure halves it, once a
// round (an attempt sent before it last halved does not halve it again).
// An answer comes slow when it took longer than three times the latency
// the dependency showed while healthy plus 10 ms, and than twice its
// fastest answer since the window was set up: latency rising above what a
// host showed is the first sign of its queue filling, before any timeout,
// and a host whose every answer now takes longer, however loaded, is asked
// as much as its answers in time show it can take. The latency that marks
// a waiter as too late to go (below) is that of the answers since,
// smoothed. A request that did not wait goes as soon as the window
// has room, never behind the backlog, and so do the requests that joined
// the wait after the last failed probe with time enough for an answer
// (they may have come after the dependency was back). A request waiting
// out its backoff between two attempts is woken by the recovery (not from
// a wait the server asked for, such as a Retry-After, which lasts) and
// goes in the backlog's turn: it is backlog too. The backlog drains
// earliest deadline first within the window, with jitter, at most at 0.7
// times the rate at which requests asked for the dependency (since its
// failures began, half the rate at which those failures came, or the rate
// it answered at just before them less the rate still asked, whichever is
// highest: callers in a closed loop no longer ask once they wait), so new
// arrivals and the backlog together stay under twice the offered rate. A
// waiter with less time left than the dependency took to answer the probe
// is not let go (its attempt would only give the dependency work nobody
// waits for): it waits on, until its deadline or until its turn comes with
// time enough. Callers in a closed loop, who ask only as fast as they are
// released, are back at full speed within a few round trips. Once nobody
// waits, the dependency is up.
//
// A dependency that answers, only slowly, is overloaded, not down: when
// four answers in a row come slow while it is up (past three times its
// healthy latency, the mean of its answers in time, plus 10 ms), its
// requests go through the window as after an outage, earliest deadline
// first (for requests with the same timeout, in the order they came, as
// a server's own queue would serve them) and none with less time left than
// the dependency now takes to answer, while the others wait on their own
// goroutines. The window starts at four, doubles with every round answered
// in time up to twice the attempts the dependency had out while healthy
// (the rate it answered at times its healthy latency), then grows by one
// a round; slow answers and failures halve it. A server that queues
// without bound is so held to what it serves in time, and its queue stays
// short: the backlog waits in the client, at no cost to the server, and
// is let go as the server takes it, rather than filling its queue until
// attempts time out. While the window holds requests back for an
// overload, and the dependency answered within the last second, a retry
// the budget denies fails (ErrBudgetDenied) rather than taking the
// dependency as down; eight failures in a row still do. Once nobody
// waits, the dependency is up; if even its fastest answer meanwhile came
// slow for its healthy latency, that answer's latency is its healthy
// latency from then on. DependencyStats.Overloads counts these episodes.
//
// Waiting is for outages that end soon. A request waits at most until its
// deadline, or MaxWait without one; and once the dependency has been down
// for longer than the request's MaxWait, it does not wait at all: it fails
// at once (unless it goes as the probe that is due), so a long outage costs
// each request milliseconds, not MaxWait. A request whose wait ends in
// vain ends with ErrDependencyDown: if it got a response before it waited,
// that response is handed back with a nil error, its body read into memory
// while the request waited (up to 64 KiB, for at most a second and never
// past the deadline; a body longer or later cannot be kept without holding
// its connection, and the request then ends in an *Error whose Last is a
// *StatusError with the status and header); otherwise it ends in an
// *Error that also matches its context's error when its deadline or its
// cancellation ended the wait. A waiting request therefore holds its last
// response's body, up to 64 KiB.
//
// MaxWait and MaxWaiters are each request's own: NewContext can give one
// request other bounds, and no request changes another's. A Transport keeps
// what it knows of every host it sends to; once it knows many, it forgets
// the idle ones (up, nobody waiting, not asked for lately), so a
// long-lived client that meets ever new hosts keeps riding through outages
// of every one of them in bounded memory. A panic in an attempt's code (a
// hook, an operation) that was the probe frees the probe.
//
// A keyed 409 with Retry-After (an earlier copy of the request still
// running) is waited out the way the server asks (Retry-After, a floor
// under a backoff that grows with each wait), without spending the retry
// budget or the attempt limit: the outcome is coming. The waiting ends at
// the deadline, or after MaxWait for a request without one.
//
// Attempts sent before the outage is seen count as usual: a request that
// spends all its attempts in the moment it takes to see it (eight failures
// in a row, or a denied retry) fails with ErrAttemptsExhausted. With the
// default full-jitter backoff that is rare (its first three waits must add
// up to less than that moment); a backoff with a floor, such as
// backoff.EqualJitter, rules it out. A retry the budget paid for that never went
// (its wait ended first) gets its token back.
//
// Independent failures (a brownout) do not mark a dependency down, and a
// retry that succeeds earns its budget token back, so they are retried as
// long as retries keep succeeding.
type RideThrough struct {
	// MaxWait bounds the wait of a request that has no deadline, and is
	// how long a dependency may have been down for a request still to wait
	// for it (default 10 s).
	MaxWait time.Duration
	// MaxWaiters: a request finding this many requests waiting for its
	// dependency already fails at once (default 10,000).
	MaxWaiters int
}

// rideConfig is the resolved RideThrough.
type rideConfig struct {
	off        bool
	maxWait    time.Duration
	maxWaiters int
}

func defaultRideConfig() rideConfig {
	return rideConfig{maxWait: defaultMaxWait, maxWaiters: defaultMaxWaiters}
}

// WithRideThrough sets how requests ride through an outage (see
// RideThrough), and turns it back on after WithoutRideThrough; zero fields
// take the defaults. It is on by default: a request waits for a dependency
// that is down up to its deadline, or 10 s (MaxWait) without one, and not
// at all once the dependency has been down for longer than that; at most
// 10,000 requests (MaxWaiters) wait for one dependency.
func WithRideThrough(r RideThrough) Option {
	if r.MaxWait <= 0 {
		r.MaxWait = defaultMaxWait
	}
	if r.MaxWaiters <= 0 {
		r.MaxWaiters = defaultMaxWaiters
	}
	return optionFunc(func(c *config) {
		c.ride = rideConfig{maxWait: r.MaxWait, maxWaiters: r.MaxWaiters}
	})
}

// WithoutRideThrough turns riding through outages off (it is on by
// default, see RideThrough): a request whose retry the budget denies fails
// at once with ErrBudgetDenied (handing back the last response), and
// requests are sent whatever their dependency's state. Give it to callers
// that must fail fast and do something else (serve a cached value, try
// another region) rather than wait: in a total outage a request then fails
// at once instead of at its deadline. WithRideThrough turns it back on.
func WithoutRideThrough() Option {
	return optionFunc(func(c *config) { c.ride.off = true })
}
