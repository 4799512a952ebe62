package retry

import (
	"context"

	"github.com/exactlyonce/retry/internal/giveup"
)

// pushbackHeader is the response header by which a service says its own
// retries gave up (package pushback's Header): a response that carries it
// is never retried.
const pushbackHeader = giveup.Header

// isGiveUp reports whether a loop's reason means its layer gave up on a
// failing dependency, which the service should pass on to its callers.
func isGiveUp(reason error) bool {
	switch reason {
	case ErrAttemptsExhausted, ErrBudgetDenied, ErrDeadline, ErrPushback, ErrRetryAfterTooLong, ErrDependencyDown:
		return true
	}
	return false
}

// pushbackValue names a give-up reason in the header.
func pushbackValue(reason error) string {
	switch reason {
	case ErrAttemptsExhausted:
		return "exhausted"
	case ErrBudgetDenied:
		return "budget"
	case ErrDeadline:
		return "deadline"
	case ErrRetryAfterTooLong:
		return "retry-after"
	case ErrDependencyDown:
		return "dependency-down"
	default:
		return "pushback"
	}
}

// noteGiveUp records, for the incoming request whose context (from package
// pushback) ctx derives from, that a loop gave up for reason.
func noteGiveUp(ctx context.Context, reason error) {
	giveup.Note(ctx, pushbackValue(reason))
}
