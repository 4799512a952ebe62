package retry

import (
	"errors"
	"net/http"
	"sync"
)

// Transport is an http.RoundTripper that retries what is safe to retry, at
// one layer, within a budget and a deadline:
//
//   - GET, HEAD, OPTIONS, TRACE, PUT and DELETE, and any request that carries
//     an idempotency key its host honours (see below), are retried on
//     transient errors (timeouts, resets, refused connections) and on 502,
//     503, 504 and 429 (WithRetryStatuses sets others: 500, 408, ...; a
//     server's x-should-retry or Stripe-Should-Retry overrules the set for
//     its answer, true to retry a 500 or a 409, false never to retry). A 409 to a keyed request that carries Retry-After
//     means "the first copy is still in progress" (our idempotency
//     middleware's answer): it is waited out, each wait longer than the one
//     before, neither charged to the budget nor counted as an attempt,
//     until the deadline (or MaxWait without one). Any other 409 is a
//     conflict, a final answer: it is handed back at once.
//   - POST and PATCH get an Idempotency-Key (one per logical request, the
//     same on every attempt; a key the caller set is kept, an empty one is
//     replaced). Other requests without a key are retried only when they
//     provably never reached the server (a failed dial, a refused
//     connection). A generated key lives as long as one RoundTrip: code that
//     repeats a request after the Transport gave up must set the key itself
//     so the repeats share it (WithReport's Report.IdempotencyKey tells the
//     one the Transport made), unless it repeats through Do, whose loop gives
//     the Transport its keys.
//   - A key makes a resend safe only where the server deduplicates it, and
//     most servers ignore it. Until a host has shown that it honours keys
//     (an answer to a keyed request that echoes the key, as our idempotency
//     middleware's do, or says Idempotent-Replayed: true; remembered per
//     host) or WithKeysHonoured names it, a keyed POST or PATCH to it is
//     retried as if it had no key, and is handed to the base without
//     GetBody (with an empty body of its own if it had none) so that
//     net/http, which resends a request with an Idempotency-Key header on a
//     reused connection that died before the response, does not resend it
//     either. The key is still sent, so that a server that deduplicates can
//     show it. Such a request that may have reached a host not known
//     either way waits, up to its deadline (or MaxWait without one), for
//     the answers of the other keyed requests out to the host: once one
//     echoes its key, it is retried as usual; an answer of the server's
//     own without the echo (a 2xx, or a 4xx or 5xx other than 408, 429,
//     502, 503 and 504, which a proxy in front may give), or no other
//     request left out to tell, hands it back as before. A 409 with
//     Retry-After is waited out either way.
//   - Retry-After (seconds or any HTTP-date) on 429, 503 and that 409 is a
//     floor for the next wait; one over WithMaxRetryAfter, or ending past the
//     deadline, hands the response back at once.
//   - A Retry-Pushback header on a response means the server's own retries
//     gave up: it is not retried (see package pushback).
//   - Every retry is charged to a retry budget (by default one NewBudget(0.1, 1, 20)
//     per Transport), so an outage is not amplified; the retries that led to
//     a success get their tokens back.
//   - A host that keeps failing is taken as down, and requests to it wait
//     for it to come back, within their deadlines, instead of failing or
//     hammering it; once it has been down for longer than MaxWait they fail
//     at once: see RideThrough.
//   - Inside another retry loop (found through the request's context), a
//     Transport makes a single attempt.
//   - Under an SDK that retries on its own, the Transport yields so the two
//     layers do not multiply: with Amz-Sdk-Request: attempt=N; max=M (the
//     AWS SDKs), the SDK's attempts before its last get one attempt each and
//     its last what is left of ours, max(ours-(M-1), 1); a request with
//     X-Stainless-Retry-Count (the OpenAI and Anthropic SDKs) or
//     X-Stripe-Client-User-Agent (the Stripe SDKs) gets one attempt.
//     WithoutYielding ignores the SDKs' headers, for an SDK whose own
//     retries are off.
//   - No attempt waits for its response forever: without a deadline or an
//     attempt timeout, one of 30 s applies (to the response's headers).
//
// The caller's request is never modified. Bodies are replayed with GetBody,
// or buffered while first sent up to WithBodyBufferLimit. Retried responses
// are drained, so their connections are reused, on a goroutine of their own
// (up to 64 KiB, for at most a second, never past the RoundTrip): the retry
// waits for a body past the wait before it only while the body keeps
// arriving, and goes once it has sent nothing for 5 ms, a gap that grows by
// twice as late as the wait's own timers ran (a machine too busy to run the
// reader on time does not make a body look stalled), so a stalled body
// never holds the retry; a body still arriving then is read on meanwhile.
// When retrying stops on a response, that response is returned with its
// body intact and a nil error, also when the server's Retry-After is over
// WithMaxRetryAfter or ends past the deadline (the Report's reason is then
// ErrRetryAfterTooLong or ErrDeadline); WithReport tells why retrying
// stopped. A transport failure ends in an *Error carrying the last error.
// A request that waited for its dependency in vain (see RideThrough) after
// a response whose body could not be kept ends in an *Error whose Last is a
// *StatusError with that response's status code and header.
//
// A Transport is safe for concurrent use and immutable once built. The zero
// Transport is usable: it behaves as NewTransport(nil).
type Transport struct {
	base http.RoundTripper
	cfg  config
	// bounded: the base bounds the wait for response headers itself (an
	// *http.Transport with a ResponseHeaderTimeout), so the default attempt
	// timeout needs no timer of ours.
	bounded bool
	// latency keeps per-host estimates when adaptive timeouts or hedging are on.
	latency *latencyByHost
	// gates are the hosts' gates (see RideThrough); idle ones are evicted
	// once there are many.
	gates gateSet
	// keyHosts are what hosts have shown of their handling of idempotency
	// keys, and the keyed requests out to those not known yet (see
	// WithKeysHonoured).
	keyHosts keyHosts

	// zero and dflt serve the zero Transport.
	zero sync.Once
	dflt *Transport
}

