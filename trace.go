package retry

import (
	"context"
	"net/http"
	"time"
)

// Trace is a set of hooks called as a retry loop (a Do call, a
// Transport's RoundTrip or a protocol.Caller's Run) runs, for tracing and
// metrics; module github.com/exactlyonce/retry/otelretry fills them for
// OpenTelemetry. Any hook may be nil. Hooks run on the goroutine that makes
// the call they report (a hedge's on its own), must not block, and must be
// safe for concurrent use. With no Trace, none of this costs anything.
type Trace struct {
	// Start is called when a logical request begins, with the request for a
	// Transport (nil for Do). The context it returns is the loop's: every
	// attempt derives from it.
	Start func(ctx context.Context, req *http.Request) context.Context
	// AttemptStart is called before each attempt n (from 1; a hedge is an
	// attempt of its own, with hedge set), with the request about to be
	// sent (nil for Do). The context it returns is the attempt's.
	AttemptStart func(ctx context.Context, n int, hedge bool, req *http.Request) context.Context
	// AttemptEnd is called with the attempt's context when attempt n has a
	// response (resp, for a Transport) or failed (err).
	AttemptEnd func(ctx context.Context, n int, resp *http.Response, err error)
	// Decided is called with the loop's context after each attempt with
	// what the loop made of it: a success, a retry after a delay, or the
	// reason it stops.
	Decided func(ctx context.Context, a Attempt)
	// Wait is called with the loop's context after the loop waited d
	// before the next attempt, for cause: "backoff", "retry-after" (the
	// server asked for the wait) or "dependency" (it waited for the
	// dependency to come back, see RideThrough).
	Wait func(ctx context.Context, d time.Duration, cause string)
	// BudgetDenied is called when the retry budget denied a retry.
	BudgetDenied func(ctx context.Context)
	// Hedged is called when a hedged attempt ended: won reports that the
	// hedge's answer was the one kept.
	Hedged func(ctx context.Context, won bool)
	// End is called when the logical request ended, with its report.
	End func(ctx context.Context, r Report)
	// Panicked is called instead of End when a Do call, a RoundTrip or a
	// protocol.Caller's Run panics (the operation, the base RoundTripper, the
	// Caller's attempt or a hook did), with the loop's context and the
	// value the panic carries (nil when the goroutine exits, as
	// runtime.Goexit does); the panic goes on when it returns. An attempt
	// the panic interrupted gets no AttemptEnd.
	Panicked func(ctx context.Context, value any)
}

// WithTrace installs t's hooks (see Trace). A nil t removes them.
func WithTrace(t *Trace) Option {
	return optionFunc(func(c *config) { c.trace = t })
}

// The trace's hooks, each a no-op on a nil Trace or a nil hook.

func (t *Trace) start(ctx context.Context, req *http.Request) context.Context {
	if t == nil || t.Start == nil {
		return ctx
	}
	return t.Start(ctx, req)
}

func (t *Trace) attemptStart(ctx context.Context, n int, hedge bool, req *http.Request) context.Context {
	if t == nil || t.AttemptStart == nil {
		return ctx
	}
	return t.AttemptStart(ctx, n, hedge, req)
}

func (t *Trace) attemptEnd(ctx context.Context, n int, resp *http.Response, err error) {
	if t != nil && t.AttemptEnd != nil {
		t.AttemptEnd(ctx, n, resp, err)
	}
}

func (t *Trace) decided(ctx context.Context, a Attempt) {
	if t != nil && t.Decided != nil {
		t.Decided(ctx, a)
	}
}

func (t *Trace) wait(ctx context.Context, d time.Duration, cause string) {
	if t != nil && t.Wait != nil {
		t.Wait(ctx, d, cause)
	}
}

func (t *Trace) budgetDenied(ctx context.Context) {
	if t != nil && t.BudgetDenied != nil {
		t.BudgetDenied(ctx)
	}
}

func (t *Trace) hedged(ctx context.Context, won bool) {
	if t != nil && t.Hedged != nil {
		t.Hedged(ctx, won)
	}
}

func (t *Trace) end(ctx context.Context, r Report) {
	if t != nil && t.End != nil {
		t.End(ctx, r)
	}
}

func (t *Trace) panicked(ctx context.Context, value any) {
	if t != nil && t.Panicked != nil {
		t.Panicked(ctx, value)
	}
}
