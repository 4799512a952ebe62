package retry

import (
	"context"
	"time"
)

// Caller runs the calls of a protocol other than HTTP on the loop behind
// Transport and Do, so that every protocol gets the same policy from the
// same Options: backoff, attempts, the total deadline, attempt timeouts
// (fixed or adaptive, learned per target), the retry budget (a
// NewBudget(0.1, 1, 20) of the Caller's own unless WithBudget), riding through
// outages per target, hedging, one layer, Trace and Report. Module
// github.com/exactlyonce/retry/grpcretry builds its gRPC interceptors on
// it; an application has no need of it otherwise.
//
// The protocol makes each attempt and says what came back in a Verdict; the
// Caller decides the rest. A Caller is safe for concurrent use and
// immutable once built.
type Caller struct {
	cfg     config
	gates   gateSet        // per target (see RideThrough)
	latency *latencyByHost // per target, when adaptive timeouts or hedging are on
}

// NewCaller returns a Caller with the policy given by opts. Unless
// WithBudget is given, it has a budget of its own, NewBudget(0.1, 1, 20).
// WithClassifier, and the options of HTTP bodies and status codes
// (WithBodyBufferLimit, WithRetryStatuses), do not apply: the protocol
// classifies its own answers.
func NewCaller(opts ...Option) *Caller {
	c := newConfig(opts)
	if !c.budgetSet {
		c.budget = newDefaultBudget()
	}
	cl := &Caller{cfg: c}
	if c.adaptive.measures() {
		cl.latency = newLatencyByHost(c.adaptive.quantile, c.adaptive.hedgeQuantile)
	}
	return cl
}

// Budget returns the Caller's retry budget (nil when unlimited), for its
// statistics.
func (cl *Caller) Budget() *Budget {
	b, _ := cl.cfg.budget.(*Budget)
	return b
}

// Dependencies returns what the Caller knows of each target it called (see
// RideThrough), for monitoring.
func (cl *Caller) Dependencies() []DependencyStats { return cl.gates.stats() }

// Call describes one logical call to Caller.Run.
type Call struct {
	// Target names the dependency: calls with the same Target share its
	// gate (see RideThrough) and its latency estimate.
	Target string
	// Method names the operation. With Target it is the call's identity:
	// inside another retry loop, the call's key is made from the loop and
	// the identity, so it stays the same on every attempt of the loop.
	Method string
	// Idempotent: the call is safe to repeat as it is, and needs no key.
	Idempotent bool
	// Key is the call's idempotency key. Set it to keep a key of the
	// caller's own; left empty, Run makes one before the first attempt when
	// the call needs it (not Idempotent, keys not turned off with
	// WithoutKeys, WithIdempotent or WithoutRetries), in the form the
	// Options say (WithTokenKeys), and sets it here. A call that is neither
	// Idempotent nor keyed is not retried after a failure worth retrying:
	// repeating it could repeat its effect, so Run stops with
	// ErrNotIdempotent.
	Key string
	// Hedgeable: an attempt may be made twice at once (see Hedging): the
	// attempt function keeps each copy's result to itself when told it is
	// hedged. Only idempotent or keyed calls are hedged.
	Hedgeable bool
	// Hold: the successful attempt's context must outlive Run (a stream
	// read after it): Run leaves it, and the total deadline's, to Release.
	// Held calls are never hedged.
	Hold bool
	// Options are the call's own options, applied after the Caller's and
	// those of NewContext.
	Options []Option

	held [2]context.CancelFunc
}

// Release ends the contexts that Run left to a Hold call that succeeded
// (its attempt's and its total deadline's): call it once the call is over
// (its stream ended). It does nothing for other calls, and nothing the
// second time.
func (call *Call) Release() {
	for i, cancel := range call.held {
		if cancel != nil {
			call.held[i] = nil
			cancel()
		}
	}
}

// Verdict is what one attempt of a Call tells the Caller. The zero Verdict
// is a success.
type Verdict struct {
	// Err is the attempt's failure; nil for a success.
	Err error
	// Retry: the failure is transient, another attempt may succeed.
	Retry bool
	// Failing: the attempt says its dependency is failing (as a 5xx or a
	// 429 does), even when it is not retried; a rejection of the call (as
	// a 4xx) is not. A retried failure always counts as failing.
	Failing bool
	// Answered: the dependency answered the attempt, whatever it answered
	// (a rejection of the call, as a 4xx; an earlier copy still running,
	// Pending): it is alive, so the attempt ends its streak of failures and,
	// as a probe, its outage (see RideThrough). A success always is an
	// answer, and a Failing verdict counts against its dependency whatever
	// this says; an attempt that got no answer (cancelled on the caller's
	// side, say) leaves it false and tells the gate nothing.
	Answered bool
	// Pending: the server says an earlier copy of the call, with the same
	// key, is still running. The next attempt waits for its outcome, which
	// is neither a retry the budget pays for nor one the attempt limit
	// counts (see RideThrough).
	Pending bool
	// RetryAfter, when HasRetryAfter, is the server's requested wait: a
	// floor for the next one. One over WithMaxRetryAfter, or ending past
	// the deadline, stops the loop (ErrRetryAfterTooLong, ErrDeadline).
	RetryAfter    time.Duration
	HasRetryAfter bool
	// Stop, when not nil, ends the loop now with this reason (ErrPushback,
	// for one).
	Stop error
	// Result is the protocol's own: Run hands back the Verdict of the
	// attempt that ended the loop (a hedge's winning copy) with it.
	Result any
}

