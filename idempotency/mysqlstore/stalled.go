package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/go-sql-driver/mysql"
)

// defaultStalledLimit bounds a TakeOverStalled call given no limit.
const defaultStalledLimit = 1000

// TakeOverStalled takes over up to limit stalled executions (those that
// began, whose lease ran out, not parked; only caller's unless caller is
// ""; limit <= 0: 1,000) in one READ COMMITTED transaction: a locking
// read of the oldest leases first through an index of the executing rows,
// skipping rows another transaction holds (another instance's takeover, a
// claim, a completion), then one UPDATE of the rows it locked. The rows of
// other callers are never changed. Instances running it at once share the work, and none
// waits for another's locks. Each record comes back with its Attempt
// incremented and a lease of lease from the database clock.
func (s *Store) TakeOverStalled(ctx context.Context, caller string, limit int, lease time.Duration) ([]idempotency.Record, error) {
	if lease <= 0 {
		return nil, retry.Permanent(fmt.Errorf("mysqlstore: take over stalled: lease %v must be positive", lease))
	}
	if limit <= 0 {
		limit = defaultStalledLimit
	}
	var only any // NULL: every caller
	if caller != "" {
		only = []byte(caller)
	}
	var taken []idempotency.Record
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		taken = taken[:0]
		rows, err := tx.QueryContext(ctx, s.q.stalledRead, s.shiftArg(), s.shiftArg(), s.shiftArg(), only, only, limit)
		if err != nil {
			return err
		}
		var (
			now int64
			ids [][]byte
		)
		for rows.Next() {
			var id []byte
			r, err := scanRecord(rows, &now, &id)
			if err != nil {
				rows.Close()
				return err
			}
			taken, ids = append(taken, r), append(ids, id)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if err := rows.Err(); err != nil || len(ids) == 0 {
			return err
		}
		lu := now + lease.Microseconds()
		args := []any{lu}
		for _, id := range ids {
			args = append(args, id)
		}
		res, err := tx.ExecContext(ctx, "UPDATE "+s.q.keysTable+" SET attempt = attempt + 1, locked_until = ? WHERE id IN ("+
			strings.TrimSuffix(strings.Repeat("?, ", len(ids)), ", ")+")", args...)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != int64(len(ids)) {
			return fmt.Errorf("updated %d of the %d rows it locked: %v", n, len(ids), err)
		}
		for i := range taken {
			taken[i].Attempt++
			taken[i].LockedUntil = fromMicros(lu)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("mysqlstore: take over stalled: %w", err)
	}
	return taken, nil
}

// txTries bounds how often inTx runs a transaction that InnoDB chose as
// the victim of a deadlock.
const txTries = 5

// errDeadlock is InnoDB's ER_LOCK_DEADLOCK: the transaction was rolled back.
const errDeadlock = 1213

// inTx runs f in a READ COMMITTED transaction and commits it, or rolls it
// back when f fails. A transaction rolled back to break a deadlock (with a
// claim writing the same rows, say) runs again, a few times. Errors are
// classified.
func (s *Store) inTx(ctx context.Context, f func(tx *sql.Tx) error) error {
	var err error
	for range txTries {
		if err = s.tryTx(ctx, f); !isDeadlock(err) {
			break
		}
	}
	return classify(err)
}

func (s *Store) tryTx(ctx context.Context, f func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return err
	}
	if err := f(tx); err != nil {
		return errors.Join(err, ignoreDone(tx.Rollback()))
	}
	return tx.Commit()
}

// isDeadlock reports whether err is InnoDB's deadlock error.
func isDeadlock(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == errDeadlock
}

// ignoreDone drops sql.ErrTxDone: a transaction the context already ended.
func ignoreDone(err error) error {
	if errors.Is(err, sql.ErrTxDone) {
		return nil
	}
	return err
}
