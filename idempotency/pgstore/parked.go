package pgstore

import (
	"context"
	"fmt"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/jackc/pgx/v5"
)

// ListParked returns up to limit live parked records (limit <= 0:
// 100, the default page) after (afterCaller, afterKey), by caller
// then key. It reads only the parked rows, through a partial index.
func (s *Store) ListParked(ctx context.Context, afterCaller, afterKey string, limit int) ([]idempotency.Record, error) {
	if limit <= 0 {
		limit = idempotency.ListQuery{}.PageSize() // the default page: 100
	}
	rows, err := s.pool.Query(ctx, s.q.listParked, []byte(afterCaller), []byte(afterKey), limit, s.now())
	if err != nil {
		return nil, fmt.Errorf("pgstore: list parked: %w", classify(err))
	}
	recs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (idempotency.Record, error) { return scanRecord(row) })
	if err != nil {
		return nil, fmt.Errorf("pgstore: list parked: %w", classify(err))
	}
	return recs, nil
}
