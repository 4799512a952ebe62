// Package protocol runs the calls of a protocol other than HTTP on the
// retry loop of package github.com/exactlyonce/retry, the one behind its
// Transport and Do, so that every protocol gets the same policy from the
// same retry.Options. It is for the authors of integrations, as
// database/sql/driver is beside database/sql: module
// github.com/exactlyonce/retry/grpcretry builds its gRPC client
// interceptors on it. An application has no need of it.
//
// A Caller holds the policy; each logical call is a Call, which Run makes
// attempt after attempt. The protocol makes each attempt and says what
// came back in a Verdict (a success, a transient failure, a rejection, a
// server's requested wait); the Caller decides the rest: whether and when
// to try again, the key the call carries, the deadline and the attempt's
// timeout, the budget, riding through outages, hedging.
//
// Standard library and package retry only.
package protocol

import (
	"context"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/internal/protocolcore"
)

// Call describes one logical call to Caller.Run. Its fields:
//
//   - Target names the dependency: calls with the same Target share its
//     gate (see retry.RideThrough) and its latency estimate.
//   - Method names the operation. With Target it is the call's identity:
//     inside another retry loop, the call's key is made from the loop and
//     the identity, so it stays the same on every attempt of the loop.
//   - Idempotent: the call is safe to repeat as it is, and needs no key.
//   - Key is the call's idempotency key. Set it to keep a key of the
//     caller's own; left empty, Run makes one before the first attempt
//     when the call needs it (not Idempotent, keys not turned off with
//     retry.WithoutKeys, retry.WithIdempotent or retry.WithoutRetries), in
//     the form the Options say (retry.WithTokenKeys), and sets it here. A
//     call that is neither Idempotent nor keyed is not retried after a
//     failure worth retrying: repeating it could repeat its effect, so Run
//     stops with retry.ErrNotIdempotent.
//   - Hedgeable: an attempt may be made twice at once (see retry.Hedging):
//     the attempt function keeps each copy's result to itself when told it
//     is hedged. Only idempotent or keyed calls are hedged.
//   - Hold: the successful attempt's context must outlive Run (a stream
//     read after it): Run leaves it, and the total deadline's, to
//     Release. Held calls are never hedged.
//   - Options are the call's own options ([]retry.Option), applied after
//     the Caller's and those of retry.NewContext.
//
// Release ends the contexts that Run left to a Hold call that succeeded
// (its attempt's and its total deadline's): call it once the call is over
// (its stream ended). It does nothing for other calls, and nothing the
// second time.
//
// Run reads and sets the Call it is given, while the attempts run: give
// each logical call a Call of its own, and do not copy it.
type Call = protocolcore.Call[retry.Option]

// Verdict is what one attempt of a Call tells the Caller. The zero Verdict
// is a success. Its fields:
//
//   - Err is the attempt's failure; nil for a success.
//   - Retry: the failure is transient, another attempt may succeed.
//   - Failing: the attempt says its dependency is failing (as a 5xx or a
//     429 does), even when it is not retried; a rejection of the call (as
//     a 4xx) is not. A retried failure always counts as failing.
//   - Answered: the dependency answered the attempt, whatever it answered
//     (a rejection of the call, as a 4xx; an earlier copy still running,
//     Pending): it is alive, so the attempt ends its streak of failures
//     and, as a probe, its outage (see retry.RideThrough). A success
//     always is an answer, and a Failing verdict counts against its
//     dependency whatever this says; an attempt that got no answer
//     (cancelled on the caller's side, say) leaves it false and tells the
//     gate nothing.
//   - Pending: the server says an earlier copy of the call, with the same
//     key, is still running. The next attempt waits for its outcome, which
//     is neither a retry the budget pays for nor one the attempt limit
//     counts (see retry.RideThrough).
//   - RetryAfter, when HasRetryAfter, is the server's requested wait: a
//     floor for the next one. One over retry.WithMaxRetryAfter, or ending
//     past the deadline, stops the loop (retry.ErrRetryAfterTooLong,
//     retry.ErrDeadline).
//   - Stop, when not nil, ends the loop now with this reason
//     (retry.ErrPushback, for one).
//   - Result is the protocol's own: Run hands back the Verdict of the
//     attempt that ended the loop (a hedge's winning copy) with it.
type Verdict = protocolcore.Verdict

