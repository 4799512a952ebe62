package retry

import (
	"context"
	"log/slog"
	"time"
)

// outcome is what one attempt tells the loop.
type outcome struct {
	// err is the attempt's failure; nil with retry false means success.
	err error
	// status is the HTTP status of a response, for hooks and logs.
	status int
	// retry reports a transient failure that another attempt may not meet.
	retry bool
	// bad marks a response that is a failure (a 5xx, a 429) even when it is
	// not retried: it must not count as a success for the budget.
	bad bool
	// floor is the minimum wait before the next attempt, when hasFloor.
	floor    time.Duration
	hasFloor bool
	// stop, when non-nil, ends the loop now with this reason.
	stop error
	// hedges counts hedged attempts, already charged when they were sent.
	hedges int
	// pending: the server says an earlier copy of the request is still
	// running (a keyed 409 with Retry-After); the next attempt waits for
	// its outcome.
	pending bool
	// answered: the dependency answered, whatever it answered (see
	// protocol.Verdict.Answered; an HTTP response always is one).
	answered bool
	// unproven: stop is ErrNotIdempotent for a keyed request whose server
	// has not shown yet that it honours keys; a retry could get past the
	// failure if it does (see the loop's prove).
	unproven bool
}

// unhealthy reports whether the attempt says its dependency is failing: a
// 5xx or 429, or a transport failure worth retrying. A rejection (4xx) or
// an earlier copy still running says nothing of the kind.
func (o outcome) unhealthy() bool {
	return o.bad || (o.err != nil && (o.retry || o.stop == ErrNotIdempotent))
}

func (o outcome) failed() bool { return o.err != nil || o.retry || o.bad }

// loop is one run of the retry loop behind Do and Transport: the policy,
// the optional gate of the dependency, and what the attempts so far told.
type loop struct {
	c        *config
	ctx      context.Context // carries the total deadline
	deadline time.Time       // the total deadline; zero: none
	gate     *dependency     // holds attempts back while the dependency is down; nil: never
	w        waiter          // what the gate knows of this request

	sent    int           // requests sent, hedges included
	tries   int           // of those, the ones the attempt limit counts
	prev    time.Duration // the last backoff wait
	charged int           // retries paid for by the budget so far
	// unsent: the budget paid for the next attempt, which has not gone yet;
	// if it never goes, the token goes back.
	unsent    bool
	probeOut  bool      // the attempt out now is the gate's probe
	waitCause string    // why the next wait is as long as it is, for the trace
	waitFrom  time.Time // when waiting for an earlier copy began
	waits     int       // the waits for an earlier copy so far: their backoff grows with each
	start     time.Time // for hooks: when the first attempt began
	observed  bool      // hooks or a logger are set
}

// run calls attempt (numbered from 1) until it succeeds or the policy stops,
// and returns the number of attempts, the last outcome and the reason for
// stopping (nil on success). attempt is told how many sends the attempt
// limit leaves it (a hedge needs two). gate may be nil. ready, if not nil,
// says whether another attempt can be made (its body can be had again),
// before the budget is asked for it. discard, if not nil, is called when a
// retry has been decided, before the wait, to release what the failed
// attempt holds; it may take part of the wait and returns what is left of it.
// prove, if not nil, is called for an unproven outcome that the attempt
// limit would let be retried: it waits for the evidence that the request's
// server honours its key and, if it comes, returns the outcome judged again
// and true.
//
// The funcs are parameters, never kept in the loop's state: a Transport's
// round trip then stays on its goroutine's stack.
func (c *config) run(ctx context.Context, deadline time.Time, gate *dependency, attempt func(n, left int) outcome,
	ready func() bool, discard func(wait time.Duration) time.Duration, prove func(o outcome) (outcome, bool)) (int, outcome, error) {
	l := loop{c: c, ctx: ctx, deadline: deadline, gate: gate}
	l.w = waiter{deadline: deadline, maxWait: c.ride.maxWait, maxWaiters: c.ride.maxWaiters}
	if l.observed = c.logger != nil || c.trace != nil; l.observed {
		l.start = c.clock.Now()
	}
	defer l.cleanup()
	return l.run(attempt, ready, discard, prove)
}

