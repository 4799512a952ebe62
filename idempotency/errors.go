package idempotency

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/exactlyonce/retry"
)

// ErrFingerprintMismatch is returned by Runner.Do when the key was first used
// with another request fingerprint. The stored outcome is never returned for a
// different request.
var ErrFingerprintMismatch = errors.New("idempotency: key reused with a different request")

// ErrTxFailed is matched (errors.Is) by the error Runner.Do returns when a
// statement of the execution's transaction failed (see Tx.Err): the
// transaction was rolled back, nothing was stored, and the key was freed (or,
// after a recovery point, left for the next retry to resume), so a retry
// runs cleanly. The error also matches the statement's error. A TxStore's
// Tx.Complete returns an error matching it when it refuses to commit a
// failed transaction.
var ErrTxFailed = errors.New("idempotency: a statement of the transaction failed; it was rolled back")

// txFailedError is the error Runner.Do returns for a failed transaction.
type txFailedError struct{ err error }

func (e *txFailedError) Error() string   { return ErrTxFailed.Error() + ": " + e.err.Error() }
func (e *txFailedError) Unwrap() []error { return []error{ErrTxFailed, e.err} }

// ErrRejected is matched (errors.Is) by every error made with Reject.
var ErrRejected = errors.New("idempotency: rejected before execution began")

// ErrAborted is matched (errors.Is) by every error made with Abort.
var ErrAborted = errors.New("idempotency: aborted after execution began")

// InProgressError says another execution holds the lease on the key: the
// outcome is coming, try again after RetryAfter. Find it with errors.As.
type InProgressError struct {
	// RetryAfter is a hint for when to try again: about how long the
	// Runner's recent executions took (a smoothed mean plus twice the mean
	// deviation, as TCP times its retransmissions), at least one second, and
	// never more than the time left on the holder's lease. Most executions
	// take far less than their lease, so a repeat told to wait for the lease
	// would wait (or, with a client that caps its waits, give up) for
	// nothing.
	RetryAfter time.Duration
}

// Error implements error.
func (e *InProgressError) Error() string {
	return fmt.Sprintf("idempotency: key is in progress; retry after %s", e.RetryAfter)
}

// Reject marks err, returned by a Work, as a rejection before execution
// began (a validation failure, say): nothing is stored, the key is released and
// a corrected retry with the same key runs afresh. Runner.Do returns the marked
// error; errors.Is(err, ErrRejected) is true and errors.Is/As also see err.
// Reject(nil) is nil.
func Reject(err error) error {
	if err == nil {
		return nil
	}
	return &rejection{err: err}
}

type rejection struct{ err error }

func (r *rejection) Error() string   { return "idempotency: rejected: " + r.err.Error() }
func (r *rejection) Unwrap() []error { return []error{ErrRejected, r.err} }

// Abort, returned by a Work, rolls back the work's transaction (when the
// Store is a TxStore) and stores response as the final outcome, outside that
// transaction, so every repeat gets response and the work never runs again.
// Use it for a failure after execution began whose local writes must not
// commit. Runner.Do returns a Result holding response, and err.
// errors.Is(err, ErrAborted) is true and errors.Is/As also see err, which
// may be nil. When response cannot be stored, Runner.Do's error does not
// match ErrAborted: only a stored Abort is one.
func Abort(response []byte, err error) error {
	return &abort{response: response, err: err}
}

type abort struct {
	response []byte
	err      error
}

func (a *abort) Error() string {
	if a.err == nil {
		return ErrAborted.Error()
	}
	return "idempotency: aborted: " + a.err.Error()
}

func (a *abort) Unwrap() []error {
	if a.err == nil {
		return []error{ErrAborted}
	}
	return []error{ErrAborted, a.err}
}

// permanent reports whether a store's (or a Tx's) err will recur however
// often the same call is repeated: marked with retry.Permanent (an input the
// store cannot take, a limit of the store, a missing table), or another error
// retry.IsPermanent counts. A cancelled context is not: the caller may just
// be going away. The Middleware answers a permanent failure with 500 and no
// Retry-After, a transient one with 503 and Retry-After.
func permanent(err error) bool {
	return !errors.Is(err, context.Canceled) && retry.IsPermanent(err)
}
