package retry

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"time"
)

// roundTrip is the state of one logical request through a Transport. It is
// also the context of its attempts: it answers net/http's trace lookup with
// its own ClientTrace, which saves an allocation per request.
type roundTrip struct {
	context.Context // the loop's context, bounded by the total deadline

	t        *Transport
	c        *config
	orig     *http.Request
	header   http.Header
	body     bodySource
	deadline time.Time
	// idempotent: the method is safe to repeat; keyed: the request carries an
	// idempotency key. Either makes every transient failure retryable.
	idempotent, keyed bool
	keyAdded          bool // the key is ours, in a copy of the caller's header

	tracer   *writeTracer     // nil when the base cannot replay on its own
	estimate *latencyEstimate // the host's latency, when measured
	ownTrace bool             // rt itself answers the trace lookup
	reqCtx   context.Context

	resp          *http.Response // the last attempt's response, until discarded
	cancelAttempt context.CancelFunc
	cancelLoop    context.CancelFunc
	// cancels: some context was derived, so the response body must end it.
	cancels bool
	// attemptTimer ends the current attempt if no response has come in time;
	// it is stopped when the response arrives, so reading the body is
	// bounded only by the total deadline.
	attemptTimer stopper
	sent         bool

	keyVal [1]string
	keyBuf [38]byte

	// first is the outcome of a first attempt already made by the fast path;
	// firstCopy, the request it sent when that was not the caller's own.
	first     *firstTry
	firstCopy *firstCopy
}

func newRoundTrip(t *Transport, req *http.Request) *roundTrip {
	return &roundTrip{t: t, c: &t.cfg, orig: req, cancelAttempt: noop, cancelLoop: noop}
}

// Value answers net/http's trace lookup; everything else goes to the parent.
func (rt *roundTrip) Value(key any) any {
	if rt.ownTrace && key == traceKey {
		return &rt.tracer.trace
	}
	return rt.Context.Value(key)
}

// traceKey is the context key under which net/http/httptrace looks for a
// ClientTrace, learned once by asking httptrace to look it up in a spy.
var traceKey = func() any {
	spy := &keySpy{Context: context.Background()}
	httptrace.ContextClientTrace(spy)
	return spy.key
}()

type keySpy struct {
	context.Context
	key any
}

func (s *keySpy) Value(key any) any {
	s.key = key
	return nil
}

// do runs the retry loop for the request.
func (rt *roundTrip) do() (*http.Response, error) {
	c, req := rt.c, rt.orig
	parent := req.Context()
	if lc := loopOf(parent); lc != nil {
		return rt.single(lc)
	}
	policy := policyOf(parent)
	if policy != nil {
		c = rt.applyPolicy(policy)
	}
	rt.classifyRequest(func() string { return newKeyInto(&rt.keyBuf, c.http.tokenKeys) })
	if policy != nil && policy.idempotent {
		rt.idempotent = true
	}
	rt.body = newBodySource(req, c.http.bodyLimit)
	if c.adaptive.measures() && rt.t.latency != nil {
		rt.estimate = rt.t.latency.For(req.URL.Host)
	}
	rt.deadline = c.deadline(parent)
	rt.Context, rt.cancelLoop = withTotalDeadline(parent, c.clock, rt.deadline)
	rt.cancels = rt.Context != parent
	if fc := rt.firstCopy; fc != nil && fc.cancel != nil {
		// The fast path's attempt has a context of its own to end.
		rt.cancelAttempt = fc.cancel
		rt.cancels = rt.cancels || parent.Done() != nil
	}
	rt.reqCtx = rt.Context
	if rt.t.replaysHidden {
		// net/http's Transport replays some requests on its own; a trace
		// counts every write so those attempts are counted and charged.
		rt.tracer = newWriteTracer()
		rt.reqCtx = rt
		rt.ownTrace = traceKey != nil && httptrace.ContextClientTrace(parent) == nil
		if !rt.ownTrace {
			rt.reqCtx = httptrace.WithClientTrace(rt.Context, &rt.tracer.trace) // composes with the caller's trace
		}
	}

	n, last, reason := c.run(rt.Context, rt.deadline, rt.discard, rt.attempt)
	if r := fillReport(parent, n, reason, last); r != nil {
		r.IdempotencyKey = firstValue(rt.header, c.http.keyHeader)
	}
	if isGiveUp(reason) {
		noteGiveUp(parent, reason)
	}
	if !rt.sent {
		rt.body.closeUnsent()
	}
	if rt.resp == nil {
		rt.cancelAttempt()
		rt.cancelLoop()
		if last.err == nil && last.status != 0 {
			last.err = &StatusError{StatusCode: last.status}
		}
		return nil, newError(rt.Context, n, reason, last.err)
	}
	return rt.handBack(), nil
}

