package pgstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/jackc/pgx/v5"
)

// defaultStalledLimit bounds a TakeOverStalled call given no limit, so one
// statement never locks an unbounded number of rows.
const defaultStalledLimit = 1000

// TakeOverStalled takes over up to limit stalled executions (those that
// began, whose lease ran out, not parked; only caller's unless caller is
// ""; limit <= 0: 1,000) in one statement, oldest lease first, skipping
// rows another instance's takeover or a claim holds: instances running it
// at once share the work, and none waits for another's locks. The rows of
// other callers are neither locked nor changed. Each record comes back with its Attempt
// incremented and a lease of lease from the database clock.
//
// The statement runs in a transaction that commits only once its rows were
// read in full: when reading them fails (a connection lost halfway), no
// execution is taken over, and none loses an attempt to a takeover nobody
// holds.
func (s *Store) TakeOverStalled(ctx context.Context, caller string, limit int, lease time.Duration) ([]idempotency.Record, error) {
	if lease <= 0 {
		return nil, retry.Permanent(fmt.Errorf("pgstore: take over stalled: lease %v must be positive", lease))
	}
	if limit <= 0 {
		limit = defaultStalledLimit
	}
	var only []byte // NULL: every caller
	if caller != "" {
		only = []byte(caller)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("pgstore: take over stalled: %w", classify(err))
	}
	// After Commit, Rollback does nothing.
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	rows, err := tx.Query(ctx, s.q.takeOverStalled, limit, lease.Microseconds(), s.now(), only)
	if err != nil {
		return nil, fmt.Errorf("pgstore: take over stalled: %w", classify(err))
	}
	recs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (idempotency.Record, error) { return scanRecord(row) })
	if err != nil {
		return nil, fmt.Errorf("pgstore: take over stalled: %w", classify(err))
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("pgstore: take over stalled: commit: %w", classify(err))
	}
	return recs, nil
}

// Park marks the record f owns as given up with reason and ends its lease,
// conditional on f. The reason is kept as text: a NUL byte or invalid UTF-8
// in it (an error that quotes a key, say) becomes U+FFFD.
func (s *Store) Park(ctx context.Context, f idempotency.Fence, reason string) error {
	if reason == "" {
		reason = "parked"
	}
	reason = strings.ToValidUTF8(strings.ReplaceAll(reason, "\x00", "\uFFFD"), "\uFFFD")
	tag, err := s.pool.Exec(ctx, s.q.park, []byte(f.Caller), []byte(f.Key), f.Attempt, reason, f.Generation, s.now())
	return fenced("park", tag, err)
}
