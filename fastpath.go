package retry

import (
	"context"
	"net/http"
)

// firstTry is the outcome of a first attempt made before the round trip's
// state was built (see Transport.tryFast).
type firstTry struct {
	resp *http.Response
	err  error
}

// fastEligible reports whether the Transport's policy lets a request's first
// attempt go straight to the base: nothing in the policy needs to watch the
// attempt (no timer of its own, no trace, no latency to measure, no hook to
// call). The default attempt timeout needs a timer only over a base that does
// not bound itself and for a request without a deadline (see fastRequest).
func (t *Transport) fastEligible() bool {
	c := &t.cfg
	return !t.replaysHidden && !c.adaptive.measures() &&
		c.totalTimeout == 0 && c.attemptTimeout == 0 &&
		c.onAttempt == nil && c.onRetry == nil && c.logger == nil
}

// tryFast sends an idempotent, body-less (or GetBody) request as it is, and
// returns the response when it is plainly a success: then the round trip
// costs no state at all. Otherwise it returns the first attempt's outcome
// for the full loop to carry on from.
func (t *Transport) tryFast(req *http.Request) (*http.Response, *firstTry) {
	resp, err := t.base.RoundTrip(req)
	if err == nil && plainSuccess(resp) {
		if t.cfg.budget != nil {
			t.cfg.budget.Succeeded()
		}
		if r := fillReport(req.Context(), 1, nil, outcome{status: resp.StatusCode}); r != nil {
			r.IdempotencyKey = firstValue(req.Header, t.cfg.http.keyHeader)
		}
		return resp, nil
	}
	return nil, &firstTry{resp: resp, err: err}
}

// fastKind says how a request may take the fast path.
type fastKind uint8

const (
	notFast     fastKind = iota
	fastAsIs             // sent as it is: nothing to add
	fastWithKey          // sent in a copy that carries a key of the Transport's
)

// fastRequest reports whether and how req itself may take the fast path: a
// safe method or a key of the caller's own (sent as it is), or a POST or
// PATCH that needs a key (sent in a copy); a body that can be had again; and
// a context with nothing that changes the policy (no enclosing loop, no
// per-request policy); and a bound on the attempt (the base's own, or the
// context's deadline).
func (t *Transport) fastRequest(req *http.Request) fastKind {
	kind := fastAsIs
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
	default:
		if !t.cfg.hasKey(req.Header) {
			if t.cfg.http.noKeys || (req.Method != http.MethodPost && req.Method != http.MethodPatch) {
				return notFast
			}
			kind = fastWithKey
		}
	}
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return notFast
	}
	ctx := req.Context()
	if inLoop(ctx) || policyOf(ctx) != nil || hasGiveUp(ctx) {
		return notFast
	}
	if !t.bounded {
		if _, ok := ctx.Deadline(); !ok {
			return notFast // the attempt needs the default timeout's timer
		}
	}
	return kind
}

// keyedCopy is the caller's request with a key of the Transport's: the copy
// and the key's bytes share one allocation, and the round trip, if the
// first attempt is not the last, carries on with the same key.
type keyedCopy struct {
	req    http.Request
	keyVal [1]string
	keyBuf [38]byte
}

// newKeyedCopy copies req and gives the copy a fresh key in a copy of the
// caller's header.
func (t *Transport) newKeyedCopy(req *http.Request) *keyedCopy {
	k := &keyedCopy{req: *req}
	k.keyVal[0] = newKeyInto(&k.keyBuf, t.cfg.http.tokenKeys)
	k.req.Header = withKey(req.Header, t.cfg.http.keyHeader, k.keyVal[:])
	return k
}

// hasGiveUp reports whether ctx belongs to a request served by
// PushbackMiddleware (a give-up must be noted there, so take the full path).
func hasGiveUp(ctx context.Context) bool {
	return ctx.Value(giveUpKey{}) != nil
}

// plainSuccess reports whether a response ends the round trip with no
// question: not a status the Transport ever retries or counts as a failure.
func plainSuccess(resp *http.Response) bool {
	code := resp.StatusCode
	return code < 500 && code != http.StatusTooManyRequests && code != http.StatusConflict
}
