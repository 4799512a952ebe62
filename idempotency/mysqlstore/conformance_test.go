package mysqlstore_test

import (
	"context"
	"testing"

	"github.com/exactlyonce/retry/idempotency/mysqlstore"
	"github.com/exactlyonce/retry/idempotency/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		s, prefix, shift := newStore(t)
		return storetest.Harness{
			Store:   s,
			Advance: shift.Advance,
			TxWrite: func(ctx context.Context, name string) error { return localWrite(ctx, prefix, name) },
			// A duplicate key: MySQL rolls back the statement and lets the
			// transaction go on, so a COMMIT would keep "before".
			TxFail: func(ctx context.Context) error {
				tx, ok := mysqlstore.TxFrom(ctx)
				if !ok {
					return errNoTx
				}
				_, err := tx.ExecContext(ctx, "INSERT INTO `"+prefix+"local_writes` (name) VALUES ('dup'), ('dup')")
				return err
			},
			TxWritten: func(t *testing.T, name string) bool { return written(t, s, prefix, name) },
		}
	})
}
