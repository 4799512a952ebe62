package retry

import (
	"context"
	"time"

	"github.com/benbjohnson/clock"
)

// attemptBound is the timeout of the attempt out now and the context it
// ends, for every protocol the loop serves (a Transport's round trip, a
// protocol.Caller's call). The attempt's context is a child of the loop's that a
// timer cancels: the timer stops when the attempt has its answer (the
// response's headers, a gRPC reply or first message), and the context ends
// when the answer is released (a body closed, a stream ended), so a timeout
// never cuts off an answer being read.
type attemptBound struct {
	cancel  context.CancelFunc // ends the attempt's context; noop when it has none of its own
	own     *attemptCtx        // the attempt's context, when it is an attemptCtx (see beginOwn)
	owns    bool               // the attempt has a context of its own
	timer   stopper            // ends the attempt; nil when it has no timeout
	timeout time.Duration      // the attempt's timeout
}

// boundFor is the time the next attempt may wait for its answer: the
// learned timeout with WithAdaptiveTimeout (from est), else
// WithAttemptTimeout's, else defaultAttemptTimeout (30 s) when nothing else bounds
// the attempt (no deadline, and a base that does not bound itself); never
// beyond the deadline, and none when a deadline bounds the attempt and no
// other attempt could follow it (see worthCutting): left is how many sends
// the attempt limit leaves it, gate its dependency's gate. 0 means no timer.
func (c *config) boundFor(est *latencyEstimate, deadline time.Time, bounded bool, left int, gate *dependency) time.Duration {
	var d time.Duration
	switch {
	case c.adaptive.timeout:
		d = c.adaptive.attemptTimeoutFor(est)
	case c.attemptTimeout > 0:
		d = c.attemptTimeout
	case deadline.IsZero() && !bounded:
		d = defaultAttemptTimeout
	default:
		return 0
	}
	return c.cutTimeout(d, deadline, left, gate)
}

// cutTimeout is the timeout d of an attempt, bounded by the deadline: none
// when the deadline comes first, or when cutting the attempt off is not
// worth it (see worthCutting). Without a deadline it is d.
func (c *config) cutTimeout(d time.Duration, deadline time.Time, left int, gate *dependency) time.Duration {
	if deadline.IsZero() || d <= 0 {
		return d
	}
	now := c.clock.Now()
	if !c.worthCutting(d, deadline.Sub(now), left, gate, now) {
		return 0
	}
	return attemptTimeout(d, deadline, now)
}

// worthCutting reports whether cutting an attempt off after d, with rest
// left before the deadline, is worth its cost: only when another attempt
// can follow it. That takes an attempt the limit allows (left > 1), a gate
// that lets attempts go (the dependency up: not a probe, not a release
// after an outage), a retry the budget can pay for, and time enough for
// another attempt as long as this one (rest - d >= d). Otherwise the attempt
// runs to the deadline, as a client without retries would let it: a server
// that is slow, not dead, finishes the work instead of throwing it away.
func (c *config) worthCutting(d, rest time.Duration, left int, gate *dependency, now time.Time) bool {
	return left > 1 && rest-d >= d &&
		(gate == nil || gate.state.Load() == depUp) &&
		(c.budget == nil || c.budget.mayRetry(now))
}

// begin gives the next attempt its context: ctx, or, when the attempt has
// a timeout d, a child of it that a timer on clk ends after d.
func (b *attemptBound) begin(ctx context.Context, clk clock.Clock, d time.Duration) context.Context {
	if d <= 0 {
		return ctx
	}
	actx, cancel := context.WithCancel(ctx)
	b.cancel, b.owns = cancel, true
	b.timer, b.timeout = afterFunc(clk, d, cancel), d
	return actx
}

// beginOwn is begin for an attempt whose context can be an attemptCtx:
// with a timeout d and a loop context ctx that never ends, it makes slot,
// which the caller keeps with the attempt, a child of ctx that a timer on
// clk ends after d, and returns it; otherwise it does as begin.
func (b *attemptBound) beginOwn(ctx context.Context, clk clock.Clock, d time.Duration, slot *attemptCtx) context.Context {
	if d <= 0 || ctx.Done() != nil {
		return b.begin(ctx, clk, d)
	}
	slot.init(ctx)
	b.own, b.owns, b.timeout = slot, true, d
	if clk == systemClock {
		b.timer = cutAfter(slot, d)
	} else {
		b.timer = clk.AfterFunc(d, slot.cancel)
	}
	return slot
}

// endContext ends the attempt's context, whichever kind it is.
func (b *attemptBound) endContext() {
	if b.own != nil {
		b.own.cancel()
	}
	b.cancel()
}

// settle stops the attempt's timer once the attempt has its answer, and
// reports whether the timer had fired first: the attempt then timed out
// whatever came back, its context is ended now (the timer's own call may
// not have run yet), and est, when kept, learns that the dependency got
// slower.
func (b *attemptBound) settle(est *latencyEstimate) (cut bool) {
	if b.timer == nil || b.timer.Stop() {
		b.timer = nil
		return false
	}
	b.timer = nil
	b.endContext()
	if est != nil {
		est.ObserveCut(b.timeout) // a cut attempt is evidence of a slower dependency
	}
	return true
}

// end ends the attempt's context and stops its timer.
func (b *attemptBound) end() {
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	b.endContext()
	b.cancel, b.own, b.owns = noop, nil, false
}

// detach hands the attempt's context over to the caller, who ends it with
// the returned func (once a retried response's body, read on past the
// attempt, is over), and stops its timer.
func (b *attemptBound) detach() context.CancelFunc {
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	cancel := b.cancel
	if own := b.own; own != nil {
		cancel = own.cancel // the other is noop: an attempt has one context of its own
	}
	b.cancel, b.own, b.owns = noop, nil, false
	return cancel
}

// also makes cancel end with the attempt's context (the context of a
// hedge's winning copy).
func (b *attemptBound) also(cancel context.CancelFunc) {
	prev := b.cancel
	b.cancel = func() { cancel(); prev() }
	b.owns = true
}
