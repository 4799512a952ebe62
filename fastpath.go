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
// attempt go straight to the base: nothing in the policy changes the request
// or needs to watch the attempt (no key to add, no timer, no trace, no
// latency to measure, no hook to call).
func (t *Transport) fastEligible() bool {
	c := &t.cfg
	return !t.replaysHidden && t.bounded && !c.adaptive.measures() &&
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
		fillReport(req.Context(), 1, nil, outcome{status: resp.StatusCode})
		return resp, nil
	}
	return nil, &firstTry{resp: resp, err: err}
}

// fastRequest reports whether req itself may take the fast path: a safe
// method or a key of the caller's own (nothing to add), a body that can be
// had again, and a context with nothing that changes the policy (no
// enclosing loop, no per-request policy).
func (t *Transport) fastRequest(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
	default:
		if !t.cfg.hasKey(req.Header) {
			return false
		}
	}
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return false
	}
	ctx := req.Context()
	return !inLoop(ctx) && policyOf(ctx) == nil && !hasGiveUp(ctx)
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
