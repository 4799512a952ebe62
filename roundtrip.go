package retry

import (
	"context"
	"net/http"
	"time"
)

// roundTrip is one logical request through a Transport, from its first
// attempt to what RoundTrip hands back. It lives on RoundTrip's stack: an
// attempt that cannot send the caller's request as it is gets an outgoing
// copy of its own (see prepare), and a first attempt that succeeds costs
// nothing more.
type roundTrip struct {
	t      *Transport
	c      *config // the Transport's policy, or a copy changed by the request's context
	orig   *http.Request
	parent context.Context // the caller's context

	// idempotent: safe to repeat as it is (the method, or marked
	// Idempotent); keyed: carries a key; honoured: its host is known to
	// deduplicate keys (see WithKeysHonoured). Idempotent, or keyed and
	// honoured, makes every transient failure retryable.
	idempotent, keyed, honoured bool
	keyOut                      bool        // an attempt is out to a host whose handling of keys is unknown (see keyHosts.sending)
	key                         string      // the key the Transport adds; "" when it adds none
	keyHeader                   http.Header // the caller's header with key, made on first use
	nested                      bool        // inside another retry loop: one attempt, errors as they are

	body     bodySource
	estimate *latencyEstimate // the host's latency, when measured
	dep      *dependency      // the host's gate; nil when riding through is off

	ctx        context.Context // parent, bounded by the total deadline
	deadline   time.Time
	cancelLoop context.CancelFunc
	ownsLoop   bool // ctx is ours: it must end when the response body is closed

	out  *outgoing      // the current attempt's request, when not the caller's
	resp *http.Response // the last attempt's response, until discarded
	// drain reads the body of the last response discarded for a retry,
	// until the round trip is over at the latest. When kept, it reads it
	// into memory: the response is handed back if the request then waits
	// for its dependency in vain.
	drain *drainer
	kept  bool
	// lastHeader is the header of the last response discarded for a retry,
	// for the StatusError of a loop that ends without handing it back.
	lastHeader http.Header
	origSent   bool         // the caller's body went to the base, which closes it
	bound      attemptBound // the current attempt's timeout and context
	left       int          // sends the attempt limit leaves the current attempt
}

// start decides what the request is and what policy applies to it.
func (rt *roundTrip) start(t *Transport, req *http.Request) {
	rt.t, rt.c, rt.orig, rt.parent = t, &t.cfg, req, req.Context()
	rt.cancelLoop, rt.bound.cancel = noop, noop
	lc := loopOf(rt.parent)
	policy := policyOf(rt.parent)
	if policy != nil || lc != nil {
		rt.applyPolicy(policy, lc != nil)
	}
	c := rt.c
	rt.nested = lc != nil
	rt.idempotent = idempotentMethod(req.Method) || c.http.idempotent
	switch {
	case c.hasKey(req.Header):
		rt.keyed = true
	case c.needsKey(req.Method, req.Header):
		rt.keyed = true
		if lc != nil {
			rt.key = c.formatKey(lc.keys.keyFor(req))
		} else {
			rt.key = newKey(c.http.tokenKeys)
		}
	}
	if rt.keyed && !rt.idempotent {
		rt.honoured = c.http.honoured.covers(req.URL)
	}
	if !rt.nested {
		rt.yieldToLayerAbove(req)
		c = rt.c
	}
	if c.budget != nil {
		c.budget.Requested()
	}
	rt.body = newBodySource(req, c.http.bodyLimit)
	if t.latency != nil {
		rt.estimate = t.latency.For(req.URL.Host)
	}
	if !c.ride.off {
		rt.dep = t.gates.get(req.URL.Host, t.cfg.clock)
	}
	rt.deadline = c.deadline(rt.parent)
	rt.ctx, rt.cancelLoop = withTotalDeadline(rt.parent, c.clock, rt.deadline)
	rt.ownsLoop = rt.ctx != rt.parent
	rt.ctx = c.trace.start(rt.ctx, req)
}

// applyPolicy gives the request the policy its context asks for: its own
// options, and a single attempt inside another loop.
func (rt *roundTrip) applyPolicy(p requestOptions, nested bool) {
	c := new(config)
	*c = rt.t.cfg // a copy: the Transport's own policy never changes
	c.applyAll(p)
	if nested {
		c.maxAttempts = 1
		c.adaptive.hedge = false
	}
	rt.c = c
}

// yieldToLayerAbove gives the request fewer attempts when it shows a retry
// layer above the Transport: an SDK that says it retries (see sdkAttempts).
func (rt *roundTrip) yieldToLayerAbove(req *http.Request) {
	n := 0
	if !rt.c.http.noYield {
		n = sdkAttempts(req.Header, rt.c.maxAttempts)
	}
	if n == 0 || n >= rt.c.maxAttempts {
		return
	}
	if rt.c == &rt.t.cfg {
		c := new(config)
		*c = rt.t.cfg // a copy: the Transport's own policy never changes
		rt.c = c
	}
	rt.c.maxAttempts = n
}