// good reports whether v ends an attempt well.
func (v Verdict) good() bool { return v.Err == nil && !v.Retry && !v.Failing }

// answered reports whether the attempt got an answer from its dependency
// (a success or a rejection), whose time says how fast it is.
func (v Verdict) answered() bool { return v.Err == nil || !(v.Retry || v.Failing) }

// Run runs call until an attempt succeeds or the policy stops, and returns
// the Verdict of the attempt that ended the loop and nil, or an *Error
// with the number of attempts, the reason and the last Verdict's Err (nil
// when the loop stopped before any attempt, as when its dependency is down
// for longer than MaxWait). attempt makes attempt n (from 1) under ctx, the
// attempt's context: bounded by the total deadline and the attempt
// timeout, ended when the attempt is over (for a Hold call's success, at
// Release). hedge tells that the attempt runs beside another copy of it
// (see Hedging): it then keeps its result to itself (in Verdict.Result)
// and must be safe to run concurrently with the other copy. An attempt cut
// off by its timeout becomes a retryable failure whose Err is an
// *AttemptTimeoutError, whatever it returned. A RetryAfter that would end
// past the deadline ends the loop at once: Run hands back that attempt's
// Verdict (its Result included) and an *Error whose Reason is
// ErrDeadline, whose Last is the Verdict's Err unchanged, and which
// matches context.DeadlineExceeded.
//
// Run is a retry loop of its own for the keyed calls its attempts make
// (a Transport's POST, another Caller's call): each gets a key made from
// the loop, the call's identity and its rank in the attempt, the same on
// every attempt (see Do); both copies of a hedged attempt give the same
// call the same key.
//
// Inside another retry loop (found through ctx), Run makes a single
// attempt and returns its Err for the enclosing loop to decide, marked
// Permanent when it must not be retried and RetryAfter when the server
// asked for a wait. A loop it gave up on is recorded in ctx for
// pushback.Value (github.com/exactlyonce/retry/pushback).
func (cl *Caller) Run(ctx context.Context, call *Call, attempt func(ctx context.Context, n int, hedge bool) Verdict) (Verdict, error) {
	var r callRun
	r.start(cl, ctx, call)
	return r.run(call, attempt)
}

// callRun is one logical call through a Caller, from its first attempt to
// what Run hands back. It lives on Run's stack.
type callRun struct {
	cl        *Caller
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
	last       Verdict      // the last attempt's
}

// start decides what policy applies to the call and readies its loop.
func (r *callRun) start(cl *Caller, parent context.Context, call *Call) {
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
func (r *callRun) run(call *Call, attempt func(context.Context, int, bool) Verdict) (Verdict, error) {
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
func (r *callRun) attempt(attempt func(context.Context, int, bool) Verdict, n, left int) outcome {
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
	if r.est != nil && v.answered() {
		r.est.Observe(c.clock.Since(start))
	}
	v = r.settle(v)
	c.trace.attemptEnd(ctx, n, nil, v.Err)
	return r.judge(v, 0)
}

// hedgedAttempt makes attempt n as one copy and, if that has not answered
// after the hedge delay and the budget allows, a second; the first good
// Verdict wins; left is how many sends the attempt limit leaves it.
func (r *callRun) hedgedAttempt(attempt func(context.Context, int, bool) Verdict, n, left int) outcome {
	c := r.c
	h := &callHedge{attempt: attempt, c: c, est: r.est, n: n, loop: r.loop}
	ctx := r.bound.begin(r.ctx, c.clock, c.boundFor(r.est, r.deadline, false, left, r.dep))
	w, legs, _ := hedge(ctx, r.ctx, c, c.adaptive.hedgeDelayFor(r.est),
		hedgeSends[Verdict]{prepare: h.prepare, good: Verdict.good})
	r.bound.also(w.cancel)
	return r.judge(r.settle(w.res), legs-1)
}

// callHedge is what the copies of a Caller's hedged attempt need; never
// the callRun, which stays on Run's stack.
type callHedge struct {
	attempt func(context.Context, int, bool) Verdict
	c       *config
	est     *latencyEstimate
	n       int
	loop    *loopContext
}

// prepare readies copy i of the attempt. The second copy ranks its nested
// keyed calls on its own, sharing the loop's keys: each of its calls gets
// the key the same call of the first copy gets.
func (h *callHedge) prepare(ctx context.Context, i int) (func() Verdict, error) {
	if i == 1 {
		ctx = h.loop.fork(ctx)
	}
	ctx = h.c.trace.attemptStart(ctx, h.n+i, i == 1, nil)
	return func() Verdict {
		start := h.c.clock.Now()
		v := h.attempt(ctx, h.n+i, true)
		if h.est != nil && v.answered() {
			h.est.Observe(h.c.clock.Since(start))
		}
		h.c.trace.attemptEnd(ctx, h.n+i, nil, v.Err)
		return v
	}, nil
}

// settle stops the attempt's timer; an attempt it cut off timed out,
// whatever it returned.
func (r *callRun) settle(v Verdict) Verdict {
	if !r.bound.settle(r.est) {
		return v
	}
	return Verdict{Err: &AttemptTimeoutError{Timeout: r.bound.timeout, Err: v.Err}, Retry: true, Failing: true}
}

// judge turns an attempt's Verdict into the loop's outcome; hedges is the
// number of extra copies sent.
func (r *callRun) judge(v Verdict, hedges int) outcome {
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
func (r *callRun) finish(call *Call, n int, last outcome, reason error) (Verdict, error) {
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
		call.held = [2]context.CancelFunc{r.bound.cancel, r.cancelLoop}
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
