package retry

import (
	"context"
	"time"

	"github.com/exactlyonce/retry/internal/protocolcore"
)

// callSpec is a call to a caller (protocol.Call): defined once, in
// internal/protocolcore, so that the loop works on the protocol's own value.
type callSpec = protocolcore.Call[Option]

// verdict is what one attempt of a call tells the caller
// (protocol.Verdict).
type verdict = protocolcore.Verdict

func init() {
	protocolcore.NewCaller = func(opts any) any { return newCaller(opts.([]Option)) }
}

// caller runs the calls of a protocol other than HTTP on the loop behind
// Transport and Do: it is package protocol's Caller (see there), which
// holds one; its code is here, for it needs the policy's.
type caller struct {
	cfg     config
	gates   gateSet        // per target (see RideThrough)
	latency *latencyByHost // per target, when adaptive timeouts or hedging are on
}

// newCaller returns a caller with the policy given by opts and, unless
// WithBudget is given, a budget of its own, NewBudget(0.1, 1, 20).
func newCaller(opts []Option) *caller {
	c := newConfig(opts)
	if !c.budgetSet {
		c.budget = newDefaultBudget()
	}
	cl := &caller{cfg: c}
	if c.adaptive.measures() {
		cl.latency = newLatencyByHost(c.adaptive.quantile, c.adaptive.hedgeQuantile)
	}
	return cl
}

// Budget returns the caller's retry budget (nil when unlimited).
func (cl *caller) Budget() *Budget {
	b, _ := cl.cfg.budget.(*Budget)
	return b
}

// Dependencies returns what the caller knows of each target it called.
func (cl *caller) Dependencies() []DependencyStats { return cl.gates.stats() }

// goodVerdict reports whether v ends an attempt well.
func goodVerdict(v verdict) bool { return v.Err == nil && !v.Retry && !v.Failing }

// answeredVerdict reports whether the attempt got an answer from its
// dependency (a success or a rejection), whose time says how fast it is.
func answeredVerdict(v verdict) bool { return v.Err == nil || !(v.Retry || v.Failing) }

// Run runs call until an attempt succeeds or the policy stops (see
// protocol.Caller.Run).
func (cl *caller) Run(ctx context.Context, call *callSpec, attempt func(ctx context.Context, n int, hedge bool) verdict) (verdict, error) {
	var r callRun
	r.start(cl, ctx, call)
	return r.run(call, attempt)
}

// callRun is one logical call through a Caller, from its first attempt to
// what Run hands back. It lives on Run's stack.
type callRun struct {
	cl        *caller
	c         *config         // the Caller's policy, or a copy changed by the call's options
	parent    context.Context // the caller's context
	key       string          // the call's key; "" for none
	nested    bool            // inside another retry loop: one attempt, errors for it to decide
	safe      bool            // idempotent or keyed: every transient failure may be retried
	hedgeable bool            // the call's attempts may be hedged
	hold      bool            // the call's successful attempt outlives Run

	est *latencyEstimate // the target's latency, when measured
	dep *dependency      // the target's gate; nil when riding through is off

	ctx        context.Context // parent, bounded by the total deadline and marked as a loop
	loop       *loopContext    // the mark: the keys of the keyed calls nested in the attempts
	deadline   time.Time
	cancelLoop context.CancelFunc
	bound      attemptBound // the current attempt's timeout and context
	last       verdict      // the last attempt's
}

// start decides what policy applies to the call and readies its loop.
func (r *callRun) start(cl *caller, parent context.Context, call *callSpec) {
	r.cl, r.c, r.parent, r.hold = cl, &cl.cfg, parent, call.Hold
	r.cancelLoop, r.bound.cancel = noop, noop
	lc := loopOf(parent)
	if policy := policyOf(parent); policy != nil || lc != nil || len(call.Options) > 0 {
		c := new(config)
		*c = cl.cfg // a copy: the Caller's own policy never changes
		c.applyAll(policy)
		c.applyAll(call.Options)
		if lc != nil {
			c.maxAttempts = 1
			c.adaptive.hedge = false
		}
		r.c = c
	}
	c := r.c
	r.nested = lc != nil
	idempotent := call.Idempotent || c.http.idempotent
	switch {
	case call.Key != "", idempotent, c.http.noKeys:
	case lc != nil:
		call.Key = c.formatKey(lc.keys.keyForIdentity(identity(call.Target, call.Method)))
	default:
		call.Key = newKey(c.http.tokenKeys)
	}
	r.key = call.Key
	r.safe = idempotent || r.key != ""
	r.hedgeable = c.adaptive.hedge && call.Hedgeable && !call.Hold && r.safe && c.maxAttempts > 1
	if c.budget != nil {
		c.budget.Requested()
	}
	if cl.latency != nil {
		r.est = cl.latency.For(call.Target)
	}
	if !c.ride.off {
		r.dep = cl.gates.get(call.Target, cl.cfg.clock)
	}
	r.deadline = c.deadline(parent)
	r.ctx, r.cancelLoop = withTotalDeadline(parent, c.clock, r.deadline)
	r.loop = markLoop(r.ctx)
	r.ctx = c.trace.start(r.loop, nil)
}

// run runs the loop and hands back its result. A panic (in the attempt, or
// in the policy's own code) releases what the call holds and is told to the
// trace (Panicked) before it goes on.
func (r *callRun) run(call *callSpec, attempt func(context.Context, int, bool) verdict) (verdict, error) {
	done := false
	defer func() {
		if !done {
			r.release()
			if r.c.trace != nil {
				panicked(r.ctx, r.c.trace, recover())
			}
		}
	}()
	n, last, reason := r.c.run(r.ctx, r.deadline, r.dep, func(n, left int) outcome {
		return r.attempt(attempt, n, left)
	}, nil, r.discard, nil)
	done = true
	return r.finish(call, n, last, reason)
}

