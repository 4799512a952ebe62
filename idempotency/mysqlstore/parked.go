package mysqlstore

import (
	"context"
	"fmt"

	"github.com/exactlyonce/retry/idempotency"
)

// ListParked returns up to limit live parked records (limit <= 0:
// 100, the default page) after (afterCaller, afterKey), by caller
// then key, byte-wise. It reads only the parked rows, through an index of
// their ids. BLOBs compare as bytes, but MySQL sorts them by their first
// max_sort_length bytes only (1,024 by default): ListParked raises it, and the
// sort buffer with it, for its own statement on a connection of its own, so
// that callers and keys of up to 256 KiB are ordered exactly. Three round
// trips.
func (s *Store) ListParked(ctx context.Context, afterCaller, afterKey string, limit int) ([]idempotency.Record, error) {
	if limit <= 0 {
		limit = idempotency.ListQuery{}.PageSize() // the default page: 100
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("mysqlstore: list parked: %w", classify(err))
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET SESSION max_sort_length = 262144, sort_buffer_size = 8388608"); err != nil {
		return nil, fmt.Errorf("mysqlstore: list parked: %w", classify(err))
	}
	defer func() {
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), "SET SESSION max_sort_length = DEFAULT, sort_buffer_size = DEFAULT")
	}()
	rows, err := conn.QueryContext(ctx, s.q.listParked, s.shiftArg(), []byte(afterCaller), []byte(afterCaller), []byte(afterKey), limit)
	if err != nil {
		return nil, fmt.Errorf("mysqlstore: list parked: %w", classify(err))
	}
	defer rows.Close()
	var recs []idempotency.Record
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, fmt.Errorf("mysqlstore: list parked: %w", classify(err))
		}
		recs = append(recs, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mysqlstore: list parked: %w", classify(err))
	}
	return recs, nil
}
