package idempotency

import (
	"context"
	"errors"
	"fmt"
	"math"
)

// ErrWrongState is matched (errors.Is) by the error of an operator's call
// on a live record that is not in the state the call needs: RetryParked and
// DiscardParked on a record that is not parked (it completed, or an
// execution holds it or may take it), ResumeStalled on one that is not
// stalled (it completed, is parked, or its lease still runs). The error
// says which.
var ErrWrongState = errors.New("idempotency: the execution is not in the state the operation needs")

// errNotParked and errNotStalled are the ErrWrongState of each operation.
var (
	errNotParked  = fmt.Errorf("%w: it is not parked", ErrWrongState)
	errNotStalled = fmt.Errorf("%w: it is not stalled", ErrWrongState)
)

// RetryParked runs a parked execution of (caller, key) again now, as a
// Reconciler resumes a stalled one, however many executions it had: a fenced
// takeover (which clears Parked), completed steps skipped, an unfinished one
// called again with its downstream key, and the outcome stored for its
// client. Use it once the cause is mended (the dependency is back, a bug is
// fixed); Store.ListParked lists what is parked and why.
//
// It returns what Runner.Do would. ErrNotFound: no live record; ErrWrongState:
// the record is not parked; an error matching ErrNotResumable: there is
// nothing to run it with (no stored request or registered work), and the
// record stays parked. A client's retry that took the record over first
// makes it an *InProgressError, or a replay once that retry completed.
func (r *Runner) RetryParked(ctx context.Context, caller, key string) (Result, error) {
	rec, err := r.store.Get(ctx, caller, key)
	if err != nil {
		return Result{}, err
	}
	if rec.State != StateInProgress || rec.Parked == "" {
		return Result{}, errNotParked
	}
	work, err := r.resumeWork(rec, math.MaxInt64)
	if err != nil {
		return Result{}, err
	}
	claimed := r.clock.Now()
	c, err := r.store.Claim(ctx, ClaimRequest{
		Caller: caller, Key: key, Fingerprint: rec.Fingerprint, Lease: r.lease, TTL: r.ttl,
	})
	if err != nil {
		return Result{}, err
	}
	if c.Outcome == ClaimCreated {
		// The parked record expired (or was released) since it was read:
		// this claim made a new one, with nothing to run. Free it again.
		if err := r.store.Release(context.WithoutCancel(ctx), c.Record.Fence()); err != nil {
			return Result{}, err
		}
		return Result{}, ErrNotFound
	}
	return r.claimed(ctx, c, claimed, work, OutcomeReconciled)
}