// applyPolicy gives the request the policy its context asks for.
func (rt *roundTrip) applyPolicy(p *requestPolicy) *config {
	c := rt.t.cfg // a copy: the Transport's own policy never changes
	for _, o := range p.opts {
		if o != nil {
			o(&c)
		}
	}
	if p.noRetry {
		c.maxAttempts = 1
		c.http.noKeys = true
	}
	if p.idempotent {
		c.http.noKeys = true
	}
	rt.c = &c
	return rt.c
}

// classifyRequest decides whether the request is idempotent or keyed, adding
// a key (made by newKey) to a POST or PATCH that has none.
func (rt *roundTrip) classifyRequest(newKey func() string) {
	c, req := rt.c, rt.orig
	rt.header = req.Header
	rt.idempotent = idempotentMethod(req.Method)
	if c.hasKey(req.Header) {
		rt.keyed = true
		return
	}
	if fc := rt.firstCopy; fc != nil && fc.keyVal[0] != "" {
		// The fast path's first attempt carried this key: keep it.
		rt.header = fc.req.Header
		rt.keyed, rt.keyAdded = true, true
		return
	}
	if c.needsKey(req.Method, req.Header) {
		rt.keyVal[0] = newKey()
		rt.header = withKey(req.Header, c.http.keyHeader, rt.keyVal[:])
		rt.keyed, rt.keyAdded = true, true
	}
}

// single makes one attempt for a request inside another retry loop. A key it
// adds comes from that loop, so the outer loop's attempts share it.
func (rt *roundTrip) single(lc *loopContext) (*http.Response, error) {
	rt.classifyRequest(func() string { return rt.c.formatKey(lc.nextKey()) })
	req := rt.orig
	if !sameHeader(rt.header, req.Header) {
		req = req.WithContext(req.Context())
		req.Header = rt.header
	}
	return rt.t.base.RoundTrip(req)
}

func sameHeader(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || len(v) != len(w) || (len(v) > 0 && &v[0] != &w[0]) {
			return false
		}
	}
	return true
}

// writeTracer counts every time the base transport writes the request, its
// own hidden replays included.
type writeTracer struct {
	trace  httptrace.ClientTrace
	writes atomic.Int32
}

func newWriteTracer() *writeTracer {
	w := &writeTracer{}
	w.trace.WroteRequest = func(httptrace.WroteRequestInfo) { w.writes.Add(1) }
	return w
}

// hidden returns the writes beyond the legs sent since the last call.
func (w *writeTracer) hidden(legs int) int {
	if w == nil {
		return 0
	}
	return max(0, int(w.writes.Swap(0))-legs)
}

// attempt sends the request once and classifies what came back.
func (rt *roundTrip) attempt(n int) outcome {
	var (
		resp *http.Response
		err  error
		legs = 1
	)
	if n == 1 && rt.first != nil {
		// Sent already by the fast path, its timer stopped.
		resp, err = rt.first.resp, rt.first.err
		rt.first, rt.sent = nil, true
	} else {
		var req *http.Request
		if req, err = rt.request(n); err != nil {
			return outcome{err: err, stop: ErrBodyNotReplayable}
		}
		rt.sent = true
		if rt.hedgeable() {
			resp, err, legs = rt.hedged(req)
		} else {
			resp, err = rt.send(req)
		}
		if rt.attemptTimer != nil {
			rt.attemptTimer.Stop()
			rt.attemptTimer = nil
			if err != nil && endedByTimer(req.Context(), rt.Context) {
				err = &AttemptTimeoutError{Err: err}
			}
		}
	}
	o := outcome{hidden: rt.tracer.hidden(legs), hedges: legs - 1}
	if err != nil {
		rt.cancelAttempt()
		o.err = err
		rt.classifyError(err, &o)
	} else {
		rt.resp = resp
		o.status = resp.StatusCode
		rt.classifyResponse(resp, &o)
	}
	if o.retry && !rt.body.replayable() {
		o.stop = ErrBodyNotReplayable
	}
	return o
}

