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
}

func (o outcome) failed() bool { return o.err != nil || o.retry || o.bad }

// run calls attempt (numbered from 1) until it succeeds or the policy stops,
// and returns the number of attempts, the last outcome and the reason for
// stopping (nil on success). It is the one loop behind Do and Transport.
// deadline is the total deadline (zero: none); ctx must already carry it.
// discard, if not nil, is called when a retry has been decided, before the
// wait, to release what the failed attempt holds; it may take part of the
// wait and returns what is left of it.
func (c *config) run(ctx context.Context, deadline time.Time, discard func(wait time.Duration) time.Duration, attempt func(n int) outcome) (int, outcome, error) {
	var start time.Time
	observed := c.onAttempt != nil || c.onRetry != nil || c.logger != nil
	if observed {
		start = c.clock.Now()
	}
	var prev time.Duration
	for n := 1; ; n++ {
		o := attempt(n)
		n += o.hedges
		if !o.failed() {
			if c.budget != nil {
				c.budget.Succeeded()
			}
			if observed {
				c.observe(ctx, Attempt{Number: n, StatusCode: o.status, Elapsed: c.clock.Since(start)})
			}
			return n, o, nil
		}
		wait, reason := c.decide(ctx, n, prev, o, deadline)
		if observed {
			c.observe(ctx, Attempt{
				Number: n, Err: o.err, StatusCode: o.status,
				Retrying: reason == nil, Delay: wait, Reason: reason,
				Elapsed: c.clock.Since(start),
			})
		}
		if reason != nil {
			return n, o, reason
		}
		prev = wait
		if discard != nil {
			wait = discard(wait)
		}
		if !sleep(ctx, c.clock, wait) {
			return n, o, contextReason(ctx)
		}
	}
}

// decide returns the wait before the next attempt, or why there is none.
// The checks run cheapest and most final first; the budget is asked last,
// so no token is spent on a retry that would not happen anyway.
func (c *config) decide(ctx context.Context, n int, prev time.Duration, o outcome, deadline time.Time) (time.Duration, error) {
	switch {
	case ctx.Err() != nil:
		return 0, contextReason(ctx)
	case o.stop != nil:
		return 0, o.stop
	case !o.retry:
		return 0, ErrPermanent
	case n >= c.maxAttempts:
		return 0, ErrAttemptsExhausted
	}
	wait := c.backoff.Delay(n, prev, c.random())
	if wait < 0 {
		wait = 0
	}
	if o.hasFloor {
		if c.maxRetryAfter <= 0 || o.floor > c.maxRetryAfter {
			return 0, ErrRetryAfterTooLong
		}
		if o.floor > wait {
			wait = o.floor
		}
	}
	now := c.clock.Now()
	if waitEndsPastDeadline(now, wait, deadline) {
		return 0, ErrDeadline
	}
	if c.budget != nil && !c.budget.AllowRetry(now) {
		return 0, ErrBudgetDenied
	}
	return wait, nil
}

// contextReason maps an ended context to ErrDeadline or ErrCancelled.
func contextReason(ctx context.Context) error {
	if ctx.Err() == context.DeadlineExceeded {
		return ErrDeadline
	}
	return ErrCancelled
}

// observe reports a finished attempt to the hooks and the logger.
func (c *config) observe(ctx context.Context, a Attempt) {
	if c.onAttempt != nil {
		c.onAttempt(a)
	}
	if a.Retrying && c.onRetry != nil {
		c.onRetry(a)
	}
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