var _ http.RoundTripper = (*Transport)(nil)

// NewTransport wraps base with the retry policy given by opts. A nil base
// (or a nil *http.Transport) means a clone of http.DefaultTransport. Unless
// WithBudget is given, the Transport has a budget of its own,
// NewBudget(0.1, 1, 20); unless WithClassifier is given, transport errors are
// classified with IsTransient.
func NewTransport(base http.RoundTripper, opts ...Option) *Transport {
	if ht, ok := base.(*http.Transport); ok && ht == nil {
		base = nil
	}
	if base == nil {
		base = http.DefaultTransport
		if dt, ok := base.(*http.Transport); ok {
			base = dt.Clone()
		}
	}
	c := newConfig(opts)
	if !c.budgetSet {
		c.budget = newDefaultBudget()
	}
	if !c.classifierSet {
		c.classifier = IsTransient
	}
	t := &Transport{base: base, cfg: c, bounded: boundsItself(base)}
	if c.adaptive.measures() {
		t.latency = newLatencyByHost(c.adaptive.quantile, c.adaptive.hedgeQuantile)
	}
	return t
}

// NewClient returns an *http.Client whose Transport is NewTransport(nil, opts...).
func NewClient(opts ...Option) *http.Client {
	return &http.Client{Transport: NewTransport(nil, opts...)}
}

// ready returns the Transport to use: t, or for the zero Transport one made
// by NewTransport(nil) on first use.
func (t *Transport) ready() *Transport {
	if t.base != nil {
		return t
	}
	t.zero.Do(func() { t.dflt = NewTransport(nil) })
	return t.dflt
}

// Budget returns the Transport's retry budget (nil when unlimited), for its statistics.
func (t *Transport) Budget() *Budget {
	b, _ := t.ready().cfg.budget.(*Budget)
	return b
}

// CloseIdleConnections closes the idle connections of the base transport,
// when it has that method.
func (t *Transport) CloseIdleConnections() {
	type closeIdler interface{ CloseIdleConnections() }
	if ci, ok := t.ready().base.(closeIdler); ok {
		ci.CloseIdleConnections()
	}
}

// Dependencies returns what the Transport knows of each host it sent to
// (see RideThrough), for monitoring.
func (t *Transport) Dependencies() []DependencyStats {
	return t.ready().gates.stats()
}

// errNilURL is what a request without a URL gets, as from net/http.
var errNilURL = errors.New("retry: nil Request.URL")

// RoundTrip sends req, retrying as the policy allows. See Transport.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	t = t.ready()
	if req.URL == nil {
		closeRequestBody(req)
		return nil, errNilURL
	}
	var rt roundTrip
	rt.start(t, req)
	if rt.c.trace == nil {
		return rt.run()
	}
	returned := false
	defer func() {
		if !returned {
			panicked(rt.ctx, rt.c.trace, recover())
		}
	}()
	resp, err := rt.run()
	returned = true
	return resp, err
}

// closeRequestBody closes the body of a request that will not be sent
// (RoundTrip must always close it).
func closeRequestBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// boundsItself reports whether base bounds the wait for response headers
// on its own.
func boundsItself(base http.RoundTripper) bool {
	ht, ok := base.(*http.Transport)
	return ok && ht.ResponseHeaderTimeout > 0
}
