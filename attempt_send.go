package retry

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/benbjohnson/clock"
)

// outgoing is one attempt's request when the caller's cannot go as it is: a
// copy with a context of its own (for the attempt's timer or the total
// deadline), the key in a copy of the header, or a body of its own. The
// copy, the attempt's own context (when it is an attemptCtx), the key's
// header value and the wrapper that ends the contexts when the response
// body is closed share one allocation.
type outgoing struct {
	req    http.Request
	actx   attemptCtx
	keyVal [1]string
	wrap   cancelOnClose
}

// attempt sends the request once and judges what came back; left is how
// many sends the attempt limit leaves it (a hedge is a second one).
func (rt *roundTrip) attempt(n, left int) outcome {
	rt.kept, rt.left = false, left // the response a wait in vain hands back is this attempt's
	if left > 1 && rt.hedgeable() {
		return rt.hedgedAttempt(n)
	}
	req := rt.prepare(n)
	rt.keySending()
	resp, err := rt.send(req)
	rt.c.trace.attemptEnd(req.Context(), n, resp, err)
	return rt.judge(resp, err, 1)
}

// prepare builds attempt n's request: the caller's own when nothing needs
// changing, else an outgoing copy. Its body was readied before (see
// bodySource.ready), so building it cannot fail.
func (rt *roundTrip) prepare(n int) *http.Request {
	body, getBody := rt.body.forAttempt(n)
	if n == 1 {
		rt.origSent = true // the base closes the caller's body from now on
	}
	var o *outgoing
	actx := rt.ctx
	if d := rt.boundFor(); d > 0 {
		if rt.ctx.Done() == nil {
			// The attempt's context is an attemptCtx, in the outgoing
			// request's allocation.
			o = &outgoing{}
			actx = rt.bound.beginOwn(rt.ctx, rt.c.clock, d, &o.actx)
		} else {
			actx = rt.bound.begin(rt.ctx, rt.c.clock, d)
		}
	}
	ctx := rt.c.trace.attemptStart(actx, n, false, rt.orig)
	orig := rt.orig
	guarded := rt.guarded()
	if guarded {
		// Until its host shows it honours keys, the request must not be
		// sent again once it may have reached it, by net/http either:
		// without GetBody, and with a body, net/http's Transport takes
		// even a keyed request as not replayable.
		getBody = nil
		if rt.body.none {
			body = sentOnce{}
		}
	}
	if ctx == rt.parent && rt.key == "" && body == orig.Body && (!guarded || orig.GetBody == nil) {
		rt.out = nil
		return orig
	}
	if o == nil {
		o = &outgoing{}
	}
	o.req = *orig.WithContext(ctx)
	if rt.key != "" {
		if rt.keyHeader == nil {
			o.keyVal[0] = rt.key
			rt.keyHeader = withKey(orig.Header, rt.c.http.keyHeader, o.keyVal[:])
		}
		o.req.Header = rt.keyHeader
	}
	o.req.Body, o.req.GetBody = body, getBody
	rt.out = o
	return &o.req
}

// attemptContext gives the next attempt its context: the loop's, or, when
// the attempt has a timeout, a child of it that the attempt's timer ends.
func (rt *roundTrip) attemptContext() context.Context {
	return rt.bound.begin(rt.ctx, rt.c.clock, rt.boundFor())
}

// boundFor is the timeout of the next attempt (see config.boundFor).
func (rt *roundTrip) boundFor() time.Duration {
	return rt.c.boundFor(rt.estimate, rt.deadline, rt.t.bounded, rt.left, rt.dep)
}

// send makes one request of the base transport and settles the attempt's
// timer: a timer that fired makes the attempt a timeout, whatever came back.
func (rt *roundTrip) send(req *http.Request) (*http.Response, error) {
	resp, err := sendTimed(rt.t.base, req, rt.estimate, rt.c.clock)
	return rt.settle(resp, err)
}

// sendTimed makes one request of base and, when est is kept for the host,
// adds the time to its response to it. It never lets a base's broken
// result through: a nil response with a nil error is an error, and a
// response that comes with an error is closed.
func sendTimed(base http.RoundTripper, req *http.Request, est *latencyEstimate, clk clock.Clock) (*http.Response, error) {
	var start time.Time
	if est != nil {
		start = clk.Now()
	}
	resp, err := base.RoundTrip(req)
	switch {
	case err != nil && resp != nil:
		if resp.Body != nil {
			resp.Body.Close()
		}
		resp = nil
	case err == nil && resp == nil:
		err = fmt.Errorf("retry: %T returned a nil *http.Response and a nil error", base)
	case err == nil && est != nil:
		est.Observe(clk.Since(start))
	}
	return resp, err
}

// settle stops the attempt's timer. If it had already fired, the attempt
// timed out: a response that came at the same moment is closed, since its
// context, and so its body, is ending.
func (rt *roundTrip) settle(resp *http.Response, err error) (*http.Response, error) {
	if !rt.bound.settle(rt.estimate) {
		return resp, err
	}
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	return nil, &AttemptTimeoutError{Timeout: rt.bound.timeout, Err: err}
}

// judge classifies an attempt's result.
func (rt *roundTrip) judge(resp *http.Response, err error, legs int) outcome {
	o := outcome{hedges: legs - 1}
	if err != nil {
		rt.endAttempt()
		o.err = err
		rt.keyAnswered(0, nil)
		rt.classifyError(err, &o)
	} else {
		rt.resp = resp
		o.status = resp.StatusCode
		rt.keyAnswered(resp.StatusCode, resp.Header)
		rt.classifyResponse(resp, &o)
	}
	// A keyed request that may have reached its server is sent again only
	// once the host has shown it honours keys: the loop waits for other
	// requests' answers to show it (see awaitKeys).
	o.unproven = o.stop == ErrNotIdempotent && rt.keyed && !rt.idempotent
	return o
}

// readyBody gets the body of the next attempt once a retry is decided, and
// before the response is discarded: a body that cannot be had again stops
// the loop, which hands back this response (or error) as it is.
func (rt *roundTrip) readyBody() bool {
	return rt.hedgeable() || rt.body.ready(rt.ctx, rt.c.clock, rt.settleBound())
}