// Caller runs the calls of a protocol other than HTTP on the loop behind
// retry.Transport and retry.Do, so that every protocol gets the same
// policy from the same Options: backoff, attempts, the total deadline,
// attempt timeouts (fixed or adaptive, learned per target), the retry
// budget (a retry.NewBudget(0.1, 1, 20) of the Caller's own unless
// retry.WithBudget), riding through outages per target, hedging, one
// layer, retry.Trace and retry.Report. Module
// github.com/exactlyonce/retry/grpcretry builds its gRPC interceptors on
// it; an application has no need of it otherwise.
//
// The protocol makes each attempt and says what came back in a Verdict;
// the Caller decides the rest. A Caller is safe for concurrent use and
// immutable once built.
type Caller struct {
	r runner
}

// runner is the root's caller, which runs the loop.
type runner interface {
	Run(ctx context.Context, call *Call, attempt func(ctx context.Context, n int, hedge bool) Verdict) (Verdict, error)
	Budget() *retry.Budget
	Dependencies() []retry.DependencyStats
}

// NewCaller returns a Caller with the policy given by opts. Unless
// retry.WithBudget is given, it has a budget of its own,
// retry.NewBudget(0.1, 1, 20). retry.WithClassifier, and the options of
// HTTP bodies and status codes (retry.WithBodyBufferLimit,
// retry.WithRetryStatuses), do not apply: the protocol classifies its own
// answers.
func NewCaller(opts ...retry.Option) *Caller {
	return &Caller{r: protocolcore.NewCaller(opts).(runner)}
}

// Budget returns the Caller's retry budget (nil when unlimited), for its
// statistics.
func (cl *Caller) Budget() *retry.Budget { return cl.r.Budget() }

// Dependencies returns what the Caller knows of each target it called (see
// retry.RideThrough), for monitoring.
func (cl *Caller) Dependencies() []retry.DependencyStats { return cl.r.Dependencies() }

// Run runs call until an attempt succeeds or the policy stops, and returns
// the Verdict of the attempt that ended the loop and nil, or a
// *retry.Error with the number of attempts, the reason and the last
// Verdict's Err (nil when the loop stopped before any attempt, as when its
// dependency is down for longer than retry.RideThrough's MaxWait). attempt
// makes attempt n (from 1) under ctx, the attempt's context: bounded by
// the total deadline and the attempt timeout, ended when the attempt is
// over (for a Hold call's success, at Release). hedge tells that the
// attempt runs beside another copy of it (see retry.Hedging): it then
// keeps its result to itself (in Verdict.Result) and must be safe to run
// concurrently with the other copy. An attempt cut off by its timeout
// becomes a retryable failure whose Err is a *retry.AttemptTimeoutError,
// whatever it returned. A RetryAfter that would end past the deadline ends
// the loop at once: Run hands back that attempt's Verdict (its Result
// included) and a *retry.Error whose Reason is retry.ErrDeadline, whose
// Last is the Verdict's Err unchanged, and which matches
// context.DeadlineExceeded.
//
// Run is a retry loop of its own for the keyed calls its attempts make
// (a retry.Transport's POST, another Caller's call): each gets a key made
// from the loop, the call's identity and its rank in the attempt, the same
// on every attempt (see retry.Do); both copies of a hedged attempt give
// the same call the same key.
//
// Inside another retry loop (found through ctx), Run makes a single
// attempt and returns its Err for the enclosing loop to decide, marked
// retry.Permanent when it must not be retried and retry.RetryAfter when
// the server asked for a wait. A loop it gave up on is recorded in ctx for
// pushback.Value (github.com/exactlyonce/retry/pushback).
func (cl *Caller) Run(ctx context.Context, call *Call, attempt func(ctx context.Context, n int, hedge bool) Verdict) (Verdict, error) {
	return cl.r.Run(ctx, call, attempt)
}
