package mysqlstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/exactlyonce/retry/idempotency/mysqlstore"
	"github.com/exactlyonce/retry/idempotency/storetest/sim"
)

// TestSimulation runs the deterministic simulation of the protocol on the
// store, its leases on the database's clock moved by a TimeShift, each
// execution's local write committed in its transaction.
func TestSimulation(t *testing.T) {
	s, prefix, shift := newStore(t)
	sim.Run(t, sim.Harness{
		Store:   s,
		Now:     func() time.Time { return time.Now().Add(shift.Offset()) },
		Advance: shift.Advance,
		LocalWrite: func(ctx context.Context, name string) error {
			return localWrite(ctx, prefix, name)
		},
		FailWrite: func(ctx context.Context) error {
			tx, ok := mysqlstore.TxFrom(ctx)
			if !ok {
				return errNoTx
			}
			_, err := tx.ExecContext(ctx, "SIGNAL SQLSTATE '40001' SET MYSQL_ERRNO = 1213, MESSAGE_TEXT = 'sim: deadlock'")
			return err
		},
		LocalWrites: func(ctx context.Context, p string) ([]string, error) {
			rows, err := s.DB().QueryContext(ctx, "SELECT name FROM `"+prefix+"local_writes` WHERE LEFT(name, ?) = ?", len(p), p)
			if err != nil {
				return nil, err
			}
			defer func() { _ = rows.Close() }()
			var names []string
			for rows.Next() {
				var n string
				if err := rows.Scan(&n); err != nil {
					return nil, err
				}
				names = append(names, n)
			}
			return names, rows.Err()
		},
	}, sim.Options{Seeds: 40})
}
