package retry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/benbjohnson/clock"
)

// Reasons why a retry loop stopped without success. An *Error carries exactly
// one of them, and errors.Is finds it.
var (
	// ErrAttemptsExhausted: every allowed attempt was made and the last one failed.
	ErrAttemptsExhausted = errors.New("retry: attempts exhausted")
	// ErrDeadline: the total deadline was reached, or the next wait would end past it.
	ErrDeadline = errors.New("retry: deadline reached")
	// ErrBudgetDenied: the retry budget had no token for another attempt.
	ErrBudgetDenied = errors.New("retry: retry budget denied")
	// ErrPermanent: the last error is not transient (or was marked with Permanent).
	ErrPermanent = errors.New("retry: permanent error")
	// ErrStatusNotRetried: the response's status is a failure the policy
	// does not retry (a 500 or a 501, say; see WithRetryStatuses): handed
	// back as the server's answer.
	ErrStatusNotRetried = errors.New("retry: the response's status is not retried")
	// ErrCancelled: the caller's context was cancelled.
	ErrCancelled = errors.New("retry: cancelled")
	// ErrNotIdempotent: the attempt failed in a way worth retrying, but the
	// request is not idempotent, carries no key (or one its host has not
	// shown it honours, see WithKeysHonoured) and may have reached the
	// server, so repeating it could repeat its effect.
	ErrNotIdempotent = errors.New("retry: request may have been processed and is not idempotent")
	// ErrPushback: the server said not to retry at all: a Retry-Pushback
	// header (see package github.com/exactlyonce/retry/pushback), or
	// x-should-retry or Stripe-Should-Retry set to false.
	ErrPushback = errors.New("retry: server pushback")
	// ErrRetryAfterTooLong: the server asked for a wait (Retry-After, or a
	// RetryAfter marker) longer than WithMaxRetryAfter allows; with
	// WithMaxRetryAfter(0), any requested wait, Retry-After: 0 included.
	ErrRetryAfterTooLong = errors.New("retry: requested wait too long")
	// ErrBodyNotReplayable: the request's body cannot be sent again (it has
	// no GetBody and was larger than the buffer limit, or the base transport
	// did not read it to its end, or GetBody failed), so the request is not
	// retried: the last response (or error) is handed back as it is.
	ErrBodyNotReplayable = errors.New("retry: request body cannot be replayed")
	// ErrDependencyDown: the request waited for its dependency to come back
	// (see RideThrough) and its deadline, or MaxWait, came first; or too many
	// requests were waiting already.
	ErrDependencyDown = errors.New("retry: dependency down")
)

// Error is the error returned when a retry loop stops without success. It
// keeps the number of attempts, the reason (one of the Err* sentinels above)
// and the last operation error, which is never lost: errors.Is and errors.As
// see the reason, the last error and, when the context ended the loop, the
// context's error.
type Error struct {
	// Attempts is the number of times the operation was called.
	Attempts int
	// Reason is one of ErrAttemptsExhausted, ErrDeadline, ErrBudgetDenied,
	// ErrPermanent, ErrStatusNotRetried, ErrCancelled, ErrPushback, ErrRetryAfterTooLong,
	// ErrNotIdempotent, ErrBodyNotReplayable or ErrDependencyDown.
	Reason error
	// Last is the error of the last attempt (with markers such as Permanent
	// removed). It is nil only when the loop stopped before the first attempt.
	Last error
	// Context is the context's error (context.Canceled or
	// context.DeadlineExceeded) when the context had ended when the loop
	// stopped (its deadline ending a wait for the dependency included),
	// else nil.
	Context error
}

// Error describes the reason, the number of attempts and the last error.
func (e *Error) Error() string {
	if e.Last == nil {
		return fmt.Sprintf("%v after %d attempts", e.Reason, e.Attempts)
	}
	return fmt.Sprintf("%v after %d attempts: %v", e.Reason, e.Attempts, e.Last)
}

// Unwrap returns the reason, the last error and the context's error, leaving
// out the nil ones, so errors.Is and errors.As find each of them.
func (e *Error) Unwrap() []error {
	errs := make([]error, 0, 3)
	for _, err := range [...]error{e.Reason, e.Last, e.Context} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// newError builds the loop's final error. ctxErr is the error of the
// loop's context when the loop stopped (see loopContextErr): whatever the
// reason, when the context had ended, errors.Is(err, context.Canceled) (or
// DeadlineExceeded) holds.
func newError(ctxErr error, attempts int, reason, last error) *Error {
	e := &Error{Attempts: attempts, Reason: reason, Last: last, Context: ctxErr}
	if e.Context == nil && reason == ErrDeadline {
		// Stopped early because the next wait would end past the deadline:
		// for the caller this is the deadline being exceeded.
		e.Context = context.DeadlineExceeded
	}
	return e
}

// loopContextErr is the error of a loop's context when the loop stopped. A
// deadline that has come counts even if the context does not say so yet:
// its timer may fire a moment after the one that ended a wait, and some
// contexts report a deadline they move on (an execution's lease).
func loopContextErr(ctx context.Context, clk clock.Clock, deadline time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !deadline.IsZero() && !clk.Now().Before(deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// AttemptTimeoutError is the error of an HTTP attempt that got no response
// within its attempt timeout (WithAttemptTimeout, WithAdaptiveTimeout or
// the 30 s a Transport gives an attempt nothing else bounds). It is transient, and errors.Is finds
// context.DeadlineExceeded in it, never context.Canceled: nobody cancelled
// the request, its time ran out.
type AttemptTimeoutError struct {
	// Timeout is the attempt's timeout.
	Timeout time.Duration
	// Err is what the base transport returned when the attempt was cut off
	// (usually the cancellation of its context), or nil.
	Err error
}

// Error describes the timeout.
func (e *AttemptTimeoutError) Error() string {
	return "retry: attempt timed out after " + e.Timeout.String()
}

// Unwrap returns context.DeadlineExceeded and the base transport's error,
// unless that error only says its context was cancelled.
func (e *AttemptTimeoutError) Unwrap() []error {
	if e.Err == nil || errors.Is(e.Err, context.Canceled) {
		return []error{context.DeadlineExceeded}
	}
	return []error{context.DeadlineExceeded, e.Err}
}