func (l *loop) run(attempt func(n, left int) outcome, ready func() bool, discard func(wait time.Duration) time.Duration,
	prove func(o outcome) (outcome, bool)) (int, outcome, error) {
	var last outcome
	for {
		probe, err := l.admit()
		if err != nil {
			return l.sent, last, err
		}
		l.w.probed = l.w.probed || probe
		left := l.c.maxAttempts - l.tries
		if probe {
			left = 1 // a probe is one request, never hedged
		}
		l.probeOut, l.unsent = probe, false
		var sentAt time.Time
		if l.gate != nil {
			sentAt = l.c.clock.Now()
		}
		o := attempt(l.sent+1, left)
		l.probeOut = false
		l.sent += 1 + o.hedges
		if !o.pending { // a wait for an earlier copy is no attempt of the request's
			l.tries += 1 + o.hedges
		}
		ticket := l.w.ticket
		l.w.ticket = 0
		if o.err != nil && l.ctx.Err() != nil {
			// The request's own deadline or cancellation cut the attempt:
			// that says nothing of the dependency.
			l.gate.unjudged(probe, ticket)
		} else {
			l.gate.observe(o, probe, sentAt, ticket)
		}
		last = o
		if !o.failed() {
			l.succeeded(o)
			return l.sent, o, nil
		}
		var wait time.Duration
		var reason error
		proven := true
		if o.unproven && prove != nil && l.tries < l.c.maxAttempts && l.ctx.Err() == nil {
			if o, proven = prove(o); proven {
				last = o
			}
		}
		if proven {
			wait, reason = l.decide(o, ready)
		} else {
			// The wait for the server to show it honours the request's
			// key ended without it, in time or not: the reason is still
			// that the request may have reached it.
			reason = o.stop
		}
		l.report(o, wait, reason)
		if reason != nil {
			return l.sent, o, reason
		}
		planned := wait
		if discard != nil {
			wait = discard(wait)
		}
		// A dependency that went down and answers again while the request
		// waits out its backoff ends the wait: from then on, the release
		// after the recovery paces the request, not its backoff. A wait
		// the server asked for (Retry-After, an earlier copy's outcome) is
		// no backoff: it lasts.
		var wake <-chan struct{}
		if !o.hasFloor && !o.pending {
			wake = l.gate.nextRecovery(wait)
		}
		if !sleep(l.ctx, l.c.clock, wait, wake) {
			return l.sent, o, contextReason(l.ctx)
		}
		l.c.trace.wait(l.ctx, planned, l.waitCause)
	}
}

// cleanup runs when the loop ends, however it ends (an attempt's code may
// panic): a probe that never told its outcome frees the gate's probe, and a
// retry the budget paid for that never went gets its token back.
func (l *loop) cleanup() {
	if l.probeOut {
		l.gate.probeLost()
	}
	if l.unsent {
		l.c.budget.refund(1)
		l.charged--
	}
}

// admit asks the gate, if any, to let the next attempt go, and tells the
// trace how long it waited for the dependency.
func (l *loop) admit() (bool, error) {
	if l.gate == nil {
		return false, nil
	}
	l.w.spare, l.w.retry = l.c.maxAttempts-l.tries >= 2, l.sent > 0
	if l.c.trace == nil || l.gate.state.Load() == depUp {
		return l.gate.admit(l.ctx, &l.w)
	}
	start := l.c.clock.Now()
	probe, err := l.gate.admit(l.ctx, &l.w)
	l.c.trace.wait(l.ctx, l.c.clock.Since(start), "dependency")
	return probe, err
}

// succeeded records a success: it earns for the budget, and the retries
// that led to it get their tokens back: they were worth what they cost.
func (l *loop) succeeded(o outcome) {
	if b := l.c.budget; b != nil {
		b.Succeeded()
		if l.charged > 0 {
			b.refund(l.charged)
		}
	}
	if l.observed {
		l.c.observe(l.ctx, Attempt{Number: l.sent, StatusCode: o.status, Elapsed: l.c.clock.Since(l.start)})
	}
}

// report tells the hooks and the logger about a failed attempt.
func (l *loop) report(o outcome, wait time.Duration, reason error) {
	if l.observed {
		l.c.observe(l.ctx, Attempt{
			Number: l.sent, Err: o.err, StatusCode: o.status,
			Retrying: reason == nil, Delay: wait, Reason: reason,
			Elapsed: l.c.clock.Since(l.start),
		})
	}
}

