package retry

import (
	"context"
	"time"

	"github.com/benbjohnson/clock"
)

// deadline returns the total deadline, reading the clock only when a total
// timeout is configured.
func (c *config) deadline(ctx context.Context) time.Time {
	if c.totalTimeout <= 0 {
		d, _ := ctx.Deadline()
		return d
	}
	return deadlineOf(ctx, c.totalTimeout, c.clock.Now())
}

// attemptContext derives one attempt's context from the loop's: left is
// how many attempts the limit leaves it, gate the dependency's gate (see
// cutTimeout).
func (c *config) attemptContext(ctx context.Context, deadline time.Time, left int, gate *dependency) (context.Context, context.CancelFunc) {
	if c.attemptTimeout <= 0 {
		return ctx, noop
	}
	return withAttemptTimeout(ctx, c.clock, c.cutTimeout(c.attemptTimeout, deadline, left, gate))
}

// deadlineOf returns the total deadline: the context's or now+total,
// whichever is sooner. The zero time means there is none.
func deadlineOf(ctx context.Context, total time.Duration, now time.Time) time.Time {
	d, ok := ctx.Deadline()
	if total > 0 {
		if own := now.Add(total); !ok || own.Before(d) {
			return own
		}
	}
	if ok {
		return d
	}
	return time.Time{}
}

// withTotalDeadline bounds ctx by the total timeout when that ends sooner
// than the context's own deadline. The returned cancel is never nil.
func withTotalDeadline(ctx context.Context, clk clock.Clock, deadline time.Time) (context.Context, context.CancelFunc) {
	if deadline.IsZero() {
		return ctx, noop
	}
	if d, ok := ctx.Deadline(); ok && !deadline.Before(d) {
		return ctx, noop
	}
	return clk.WithDeadline(ctx, deadline)
}

// attemptTimeout returns the timeout for one attempt: the configured per-attempt
// timeout, never more than what is left before the deadline. Zero means none.
func attemptTimeout(perAttempt time.Duration, deadline, now time.Time) time.Duration {
	if deadline.IsZero() {
		return perAttempt
	}
	left := deadline.Sub(now)
	if perAttempt > 0 && perAttempt < left {
		return perAttempt
	}
	return 0 // the total deadline already bounds the attempt
}

// withAttemptTimeout derives one attempt's context. The cancel is never nil.
func withAttemptTimeout(ctx context.Context, clk clock.Clock, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return ctx, noop
	}
	return clk.WithTimeout(ctx, d)
}

// waitEndsPastDeadline reports whether a wait starting now would end at or
// after the deadline, leaving no time for another attempt.
func waitEndsPastDeadline(now time.Time, wait time.Duration, deadline time.Time) bool {
	return !deadline.IsZero() && !now.Add(wait).Before(deadline)
}

// sleep waits d on clk, returning early (false) when ctx is done.
func sleep(ctx context.Context, clk clock.Clock, d time.Duration, wake <-chan struct{}) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := clk.Timer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	case <-wake:
		return ctx.Err() == nil
	}
}

func noop() {}

// stopper is a timer that can be stopped.
type stopper interface{ Stop() bool }

// systemClock is the clock options default to; with it, timers come straight
// from package time, which saves an allocation per timer.
var systemClock = clock.New()

// afterFunc calls f after d on clk.
func afterFunc(clk clock.Clock, d time.Duration, f func()) stopper {
	if clk == systemClock {
		return time.AfterFunc(d, f)
	}
	return clk.AfterFunc(d, f)
}
