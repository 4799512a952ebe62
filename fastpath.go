package retry

import (
	"context"
	"net/http"
	"time"
)

// firstTry is the outcome of a first attempt made before the round trip's
// state was built (see Transport.tryFast).
type firstTry struct {
	resp *http.Response
	err  error
}

// fastEligible reports whether the Transport's policy lets a request's first
// attempt go to the base before any round-trip state is built: nothing in
// the policy needs to watch the attempt beyond a timer and a latency
// measurement (no trace, no hedge, no hook to call, no total deadline to
// derive).
func (t *Transport) fastEligible() bool {
	c := &t.cfg
	return !t.replaysHidden && !c.adaptive.hedge && c.totalTimeout == 0 &&
		c.onAttempt == nil && c.onRetry == nil && c.logger == nil
}

// fastKind says how a request may take the fast path.
type fastKind uint8

const (
	notFast     fastKind = iota
	fastAsIs             // nothing to add to the request
	fastWithKey          // the request needs a key of the Transport's
)

// fastRequest reports whether and how req itself may take the fast path: a
// safe method or a key of the caller's own, or a POST or PATCH that needs a
// key; a body that can be had again; and a context with nothing that changes
// the policy (no enclosing loop, no per-request policy). A request served by
// PushbackMiddleware may go too: a first attempt that ends the round trip
// is a success, and a give-up is noted by the full loop it hands over to.
func (t *Transport) fastRequest(req *http.Request) fastKind {
	kind := fastAsIs
	switch {
	case idempotentMethod(req.Method), t.cfg.hasKey(req.Header):
	case t.cfg.needsKey(req.Method, req.Header):
		kind = fastWithKey
	default:
		return notFast // retried only if provably never sent: the full loop decides
	}
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return notFast
	}
	ctx := req.Context()
	if inLoop(ctx) || policyOf(ctx) != nil {
		return notFast
	}
	return kind
}

// tryFast makes a request's first attempt: the caller's request as it is
// when nothing needs changing, else a firstCopy with the key and the
// attempt's timeout. When the response is plainly a success the round trip
// costs no more state; otherwise the first attempt's outcome (and the copy
// it sent) go to the full loop to carry on from.
func (t *Transport) tryFast(req *http.Request, kind fastKind) (*http.Response, *firstCopy, *firstTry) {
	c := &t.cfg
	ctx := req.Context()
	var (
		estimate *latencyEstimate
		timeout  time.Duration
	)
	if t.mayTimeAttempts {
		if c.adaptive.timeout {
			estimate = t.latency.For(req.URL.Host)
		}
		deadline, _ := ctx.Deadline()
		timeout = t.attemptTimeoutFor(c, estimate, deadline)
	}
	send, fc := req, (*firstCopy)(nil)
	var timer stopper
	if kind == fastWithKey || timeout > 0 {
		fc, timer = t.newFirstCopy(req, kind == fastWithKey, timeout)
		send = &fc.req
	}
	resp, err := t.sendMeasured(c, estimate, send)
	if timer != nil {
		timer.Stop() // the body is bounded by the caller's context alone
		if err != nil && endedByTimer(send.Context(), ctx) {
			err = &AttemptTimeoutError{Err: err}
		}
	}
	if err != nil || !plainSuccess(resp) {
		return nil, fc, &firstTry{resp: resp, err: err}
	}
	if c.budget != nil {
		c.budget.Succeeded()
	}
	if r := fillReport(ctx, 1, nil, outcome{status: resp.StatusCode}); r != nil {
		r.IdempotencyKey = firstValue(send.Header, c.http.keyHeader)
	}
	if fc != nil && fc.cancel != nil && ctx.Done() != nil {
		// The attempt's context must end to be released from its parent.
		cancelWhenClosed(resp, fc.cancel, noop)
	}
	return resp, fc, nil
}

// firstCopy is the first attempt's request when the fast path must change
// the caller's: a copy that carries a key of the Transport's, or a context
// of its own for the attempt's timer to end, or both. The copy and the key's
// bytes share one allocation. If the first attempt is not the last, the
// round trip carries on with the same key and ends the attempt's context as
// it would one of its own.
type firstCopy struct {
	req    http.Request
	keyVal [1]string // empty: no key added
	keyBuf [38]byte
	cancel context.CancelFunc // nil: no context of its own
}

// newFirstCopy copies req, gives the copy a fresh key in a copy of the
// caller's header when key is set, and arms a timer that ends the copy's
// context after timeout, when there is one.
func (t *Transport) newFirstCopy(req *http.Request, key bool, timeout time.Duration) (*firstCopy, stopper) {
	fc := &firstCopy{}
	ctx := req.Context()
	var timer stopper
	if timeout > 0 {
		ctx, fc.cancel = context.WithCancel(ctx)
		timer = afterFunc(t.cfg.clock, timeout, fc.cancel)
	}
	fc.req = *req.WithContext(ctx) // WithContext's own copy stays on the stack
	if key {
		fc.keyVal[0] = newKeyInto(&fc.keyBuf, t.cfg.http.tokenKeys)
		fc.req.Header = withKey(req.Header, t.cfg.http.keyHeader, fc.keyVal[:])
	}
	return fc, timer
}

// plainSuccess reports whether a response ends the round trip with no
// question: not a status the Transport ever retries or counts as a failure.
func plainSuccess(resp *http.Response) bool {
	code := resp.StatusCode
	return code < 500 && code != http.StatusTooManyRequests && code != http.StatusConflict
}