// decide returns the wait before the next attempt, or why there is none.
// The checks run cheapest and most final first; the budget is asked last,
// so no token is spent on a retry that would not happen anyway.
func (l *loop) decide(o outcome, ready func() bool) (time.Duration, error) {
	c := l.c
	switch {
	case l.ctx.Err() != nil:
		return 0, contextReason(l.ctx)
	case o.stop != nil:
		return 0, o.stop
	case !o.retry:
		return 0, ErrPermanent
	case o.pending:
		return l.decidePending(o, ready)
	case l.tries >= c.maxAttempts:
		return 0, ErrAttemptsExhausted
	}
	l.waitFrom, l.waits = time.Time{}, 0
	wait, err := l.backoff(o, max(l.tries, 1))
	if err != nil {
		return 0, err
	}
	if ready != nil && !ready() {
		return 0, ErrBodyNotReplayable
	}
	if c.budget != nil && !c.budget.AllowRetry(c.clock.Now()) {
		c.trace.budgetDenied(l.ctx)
		if l.gate == nil || !l.gate.failing() {
			return 0, ErrBudgetDenied
		}
		// Failures outrun what retries may cost, and this dependency's
		// last attempts failed: it is down as far as this client can
		// tell. Wait for it instead of failing.
		l.gate.markDown()
		return wait, nil
	}
	if c.budget != nil {
		l.charged++
		l.unsent = true
	}
	return wait, nil
}

// decidePending decides the wait after an answer that says an earlier copy
// of the request is still running: waiting for its outcome is neither a
// retry the budget pays for nor one the attempt limit counts. Each wait is
// the backoff of one more retry than the one before (and at least the
// server's Retry-After), so a copy that keeps running is asked after less
// and less often; without a deadline the waiting lasts at most the
// ride-through's MaxWait.
func (l *loop) decidePending(o outcome, ready func() bool) (time.Duration, error) {
	now := l.c.clock.Now()
	if l.waitFrom.IsZero() {
		l.waitFrom, l.waits = now, 0
	}
	if l.deadline.IsZero() && now.Sub(l.waitFrom) >= l.w.maxWait {
		return 0, ErrAttemptsExhausted
	}
	l.waits++
	wait, err := l.backoff(o, max(l.tries, 1)+l.waits-1)
	if err == nil && ready != nil && !ready() {
		return 0, ErrBodyNotReplayable
	}
	return wait, err
}

// backoff is the wait before the next attempt, retry number n of the
// Backoff: the Backoff's, at least the server's Retry-After, and never one
// that ends past the deadline.
func (l *loop) backoff(o outcome, n int) (time.Duration, error) {
	c := l.c
	wait := max(c.backoff.Delay(n, l.prev, c.random()), 0)
	l.waitCause = "backoff"
	if o.hasFloor {
		if c.maxRetryAfter <= 0 || o.floor > c.maxRetryAfter {
			return 0, ErrRetryAfterTooLong
		}
		if o.floor >= wait {
			wait, l.waitCause = o.floor, "retry-after"
		}
	}
	if waitEndsPastDeadline(c.clock.Now(), wait, l.deadline) {
		return 0, ErrDeadline
	}
	l.prev = wait
	return wait, nil
}

// contextReason maps an ended context to ErrDeadline or ErrCancelled.
func contextReason(ctx context.Context) error {
	if ctx.Err() == context.DeadlineExceeded {
		return ErrDeadline
	}
	return ErrCancelled
}

// observe reports a finished attempt to the trace and the logger.
func (c *config) observe(ctx context.Context, a Attempt) {
	c.trace.decided(ctx, a)
	if c.logger == nil {
		return
	}
	switch {
	case a.Retrying:
		c.logger.LogAttrs(ctx, slog.LevelDebug, "retrying",
			slog.Int("attempt", a.Number), slog.Duration("delay", a.Delay),
			slog.Int("status", a.StatusCode), slog.Any("error", a.Err))
	case a.Reason != nil:
		c.logger.LogAttrs(ctx, slog.LevelInfo, "retry stopped",
			slog.Int("attempts", a.Number), slog.String("reason", a.Reason.Error()),
			slog.Int("status", a.StatusCode), slog.Any("error", a.Err),
			slog.Duration("elapsed", a.Elapsed))
	}
}
