package mysqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// sweepBatch is how many rows one DeleteExpired transaction deletes at most.
const sweepBatch = 1000

// DeleteExpired removes up to limit expired records (limit <= 0: all of them)
// and returns how many it removed, in READ COMMITTED transactions of at most
// 1,000 rows: a locking read of the earliest expired rows that skips rows
// another transaction holds (another sweeper, a claim replacing the row),
// then a DELETE of those. Every instance may sweep at once without waiting
// on the others.
func (s *Store) DeleteExpired(ctx context.Context, limit int) (int, error) {
	total := 0
	for {
		batch := sweepBatch
		if limit > 0 {
			batch = min(batch, limit-total)
		}
		if batch <= 0 {
			return total, nil
		}
		var n int
		err := s.inTx(ctx, func(tx *sql.Tx) error {
			var err error
			n, err = s.deleteBatch(ctx, tx, batch)
			return err
		})
		if err != nil {
			return total, fmt.Errorf("mysqlstore: delete expired: %w", err)
		}
		total += n
		if n < batch {
			return total, nil
		}
	}
}

// deleteBatch deletes up to batch expired rows in tx.
func (s *Store) deleteBatch(ctx context.Context, tx *sql.Tx, batch int) (int, error) {
	rows, err := tx.QueryContext(ctx, s.q.deleteRead, s.shiftArg(), batch)
	if err != nil {
		return 0, err
	}
	var ids []any
	for rows.Next() {
		var id []byte
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, err
		}
		ids = append(ids, id)
	}
	if err := rows.Close(); err != nil {
		return 0, err
	}
	if err := rows.Err(); err != nil || len(ids) == 0 {
		return 0, err
	}
	res, err := tx.ExecContext(ctx, "DELETE FROM "+s.q.keysTable+" WHERE id IN ("+
		strings.TrimSuffix(strings.Repeat("?, ", len(ids)), ", ")+")", ids...)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}
