package retry

import (
	"net/http"
)

// Transport is an http.RoundTripper that retries what is safe to retry, at
// one layer, within a budget and a deadline:
//
//   - GET, HEAD, OPTIONS, TRACE, PUT and DELETE, and any request that carries
//     an idempotency key, are retried on transient errors (timeouts, resets,
//     refused connections) and on 502, 503, 504 and 429 (and 500 with
//     WithRetryOn500; a keyed 409 too, which means "still in progress").
//   - POST and PATCH get an Idempotency-Key (one per logical request, the
//     same on every attempt; a key the caller set is kept). Other requests
//     without a key are retried only when they provably never reached the
//     server (a failed dial, a refused connection). A generated key lives
//     as long as one RoundTrip: code that repeats a request after the
//     Transport gave up must set the key itself so the repeats share it
//     (WithReport's Report.IdempotencyKey tells the one the Transport
//     made), unless it repeats through Do, whose loop gives the Transport
//     its keys.
//   - Retry-After (seconds or any HTTP-date) on 429, 503 and a keyed 409 is a
//     floor for the next wait; one over WithMaxRetryAfter, or ending past the
//     deadline, hands the response back at once.
//   - A Retry-Pushback header on a response means the server's own retries
//     gave up: it is not retried (see PushbackHeader).
//   - Every retry is charged to a retry budget (by default one DefaultBudget
//     per Transport), so an outage is not amplified.
//   - Inside another retry loop (found through the request's context), a
//     Transport makes a single attempt.
//
// The caller's request is never modified. Bodies are replayed with GetBody,
// or buffered while first sent up to WithBodyBufferLimit. Retried responses
// are drained (up to WithDrainLimit) and closed so their connections are
// reused. When retrying stops on a response, that response is returned with
// its body intact and a nil error; WithReport tells why retrying stopped.
// A transport failure ends in an *Error carrying the last error.
//
// A Transport is safe for concurrent use and immutable once built.
type Transport struct {
	base http.RoundTripper
	cfg  config
	// replaysHidden: the base is net/http's Transport, which replays some
	// failed requests by itself; those attempts are traced and counted.
	replaysHidden bool
	// bounded: the base itself bounds the wait for response headers, so
	// the default attempt timeout needs no timer of ours.
	bounded bool
	// latency keeps per-host estimates when adaptive timeouts or hedging are on.
	latency *latencyByHost
	// fast: the policy lets a request's first attempt go straight to the base.
	fast bool
	// mayTimeAttempts: some attempt may need a timer of the Transport's
	// (see attemptTimeoutFor); when false the fast path asks nothing about it.
	mayTimeAttempts bool
}

var _ http.RoundTripper = (*Transport)(nil)

// NewTransport wraps base (nil: a clone of http.DefaultTransport) with the
// retry policy given by opts. Unless WithBudget is given, the Transport has a
// budget of its own, DefaultBudget(); unless WithClassifier is given,
// transport errors are classified with TransientOnly.
func NewTransport(base http.RoundTripper, opts ...Option) *Transport {
	if base == nil {
		base = withHeaderTimeout(http.DefaultTransport.(*http.Transport).Clone())
	}
	c := newConfig(opts)
	if !c.budgetSet {
		c.budget = DefaultBudget()
	}
	if !c.classifierSet {
		c.classifier = TransientOnly
	}
	_, replays := base.(*http.Transport)
	t := &Transport{base: base, cfg: c, replaysHidden: replays, bounded: boundedBase(base)}
	if c.adaptive.measures() {
		t.latency = newLatencyByHost(c.adaptive.quantile, c.adaptive.hedgeQuantile)
	}
	t.fast = t.fastEligible()
	t.mayTimeAttempts = c.adaptive.timeout || c.attemptTimeout > 0 || !t.bounded
	return t
}

// NewClient returns an *http.Client whose Transport is NewTransport(nil, opts...).
func NewClient(opts ...Option) *http.Client {
	return &http.Client{Transport: NewTransport(nil, opts...)}
}

// Budget returns the Transport's retry budget (nil when unlimited), for its statistics.
func (t *Transport) Budget() *Budget {
	b, _ := t.cfg.budget.(*Budget)
	return b
}

// CloseIdleConnections closes the idle connections of the base transport,
// when it has that method.
func (t *Transport) CloseIdleConnections() {
	type closeIdler interface{ CloseIdleConnections() }
	if ci, ok := t.base.(closeIdler); ok {
		ci.CloseIdleConnections()
	}
}

// RoundTrip sends req, retrying as the policy allows. See Transport.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	var (
		first *firstTry
		fc    *firstCopy
	)
	if t.fast {
		if kind := t.fastRequest(req); kind != notFast {
			var resp *http.Response
			if resp, fc, first = t.tryFast(req, kind); first == nil {
				return resp, nil
			}
		}
	}
	rt := newRoundTrip(t, req)
	rt.first, rt.firstCopy = first, fc
	return rt.do()
}
