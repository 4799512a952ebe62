package retry

import (
	"context"
	"io"
	"net/http"
	"time"
)

// hedgeLeg is the result of one of the concurrent sends of a hedged attempt.
type hedgeLeg[R any] struct {
	res    R
	cancel context.CancelFunc // ends the send's context
	index  int                // 0: the first send, 1: the hedge
}

// hedgeSends is what a protocol gives the loop's hedge: how to make a send
// and what its result is worth. The hedge itself (when to send the second
// copy, the budget's say, which copy wins, the losing copy's release, the
// trace) is the same for every protocol.
type hedgeSends[R any] struct {
	// prepare readies send i (0 or 1) under its own context, which ends
	// when the send loses; the returned func sends it, on a goroutine of
	// its own. An error means the send cannot be made.
	prepare func(ctx context.Context, i int) (send func() R, err error)
	// good reports whether a send's result ends the attempt well.
	good func(R) bool
	// discard releases a result that lost, on the losing send's goroutine
	// (nil: nothing to release).
	discard func(R)
}

// hedge runs the sends of one hedged attempt under ctx: the first at once
// and, if it has not answered after delay and the budget pays for it, a
// second; the first good result wins, and the slower send is cancelled,
// waited for and released. It returns the chosen result and how many sends
// were made (1 or 2), or the error of a first send that could not be made.
// Every send it started has ended when it returns: nothing of the call
// (the caller's request, the protocol's attempt) runs after the call
// returned. The trace hears of the hedge on loopCtx.
func hedge[R any](ctx, loopCtx context.Context, c *config, delay time.Duration, s hedgeSends[R]) (hedgeLeg[R], int, error) {
	results := make(chan hedgeLeg[R], 2)
	var cancels [2]context.CancelFunc
	launch := func(i int) error {
		lctx, cancel := context.WithCancel(ctx)
		send, err := s.prepare(lctx, i)
		if err != nil {
			cancel()
			return err
		}
		cancels[i] = cancel
		go func() { results <- hedgeLeg[R]{res: send(), cancel: cancel, index: i} }()
		return nil
	}
	if err := launch(0); err != nil {
		return hedgeLeg[R]{}, 1, err
	}
	if !hedgeDue(ctx, c, delay, results) || launch(1) != nil {
		return <-results, 1, nil
	}
	first := <-results
	if s.good(first.res) {
		cancels[1-first.index]() // the slower send stops now
		releaseHedgeLeg(<-results, s.discard)
		c.trace.hedged(loopCtx, first.index == 1)
		return first, 2, nil
	}
	releaseHedgeLeg(first, s.discard)
	second := <-results
	c.trace.hedged(loopCtx, second.index == 1 && s.good(second.res))
	return second, 2, nil
}

// hedgeDue waits for the hedge delay and reports whether a hedge should be
// sent now: the first send has not answered, the attempt is still on, and
// the budget pays for the hedge.
func hedgeDue[R any](ctx context.Context, c *config, delay time.Duration, results chan hedgeLeg[R]) bool {
	timer := c.clock.Timer(delay)
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

// releaseHedgeLeg cancels a losing send and releases its result.
func releaseHedgeLeg[R any](l hedgeLeg[R], discard func(R)) {
	l.cancel()
	if discard != nil {
		discard(l.res)
	}
}

// httpLeg is what one send of a Transport's hedged attempt brought.
type httpLeg struct {
	resp *http.Response
	err  error
}

// hedgeable reports whether this request may be hedged: hedging is on, the
// request is safe to send twice at once, its body can be had twice at once,
// and it may be retried at all.
func (rt *roundTrip) hedgeable() bool {
	return rt.c.adaptive.hedge && rt.replayable() && rt.c.maxAttempts > 1 && rt.body.atOnce()
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
// cancelled and drained before RoundTrip returns, shares nothing with the
// caller. The sends see copies of what
// they need, never the round trip itself, which stays on its goroutine's
// stack.
func (rt *roundTrip) hedged(ctx context.Context, n int) (*http.Response, error, int) {
	h := &httpHedge{
		base: rt.t.base, orig: rt.orig, key: rt.key, getBody: rt.body.getBody, noBody: rt.body.none,
		est: rt.estimate, c: rt.c, idempotent: rt.idempotent, keyed: rt.keyed, n: n,
	}
	w, legs, err := hedge(ctx, rt.ctx, rt.c, rt.c.adaptive.hedgeDelayFor(rt.estimate),
		hedgeSends[httpLeg]{prepare: h.prepare, good: h.good, discard: h.discard})
	if err != nil {
		return nil, err, 1
	}
	rt.bound.also(w.cancel)
	return w.res.resp, w.res.err, legs
}

// httpHedge is what the sends of a Transport's hedged attempt need.
type httpHedge struct {
	base              http.RoundTripper
	orig              *http.Request
	key               string
	getBody           func() (io.ReadCloser, error)
	noBody            bool
	est               *latencyEstimate
	c                 *config
	idempotent, keyed bool
	n                 int // the attempt's number
}

// prepare readies send i: a deep copy of the caller's request, with the key
// and a body of its own.
func (h *httpHedge) prepare(ctx context.Context, i int) (func() httpLeg, error) {
	tr := h.c.trace
	req := h.orig.Clone(ctx)
	if h.key != "" {
		if req.Header == nil {
			req.Header = make(http.Header, 1)
		}
		req.Header[h.c.http.keyHeader] = []string{h.key}
	}
	if !h.noBody {
		b, err := h.getBody()
		if err != nil {
			return nil, err
		}
		req.Body, req.GetBody = b, h.getBody
	}
	// The send's body first: a send that cannot be made is no attempt, and
	// the trace hears of none (it would start a span never ended).
	if actx := tr.attemptStart(ctx, h.n+i, i == 1, h.orig); actx != ctx {
		req = req.WithContext(actx)
	}
	return func() httpLeg {
		resp, err := sendTimed(h.base, req, h.est, h.c.clock)
		tr.attemptEnd(req.Context(), h.n+i, resp, err)
		return httpLeg{resp: resp, err: err}
	}, nil
}

// good reports whether a send brought a response that ends the attempt well.
func (h *httpHedge) good(l httpLeg) bool {
	if l.err != nil {
		return false
	}
	judge := roundTrip{c: h.c, idempotent: h.idempotent, keyed: h.keyed, honoured: true} // hedged: replayable
	var o outcome
	judge.classifyResponse(l.resp, &o)
	return !o.failed()
}

// discard releases the response of a send that lost.
func (h *httpHedge) discard(l httpLeg) { drain(l.resp, h.c.clock, settleTimeout) }