// run runs the retry loop and hands back its result. A panic in the
// policy's own code (a hook, a classifier, a backoff) releases what the
// round trip holds before it goes on.
func (rt *roundTrip) run() (*http.Response, error) {
	done := false
	defer func() {
		if !done {
			rt.abandon()
		}
	}()
	n, last, reason := rt.c.run(rt.ctx, rt.deadline, rt.dep, rt.attempt, rt.readyBody, rt.discard, rt.awaitKeys)
	done = true
	return rt.finish(n, last, reason)
}

// finish reports the outcome and hands back the last response, or the error.
func (rt *roundTrip) finish(n int, last outcome, reason error) (*http.Response, error) {
	rt.body.release()
	if !rt.origSent {
		rt.body.closeUnsent()
	}
	if !rt.nested {
		if r := rt.c.fillReport(n, reason, last); r != nil {
			r.IdempotencyKey = rt.reportedKey()
		}
		if isGiveUp(reason) {
			noteGiveUp(rt.parent, reason)
		}
	}
	if rt.c.trace != nil {
		rt.c.trace.end(rt.ctx, Report{Attempts: n, Reason: reason, StatusCode: last.status, Err: last.err,
			IdempotencyKey: rt.reportedKey()})
	}
	if rt.resp != nil {
		rt.stopDrain()
		resp := rt.handBack()
		if reason != nil && !rt.nested {
			markHandedBack(resp, Report{Attempts: n, Reason: reason, StatusCode: last.status, IdempotencyKey: rt.reportedKey()})
		}
		return resp, nil
	}
	ctxErr := loopContextErr(rt.ctx, rt.c.clock, rt.deadline)
	var kept *http.Response
	if rt.kept && reason == ErrDependencyDown {
		kept = rt.drain.response(rt.ctx)
	}
	rt.stopDrain()
	rt.endAttempt()
	rt.cancelLoop()
	if kept != nil {
		if reason != nil && !rt.nested {
			markHandedBack(kept, Report{Attempts: n, Reason: reason, StatusCode: last.status, IdempotencyKey: rt.reportedKey()})
		}
		return kept, nil
	}
	if last.err == nil && last.status != 0 {
		last.err = &StatusError{StatusCode: last.status, Header: rt.lastHeader}
	}
	if rt.nested {
		return nil, last.err // the enclosing loop decides
	}
	return nil, newError(ctxErr, n, reason, last.err)
}

// reportedKey is the key the attempts carried: the Transport's or the caller's.
func (rt *roundTrip) reportedKey() string {
	if rt.key != "" {
		return rt.key
	}
	if rt.keyed {
		return firstValue(rt.orig.Header, rt.c.http.keyHeader)
	}
	return ""
}

// abandon releases everything after a panic.
func (rt *roundTrip) abandon() {
	if rt.keyOut {
		rt.keyAnswered(0, nil)
	}
	rt.stopDrain()
	if rt.resp != nil && rt.resp.Body != nil {
		rt.resp.Body.Close()
	}
	rt.body.release()
	if !rt.origSent {
		rt.body.closeUnsent()
	}
	rt.endAttempt()
	rt.cancelLoop()
}

// endAttempt ends the current attempt's context.
func (rt *roundTrip) endAttempt() { rt.bound.end() }

// discard releases a response that is about to be retried, and returns
// what is left of the wait before the retry. Its body is read on a
// goroutine of its own (see drainer) so that its connection is reused: the
// retry waits for it past the wait only while it keeps arriving, and a body
// still arriving when the retry goes is read on meanwhile, up to
// drainLimit and for at most settleTimeout, before the attempt's context
// ends. When the request may wait for its dependency after that, the body
// is kept in memory as it is read, so that a wait in vain can still hand
// the response back.
func (rt *roundTrip) discard(wait time.Duration) time.Duration {
	if resp := rt.resp; resp != nil {
		rt.resp, rt.lastHeader = nil, resp.Header
		clk := rt.c.clock
		start := clk.Now()
		rt.stopDrain() // the one before had a whole attempt's time
		rt.drain = startDrain(resp, clk, rt.settleBound(), rt.dep != nil, rt.bound.detach())
		rt.kept = rt.dep != nil
		rt.drain.settle(rt.ctx, wait)
		wait = max(0, wait-clk.Since(start))
	}
	rt.endAttempt()
	return wait
}

// stopDrain ends the reading of a retried response's body, if any: the
// round trip is over, or another response is to be read.
func (rt *roundTrip) stopDrain() {
	if rt.drain != nil {
		rt.drain.stop()
		rt.drain, rt.kept = nil, false
	}
}

// settleBound is how long the loop waits, after a failed attempt, for its
// response to drain or its request body to be released: settleTimeout,
// never past the deadline.
func (rt *roundTrip) settleBound() time.Duration {
	if rt.deadline.IsZero() {
		return settleTimeout
	}
	return min(settleTimeout, rt.deadline.Sub(rt.c.clock.Now()))
}

// settleTimeout bounds each wait of the Transport that is not an attempt or
// a backoff: draining a retried response, and waiting for the base to be
// done with a request body it is to replay.
const settleTimeout = time.Second
