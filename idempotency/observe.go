package idempotency

import "context"

// Outcome names what became of one call of Runner.Do (and so of one keyed
// request behind Middleware), or of one execution the Reconciler handled.
// The values are stable: metrics and traces use them as labels.
type Outcome string

// Outcomes, as the observer of WithObserver hears them.
const (
	// OutcomeExecuted: a new claim ran the work (Observation.Err is nil when
	// its outcome was stored, the work's error otherwise).
	OutcomeExecuted Outcome = "executed"
	// OutcomeTakenOver: the claim took over an execution whose lease had run
	// out, and resumed it (Err as for OutcomeExecuted).
	OutcomeTakenOver Outcome = "taken_over"
	// OutcomeReplayed: the key had completed; its stored outcome was returned.
	OutcomeReplayed Outcome = "replayed"
	// OutcomeInProgress: another execution held the key (HTTP 409).
	OutcomeInProgress Outcome = "in_progress"
	// OutcomeMismatch: the key was used with another request (HTTP 422).
	OutcomeMismatch Outcome = "mismatch"
	// OutcomeRejected: the work rejected the request before execution began;
	// nothing was stored and the key was freed.
	OutcomeRejected Outcome = "rejected"
	// OutcomeReconciled: a Reconciler took over a stalled execution that
	// nobody retried and resumed it (Err as for OutcomeExecuted).
	OutcomeReconciled Outcome = "reconciled"
	// OutcomeParked: a Reconciler gave up on a stalled execution (Err says
	// why: ErrNotResumable, or the last failure after too many takeovers),
	// or a Work parked its own (Park; Err matches ErrParked). It is not
	// resumed again unless its client retries or Runner.RetryParked runs it.
	OutcomeParked Outcome = "parked"
	// OutcomeFailed: the claim could not be made or read (a store error).
	OutcomeFailed Outcome = "failed"
)

// Observation is what the observer of WithObserver hears of one call of Runner.Do or of one
// execution a Reconciler handled.
type Observation struct {
	Outcome Outcome
	Caller  string
	Key     string
	// Attempt is the record's fencing counter: above 1 after takeovers.
	Attempt int64
	// Err is the error Runner.Do returned, or why a Reconciler parked.
	Err error
}

// WithObserver, for NewRunner, sets the function that hears every
// Observation of the Runner (default none, at no cost), on the goroutine
// that made it, with that call's context (the request's context behind
// Middleware): it must be quick and must not block. Use it for metrics and
// traces (the otelretry module provides one) or logs.
func WithObserver(o func(ctx context.Context, obs Observation)) Option {
	return runnerOption(func(r *Runner) { r.observer = o })
}

// observe tells the observer, if any, about one call.
func (r *Runner) observe(ctx context.Context, out Outcome, caller, key string, attempt int64, err error) {
	if r.observer != nil {
		r.observer(ctx, Observation{Outcome: out, Caller: caller, Key: key, Attempt: attempt, Err: err})
	}
}
