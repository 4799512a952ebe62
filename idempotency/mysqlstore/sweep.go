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
// and returns how many it removed, at most 1,000 at a time: it reads the
// earliest expired rows without a lock, then deletes those that still are
// expired in one statement that locks them by primary key, in the order a
// claim locks a row, so that a sweep never deadlocks with claims replacing
// the same rows. Every instance may sweep at once; a row another removed
// first is not counted twice.
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
	args := []any{s.shiftArg()}
	for rows.Next() {
		var id []byte
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, err
		}
		args = append(args, id)
	}
	if err := rows.Close(); err != nil {
		return 0, err
	}
	if err := rows.Err(); err != nil || len(args) == 1 {
		return 0, err
	}
	res, err := tx.ExecContext(ctx, s.q.deleteExpired+"("+strings.TrimSuffix(strings.Repeat("?, ", len(args)-1), ", ")+")", args...)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}
