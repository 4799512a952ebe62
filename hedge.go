package retry

import (
	"context"
	"net/http"
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
	return rt.c.adaptive.hedge && (rt.idempotent || rt.keyed) && rt.c.maxAttempts > 1 &&
		(rt.body.orig == nil || rt.body.getBody != nil)
}

// hedged sends req and, if it has not answered after the hedge delay and
// the budget allows, a second copy; the first good response wins and the
// other send is cancelled and drained. It returns the chosen result and the
// number of sends made (1 or 2).
func (rt *roundTrip) hedged(req *http.Request) (*http.Response, error, int) {
	results := make(chan leg, 2)
	attemptCtx := req.Context()
	var cancels [2]context.CancelFunc
	launch := func(i int, r *http.Request, cancel context.CancelFunc) {
		cancels[i] = cancel
		go func() {
			resp, err := rt.send(r)
			results <- leg{resp: resp, err: err, cancel: cancel, index: i}
		}()
	}
	ctx1, cancel1 := context.WithCancel(attemptCtx)
	launch(0, req.WithContext(ctx1), cancel1)

	timer := rt.c.clock.Timer(rt.c.adaptive.hedgeDelayFor(rt.estimate))
	select {
	case first := <-results:
		timer.Stop()
		return rt.keep(first), first.err, 1
	case <-attemptCtx.Done():
		timer.Stop()
		first := <-results
		return rt.keep(first), first.err, 1
	case <-timer.C:
	}
	if attemptCtx.Err() != nil || (rt.c.budget != nil && !rt.c.budget.AllowRetry(rt.c.clock.Now())) {
		first := <-results
		return rt.keep(first), first.err, 1
	}
	ctx2, cancel2 := context.WithCancel(attemptCtx)
	req2 := req.WithContext(ctx2)
	body, get, err := rt.body.again(ctx2)
	if err != nil {
		cancel2()
		first := <-results
		return rt.keep(first), first.err, 1
	}
	req2.Body, req2.GetBody = body, get
	launch(1, req2, cancel2)

	first := <-results
	if rt.good(first) {
		cancels[1-first.index]() // the slower send stops now
		go discardLeg(results, rt.c.http.drainLimit)
		return rt.keep(first), nil, 2
	}
	second := <-results
	if rt.good(second) {
		discard(first, rt.c.http.drainLimit)
		return rt.keep(second), nil, 2
	}
	// Both failed: keep the later outcome for the loop to classify.
	discard(first, rt.c.http.drainLimit)
	return rt.keep(second), second.err, 2
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
	rt.cancels = true
	return l.resp
}

// discard cancels a losing leg and releases its response.
func discard(l leg, limit int64) {
	l.cancel()
	if l.resp != nil {
		drain(l.resp, limit)
	}
}

// discardLeg waits for the losing leg, already cancelled, and releases it.
func discardLeg(results <-chan leg, limit int64) {
	l := <-results
	discard(l, limit)
}
