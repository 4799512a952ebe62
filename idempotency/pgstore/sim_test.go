package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/exactlyonce/retry/idempotency/pgstore"
	"github.com/exactlyonce/retry/idempotency/storetest/sim"
)

// TestSimulation runs the deterministic simulation of the protocol on the
// store, its leases on the database's clock moved by a TimeShift, each
// execution's local write committed in its transaction.
func TestSimulation(t *testing.T) {
	s, schema, shift := newStore(t)
	pool := newPool(t)
	sim.Run(t, sim.Harness{
		Store:   s,
		Now:     func() time.Time { return time.Now().Add(shift.Offset()) },
		Advance: shift.Advance,
		LocalWrite: func(ctx context.Context, name string) error {
			return localWrite(ctx, schema, name)
		},
		FailWrite: func(ctx context.Context) error {
			tx, ok := pgstore.TxFrom(ctx)
			if !ok {
				return errNoTx
			}
			_, err := tx.Exec(ctx, "DO $$ BEGIN RAISE EXCEPTION 'sim: serialization failure' USING ERRCODE = '40001'; END $$")
			return err
		},
		LocalWrites: func(ctx context.Context, prefix string) ([]string, error) {
			rows, err := pool.Query(ctx, "SELECT name FROM "+table(schema, "local_writes")+" WHERE starts_with(name, $1)", prefix)
			if err != nil {
				return nil, err
			}
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