// request builds attempt n's request: a shallow copy of the caller's, never
// the caller's itself, with its own context, headers and body.
func (rt *roundTrip) request(n int) (*http.Request, error) {
	ctx := rt.reqCtx
	rt.cancelAttempt = noop
	if d := rt.attemptTimeout(); d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		rt.attemptTimer = afterFunc(rt.c.clock, d, cancel)
		rt.cancelAttempt = cancel
		// A context under a cancellable parent must be cancelled to be
		// released, so the response body will do it; under a parent that
		// is never cancelled it needs nothing once its timer is stopped.
		rt.cancels = rt.cancels || rt.Context.Done() != nil
	}
	if n == 1 {
		body, get := rt.body.first()
		if ctx == rt.orig.Context() && !rt.keyAdded && body == rt.orig.Body {
			// Nothing to change: the caller's request goes as it is.
			return rt.orig, nil
		}
		req := rt.orig.WithContext(ctx)
		req.Header = rt.header
		req.Body, req.GetBody = body, get
		return req, nil
	}
	if ctx == rt.orig.Context() && !rt.keyAdded && rt.body.orig == nil {
		return rt.orig, nil // no body to replay
	}
	req := rt.orig.WithContext(ctx)
	req.Header = rt.header
	body, get, err := rt.body.again(ctx)
	if err != nil {
		rt.cancelAttempt()
		return nil, err
	}
	req.Body, req.GetBody = body, get
	return req, nil
}

// attemptTimeout is the time the next attempt may wait for its response.
func (rt *roundTrip) attemptTimeout() time.Duration {
	return rt.t.attemptTimeoutFor(rt.c, rt.estimate, rt.deadline)
}

// send makes one request of the base transport, timing it for the host's
// latency estimate when one is kept.
func (rt *roundTrip) send(req *http.Request) (*http.Response, error) {
	return rt.t.sendMeasured(rt.c, rt.estimate, req)
}

// classifyError decides whether a transport error may be retried.
func (rt *roundTrip) classifyError(err error, o *outcome) {
	if !rt.c.classifier(err) {
		return
	}
	if rt.idempotent || rt.keyed || neverSent(err) {
		o.retry = true
		return
	}
	o.stop = ErrNotIdempotent
}

// neverSent reports whether err proves the request never reached the
// server: the connection was never made.
func neverSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && (op.Op == "dial" || op.Op == "proxyconnect")
}

// classifyResponse decides whether a response may be retried.
func (rt *roundTrip) classifyResponse(resp *http.Response, o *outcome) {
	code := resp.StatusCode
	safe := rt.idempotent || rt.keyed
	honourRetryAfter := false
	switch {
	case code == http.StatusTooManyRequests, code == http.StatusServiceUnavailable:
		o.bad, o.retry, honourRetryAfter = true, safe, true
	case code == http.StatusBadGateway, code == http.StatusGatewayTimeout:
		o.bad, o.retry = true, safe
	case code == http.StatusInternalServerError:
		o.bad, o.retry = true, safe && rt.c.http.retry500
	case code == http.StatusConflict && rt.keyed:
		// The server says the first attempt with this key is still in progress.
		o.retry, honourRetryAfter = true, true
	case code >= 500:
		o.bad = true
	}
	if o.bad && !safe && code != http.StatusInternalServerError && code < 505 {
		o.stop = ErrNotIdempotent
	}
	if len(resp.Header[PushbackHeader]) > 0 {
		o.bad, o.retry, o.stop = true, false, ErrPushback
		return
	}
	if o.retry && honourRetryAfter {
		if v := resp.Header.Get("Retry-After"); v != "" {
			if d, ok := ParseRetryAfter(v, rt.c.clock.Now()); ok {
				o.floor, o.hasFloor = d, true
			}
		}
	}
}

// discard releases a response that is about to be retried.
func (rt *roundTrip) discard() {
	if rt.resp != nil {
		drain(rt.resp, rt.c.http.drainLimit)
		rt.resp = nil
	}
	rt.cancelAttempt()
}

// handBack returns the last response with its body intact; closing the body
// ends the attempt's and the loop's contexts.
func (rt *roundTrip) handBack() *http.Response {
	resp := rt.resp
	if rt.cancels {
		cancelWhenClosed(resp, rt.cancelAttempt, rt.cancelLoop)
	}
	return resp
}
