package grpcretry

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/exactlyonce/retry"
)

// callError is what a call that failed returns: the loop's *retry.Error
// (attempts, reason, last error; errors.Is and errors.As find each) whose
// gRPC status is the last attempt's, unchanged, so that status.Code,
// status.Convert and status.FromError see what the server said.
type callError struct {
	err *retry.Error
	st  *status.Status
}

func (e *callError) Error() string              { return e.err.Error() }
func (e *callError) Unwrap() error              { return e.err }
func (e *callError) GRPCStatus() *status.Status { return e.st }

// callErr turns the error Run returned into what the interceptor returns.
func callErr(err error) error {
	var rerr *retry.Error
	if !errors.As(err, &rerr) || rerr != err {
		return err // inside another loop: the error of the one attempt, marked for it
	}
	return &callError{err: rerr, st: statusOf(rerr)}
}

// statusOf is the gRPC status of a call that failed: the last attempt's,
// or, when there is none, one that says why. A call whose next wait would
// have ended past its deadline (the server's pushback, or the backoff)
// keeps the last attempt's status: what the server said is what the
// caller needs, and errors.Is finds retry.ErrDeadline and
// context.DeadlineExceeded beside it.
func statusOf(e *retry.Error) *status.Status {
	var timeout *retry.AttemptTimeoutError
	switch {
	case errors.Is(e.Context, context.Canceled):
		return status.New(codes.Canceled, e.Error())
	case errors.Is(e.Reason, retry.ErrDeadline) && e.Last != nil && !errors.As(e.Last, &timeout):
		if st, ok := status.FromError(e.Last); ok {
			return st
		}
		return status.New(codes.DeadlineExceeded, e.Error())
	case errors.Is(e.Context, context.DeadlineExceeded):
		// The call's deadline, as grpc-go says it (the last attempt's
		// status is in the *retry.Error).
		return status.New(codes.DeadlineExceeded, e.Error())
	case errors.As(e.Last, &timeout):
		return status.New(codes.DeadlineExceeded, timeout.Error())
	case e.Last != nil:
		if st, ok := status.FromError(e.Last); ok {
			return st
		}
	case errors.Is(e.Reason, retry.ErrDependencyDown), errors.Is(e.Reason, retry.ErrBudgetDenied):
		return status.New(codes.Unavailable, e.Error())
	}
	return status.New(codes.Unknown, e.Error())
}