// attempt makes attempt n, hedged when it may be; left is how many sends
// the attempt limit leaves it.
func (r *callRun) attempt(attempt func(context.Context, int, bool) verdict, n, left int) outcome {
	if n > 1 {
		// The keyed calls nested in this attempt rank again from the
		// first, so each gets the key it had on the first attempt.
		r.loop.keys.newAttempt()
	}
	if left > 1 && r.hedgeable {
		return r.hedgedAttempt(attempt, n, left)
	}
	c := r.c
	ctx := c.trace.attemptStart(r.bound.begin(r.ctx, c.clock, c.boundFor(r.est, r.deadline, false, left, r.dep)), n, false, nil)
	var start time.Time
	if r.est != nil {
		start = c.clock.Now()
	}
	v := attempt(ctx, n, false)
	if r.est != nil && answeredVerdict(v) {
		r.est.Observe(c.clock.Since(start))
	}
	v = r.settle(v)
	c.trace.attemptEnd(ctx, n, nil, v.Err)
	return r.judge(v, 0)
}

// hedgedAttempt makes attempt n as one copy and, if that has not answered
// after the hedge delay and the budget allows, a second; the first good
// Verdict wins; left is how many sends the attempt limit leaves it.
func (r *callRun) hedgedAttempt(attempt func(context.Context, int, bool) verdict, n, left int) outcome {
	c := r.c
	h := &callHedge{attempt: attempt, c: c, est: r.est, n: n, loop: r.loop}
	ctx := r.bound.begin(r.ctx, c.clock, c.boundFor(r.est, r.deadline, false, left, r.dep))
	w, legs, _ := hedge(ctx, r.ctx, c, c.adaptive.hedgeDelayFor(r.est),
		hedgeSends[verdict]{prepare: h.prepare, good: goodVerdict})
	r.bound.also(w.cancel)
	return r.judge(r.settle(w.res), legs-1)
}

// callHedge is what the copies of a Caller's hedged attempt need; never
// the callRun, which stays on Run's stack.
type callHedge struct {
	attempt func(context.Context, int, bool) verdict
	c       *config
	est     *latencyEstimate
	n       int
	loop    *loopContext
}

// prepare readies copy i of the attempt. The second copy ranks its nested
// keyed calls on its own, sharing the loop's keys: each of its calls gets
// the key the same call of the first copy gets.
func (h *callHedge) prepare(ctx context.Context, i int) (func() verdict, error) {
	if i == 1 {
		ctx = h.loop.fork(ctx)
	}
	ctx = h.c.trace.attemptStart(ctx, h.n+i, i == 1, nil)
	return func() verdict {
		start := h.c.clock.Now()
		v := h.attempt(ctx, h.n+i, true)
		if h.est != nil && answeredVerdict(v) {
			h.est.Observe(h.c.clock.Since(start))
		}
		h.c.trace.attemptEnd(ctx, h.n+i, nil, v.Err)
		return v
	}, nil
}

// settle stops the attempt's timer; an attempt it cut off timed out,
// whatever it returned.
func (r *callRun) settle(v verdict) verdict {
	if !r.bound.settle(r.est) {
		return v
	}
	return verdict{Err: &AttemptTimeoutError{Timeout: r.bound.timeout, Err: v.Err}, Retry: true, Failing: true}
}

// judge turns an attempt's Verdict into the loop's outcome; hedges is the
// number of extra copies sent.
func (r *callRun) judge(v verdict, hedges int) outcome {
	r.last = v
	o := outcome{
		err: v.Err, retry: v.Retry, bad: v.Failing, stop: v.Stop, pending: v.Pending, answered: v.Answered,
		floor: v.RetryAfter, hasFloor: v.HasRetryAfter, hedges: hedges,
	}
	if o.retry && o.stop == nil && !r.safe {
		// Worth another attempt, but repeating the call could repeat its
		// effect.
		o.retry, o.stop = false, ErrNotIdempotent
	}
	return o
}

// discard releases a failed attempt before the wait for the next one.
func (r *callRun) discard(wait time.Duration) time.Duration {
	r.bound.end()
	return wait
}

// release ends the contexts the call made.
func (r *callRun) release() {
	r.bound.end()
	r.cancelLoop()
}

// finish reports the outcome, releases the call's contexts (or leaves them
// to Release), and hands back the last Verdict and the error.
func (r *callRun) finish(call *callSpec, n int, last outcome, reason error) (verdict, error) {
	c, key := r.c, r.key
	if !r.nested {
		if rep := c.fillReport(n, reason, last); rep != nil {
			rep.IdempotencyKey = key
		}
		if isGiveUp(reason) {
			noteGiveUp(r.parent, reason)
		}
	}
	if c.trace != nil {
		c.trace.end(r.ctx, Report{Attempts: n, Reason: reason, Err: last.err, IdempotencyKey: key})
	}
	ctxErr := loopContextErr(r.ctx, c.clock, r.deadline)
	if reason == nil && r.hold {
		protocolcore.SetHeld(call, r.bound.cancel, r.cancelLoop)
	} else {
		r.release()
	}
	switch {
	case reason == nil:
		return r.last, nil
	case r.nested && last.err != nil:
		return r.last, markedFor(last)
	}
	return r.last, newError(ctxErr, n, reason, unmark(last.err))
}

// markedFor is the error of a single attempt made inside another loop,
// marked for that loop to decide as this one would have.
func markedFor(o outcome) error {
	switch {
	case o.stop != nil || !o.retry:
		return Permanent(o.err)
	case o.hasFloor:
		return RetryAfter(o.floor, o.err)
	}
	return o.err
}
