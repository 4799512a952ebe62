package retry

import (
	"context"
	"net/http"

	"github.com/benbjohnson/clock"
)

// leg is the result of one of the concurrent sends of a hedged attempt.
type leg struct {
	resp   *http.Response
	err    error
	cancel context.CancelFunc
	index  int // 0: the first send, 1: the hedge
}

// hedgeable reports whether this request may be hedged: hedging is on, the
// request is safe to send twice at once, its body can be had twice at once,
// and it may be retried at all.
func (rt *roundTrip) hedgeable() bool {
	return rt.c.adaptive.hedge && (rt.idempotent || rt.keyed) && rt.c.maxAttempts > 1 && rt.body.atOnce()
}

// hedgedAttempt makes attempt n as one send and, if that has not answered
// after the hedge delay and the budget allows, a second; the first good
// response wins.
func (rt *roundTrip) hedgedAttempt(n int) outcome {
	resp, err, legs := rt.hedged(rt.attemptContext(), n)
	resp, err = rt.settle(resp, err)
	return rt.judge(resp, err, legs)
}

// hedged runs the sends of one hedged attempt under ctx and returns the
// chosen result and the number of sends made (1 or 2). Each send is a deep
// copy of the caller's request with a body of its own, so the losing send,
// cancelled and drained after RoundTrip returned, shares nothing with the
// caller, who may reuse the request by then.
func (rt *roundTrip) hedged(ctx context.Context, n int) (*http.Response, error, int) {
	results := make(chan leg, 2)
	var cancels [2]context.CancelFunc
	launch := func(i int) error {
		lctx, cancel := context.WithCancel(ctx)
		// The send's body first: a send that cannot be made is no attempt,
		// and the trace hears of none (it would start a span never ended).
		req, err := rt.legRequest(lctx)
		if err != nil {
			cancel()
			return err
		}
		if actx := rt.c.trace.attemptStart(lctx, n+i, i == 1, rt.orig); actx != lctx {
			req = req.WithContext(actx)
		}
		cancels[i] = cancel
		go sendLeg(rt.t.base, req, rt.estimate, rt.c.clock, rt.c.trace, n+i, i, cancel, results)
		return nil
	}
	if err := launch(0); err != nil {
		return nil, err, 1
	}
	if !rt.hedgeDue(ctx, results) || launch(1) != nil {
		first := <-results
		return rt.keep(first), first.err, 1
	}
	clk := rt.c.clock
	first := <-results
	if rt.good(first) {
		cancels[1-first.index]() // the slower send stops now
		go discardLeg(results, clk)
		rt.c.trace.hedged(rt.ctx, first.index == 1)
		return rt.keep(first), nil, 2
	}
	discardLegResult(first, clk)
	second := <-results
	rt.c.trace.hedged(rt.ctx, second.index == 1 && rt.good(second))
	return rt.keep(second), second.err, 2
}

// hedgeDue waits for the hedge delay and reports whether a hedge should be
// sent now: the first send has not answered, the attempt is still on, and
// the budget pays for the hedge.
func (rt *roundTrip) hedgeDue(ctx context.Context, results chan leg) bool {
	c := rt.c
	timer := c.clock.Timer(c.adaptive.hedgeDelayFor(rt.estimate))
	select {
	case l := <-results:
		timer.Stop()
		results <- l // put back for the caller
		return false
	case <-ctx.Done():
		timer.Stop()
		return false
	case <-timer.C:
	}
	return ctx.Err() == nil && (c.budget == nil || c.budget.AllowRetry(c.clock.Now()))
}

// legRequest copies the caller's request deeply for one send, with the key
// and a body of its own.
func (rt *roundTrip) legRequest(ctx context.Context) (*http.Request, error) {
	req := rt.orig.Clone(ctx)
	if rt.key != "" {
		if req.Header == nil {
			req.Header = make(http.Header, 1)
		}
		req.Header[rt.c.http.keyHeader] = []string{rt.key}
	}
	if !rt.body.none {
		b, err := rt.body.getBody()
		if err != nil {
			return nil, err
		}
		req.Body, req.GetBody = b, rt.body.getBody
	}
	return req, nil
}

// sendLeg makes leg i, attempt n, of a hedged attempt and reports it on
// results.
func sendLeg(base http.RoundTripper, req *http.Request, est *latencyEstimate, clk clock.Clock, tr *Trace,
	n, i int, cancel context.CancelFunc, results chan<- leg) {
	resp, err := sendTimed(base, req, est, clk)
	tr.attemptEnd(req.Context(), n, resp, err)
	results <- leg{resp: resp, err: err, cancel: cancel, index: i}
}

// good reports whether a leg brought a response that ends the attempt well.
func (rt *roundTrip) good(l leg) bool {
	if l.err != nil {
		return false
	}
	var o outcome
	rt.classifyResponse(l.resp, &o)
	return !o.failed()
}

// keep makes l the attempt's result: its context ends with the attempt's.
func (rt *roundTrip) keep(l leg) *http.Response {
	prev := rt.cancelAttempt
	rt.cancelAttempt = func() { l.cancel(); prev() }
	rt.ownsAttempt = true
	return l.resp
}

// discardLegResult cancels a losing leg and releases its response.
func discardLegResult(l leg, clk clock.Clock) {
	l.cancel()
	drain(l.resp, clk, settleTimeout)
}

// discardLeg waits for the losing leg, already cancelled, and releases it.
func discardLeg(results <-chan leg, clk clock.Clock) {
	discardLegResult(<-results, clk)
}
