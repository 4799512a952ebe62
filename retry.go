package retry

import (
	"context"
	"errors"
)

// Do calls op until it succeeds, fails permanently, or the policy gives up,
// and returns nil or an *Error that keeps the last error of op.
//
// Each call of op gets a context bounded by the total deadline (the ctx's or
// WithTotalTimeout's, whichever is sooner) and by WithAttemptTimeout. Between
// attempts Do waits as the Backoff says (full jitter by default), at least as
// long as a RetryAfter marker asks, and never past the deadline: when a wait
// would end after it, Do returns at once, with an *Error whose Reason is
// ErrDeadline, whose Last is op's last error as op returned it (the
// server's status, details and all, for errors.As), and which matches
// context.DeadlineExceeded. A context cancelled during a wait returns at
// once too.
//
// The defaults are 4 attempts, backoff.FullJitter(100*time.Millisecond,
// 10*time.Second), every error retried but those IsPermanent recognises
// (see WithClassifier), no budget and no timeouts.
//
// One layer: inside another retry loop of this package (found through ctx),
// Do calls op once and returns its error unchanged, markers included, so the
// outer loop decides and attempts never multiply. Likewise a Transport that
// op calls with its context makes a single attempt per call, under the
// request's own policy (its NewContext options), and gives
// a POST or PATCH that needs a key one that is the same on every attempt of
// the loop: the key of a request is made from the loop, the request's
// method and URL, and its rank among the requests with the same method and
// URL in the attempt (the second POST to /charges gets the same key on every
// attempt, and not the first one's). Requests with the same method and URL
// sent concurrently within one attempt are ranked in the order they reach the
// Transport: give those keys of their own. Work that op detaches from the
// loop (context.WithoutCancel) is outside it, and gets neither the loop's
// keys nor its single attempt; this is told by the detached context's
// never ending, so it needs a loop whose context can end (a deadline, or a
// cancellable ctx).
func Do(ctx context.Context, op func(context.Context) error, opts ...Option) error {
	c := configFor(opts)
	if inLoop(ctx) {
		return c.once(ctx, op)
	}
	if c.budget != nil {
		c.budget.Requested()
	}
	deadline := c.deadline(ctx)
	ctx, cancel := withTotalDeadline(ctx, c.clock, deadline)
	defer cancel() // also when op panics: no timer outlives the call
	lc := markLoop(ctx)
	ctx = c.trace.start(lc, nil)
	ended := false
	if c.trace != nil {
		defer func() {
			if !ended {
				panicked(ctx, c.trace, recover())
			}
		}()
	}
	var gate *dependency
	if c.budget != nil && !c.ride.off {
		gate = c.budget.dependency(c.clock)
	}
	n, last, reason := c.run(ctx, deadline, gate, func(n, left int) outcome {
		if n > 1 {
			lc.keys.newAttempt()
		}
		actx, acancel := c.attemptContext(ctx, deadline, left, gate)
		defer acancel() // also when op panics: no timer outlives the attempt
		return c.classifyErr(c.tracedAttempt(actx, n, op))
	}, nil, nil, nil)
	var err error
	if reason != nil {
		last.err = unmark(last.err)
		err = newError(loopContextErr(ctx, c.clock, deadline), n, reason, last.err)
		if isGiveUp(reason) {
			noteGiveUp(ctx, reason)
		}
	}
	c.fillReport(n, reason, last)
	ended = true
	if c.trace != nil {
		c.trace.end(ctx, Report{Attempts: n, Reason: reason, Err: last.err})
	}
	return err
}

// panicked tells the trace that the call panicked with value (recovered
// by the caller's deferred function), and lets the panic go on.
func panicked(ctx context.Context, t *Trace, value any) {
	t.panicked(ctx, value)
	if value != nil {
		panic(value)
	}
}

// DoValue is Do for an operation that returns a value: it returns the value
// of the successful call, or the zero value and an *Error.
func DoValue[T any](ctx context.Context, op func(context.Context) (T, error), opts ...Option) (T, error) {
	var v T
	err := Do(ctx, func(ctx context.Context) error {
		r, err := op(ctx)
		if err == nil {
			v = r
		}
		return err
	}, opts...)
	if err != nil {
		var zero T
		return zero, err
	}
	return v, nil
}

// once runs op a single time under the policy's timeouts, for a loop
// nested in another.
func (c *config) once(ctx context.Context, op func(context.Context) error) error {
	deadline := c.deadline(ctx)
	ctx, cancel := withTotalDeadline(ctx, c.clock, deadline)
	defer cancel()
	actx, acancel := c.attemptContext(ctx, deadline, 2, nil) // the outer loop may try again
	defer acancel()
	return op(actx)
}

// tracedAttempt is attempt n, told to the trace when there is one.
func (c *config) tracedAttempt(ctx context.Context, n int, op func(context.Context) error) error {
	if c.trace == nil {
		return op(ctx)
	}
	actx := c.trace.attemptStart(ctx, n, false, nil)
	err := op(actx)
	c.trace.attemptEnd(actx, n, nil, err)
	return err
}

// classifyErr turns an operation's error into the loop's outcome.
func (c *config) classifyErr(err error) outcome {
	if err == nil {
		return outcome{}
	}
	o := outcome{err: err}
	var done *Error
	switch {
	case IsPermanent(err):
	case errors.As(err, &done):
		// Another loop already retried (or refused to): one layer retries.
	default:
		if d, ok := retryAfterOf(err); ok {
			o.retry, o.floor, o.hasFloor = true, d, true
		} else {
			o.retry = c.classifier(err)
		}
	}
	return o
}
