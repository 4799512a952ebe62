package idempotency

import (
	"context"
	"math"
)

// DiscardParked deletes the parked execution of (caller, key), as an
// operator gives up on it for good: its client's next retry runs the
// request again from the start, as a new execution. The delete is fenced
// by the record read, so a retry that took the record over in between
// keeps it (the call then fails with ErrLeaseLost). ErrNotFound: no live
// record; ErrWrongState: the record is not parked.
func (r *Runner) DiscardParked(ctx context.Context, caller, key string) error {
	rec, err := r.store.Get(ctx, caller, key)
	if err != nil {
		return err
	}
	if rec.State != StateInProgress || rec.Parked == "" {
		return errNotParked
	}
	return r.store.Release(ctx, rec.Fence())
}

// ResumeStalled runs the stalled execution of (caller, key) again now, as a
// Reconciler's next pass would: a takeover of the record whose lease ran
// out, completed steps skipped, and the outcome stored for its client.
//
// It returns what Runner.Do would. ErrNotFound: no live record;
// ErrWrongState: the record completed or is parked (see RetryParked); an
// error matching ErrNotResumable: there is nothing to run it with. A lease
// still running (on the store's clock) makes it an *InProgressError.
func (r *Runner) ResumeStalled(ctx context.Context, caller, key string) (Result, error) {
	rec, err := r.store.Get(ctx, caller, key)
	if err != nil {
		return Result{}, err
	}
	if rec.State != StateInProgress || rec.Parked != "" {
		return Result{}, errNotStalled
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
		// The record expired (or was released) since it was read.
		if err := r.store.Release(context.WithoutCancel(ctx), c.Record.Fence()); err != nil {
			return Result{}, err
		}
		return Result{}, ErrNotFound
	}
	return r.claimed(ctx, c, claimed, work, OutcomeReconciled)
}
