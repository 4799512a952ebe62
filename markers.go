package retry

import (
	"errors"
	"time"
)

// permanentError marks an error as not worth retrying.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks err so that Do stops at once and returns it (inside an
// *Error with reason ErrPermanent). Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// retryAfterError marks an error as transient with a minimum wait.
type retryAfterError struct {
	after time.Duration
	err   error
}

func (e *retryAfterError) Error() string { return e.err.Error() }
func (e *retryAfterError) Unwrap() error { return e.err }

// RetryAfter marks err as transient and makes the next wait at least d (a
// floor, like an HTTP Retry-After). A d over the policy's maximum (see
// WithMaxRetryAfter), or one that ends past the deadline, stops the loop at
// once instead of sleeping. Negative d counts as zero. RetryAfter(d, nil) is nil.
func RetryAfter(d time.Duration, err error) error {
	if err == nil {
		return nil
	}
	if d < 0 {
		d = 0
	}
	return &retryAfterError{after: d, err: err}
}

// retryAfterOf returns the floor set by RetryAfter, if err carries one.
func retryAfterOf(err error) (time.Duration, bool) {
	var r *retryAfterError
	if errors.As(err, &r) {
		return r.after, true
	}
	return 0, false
}

// unmark removes the outermost Permanent or RetryAfter marker, so the error
// reported to the caller is the operation's own.
func unmark(err error) error {
	switch e := err.(type) {
	case *permanentError:
		return e.err
	case *retryAfterError:
		return e.err
	}
	return err
}
