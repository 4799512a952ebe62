package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/jackc/pgx/v5"
)

// claimTries bounds how often Claim re-runs its statement when a concurrent
// claim changed the row after the statement's snapshot was taken: the insert
// then sees the conflict but the read not yet the row. One re-run sees it.
const claimTries = 10

// Claim atomically creates the record (Attempt 1, a new Generation, recovery
// point req.Point), replaces an expired one (likewise), takes over a stale
// in-progress record with the same fingerprint (Attempt+1, Generation and
// recovery point kept, or req.Point if it has none), or reports the live
// record: one statement, one round trip, with lease and expiry computed from
// the database clock. Reporting a completed or busy record takes no lock and
// writes nothing.
func (s *Store) Claim(ctx context.Context, req idempotency.ClaimRequest) (idempotency.Claim, error) {
	if req.Lease <= 0 || req.TTL <= 0 {
		return idempotency.Claim{}, retry.Permanent(fmt.Errorf("pgstore: claim: lease %v and ttl %v must be positive", req.Lease, req.TTL))
	}
	for range claimTries {
		var claimed bool
		rec, err := scanRecord(s.pool.QueryRow(ctx, s.q.claim,
			[]byte(req.Caller), []byte(req.Key), []byte(req.Fingerprint), req.Lease.Microseconds(), req.TTL.Microseconds(),
			req.Resume, s.now(), []byte(req.Point)), &claimed)
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return idempotency.Claim{}, fmt.Errorf("pgstore: claim: %w", classify(err))
		}
		return idempotency.Claim{Outcome: outcome(claimed, rec, req.Fingerprint), Record: rec}, nil
	}
	return idempotency.Claim{}, fmt.Errorf("pgstore: claim: no result after %d tries", claimTries)
}

// outcome classifies the row a claim returned.
func outcome(claimed bool, rec idempotency.Record, fingerprint string) idempotency.ClaimOutcome {
	switch {
	case claimed && rec.Attempt == 1:
		return idempotency.ClaimCreated
	case claimed:
		return idempotency.ClaimTakenOver
	case rec.Fingerprint != fingerprint:
		return idempotency.ClaimMismatch
	case rec.State == idempotency.StateCompleted:
		return idempotency.ClaimCompleted
	default:
		return idempotency.ClaimInProgress
	}
}
