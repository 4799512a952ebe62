package pgstore_test

import (
	"context"
	"testing"

	"github.com/exactlyonce/retry/idempotency/pgstore"
	"github.com/exactlyonce/retry/idempotency/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		s, schema, shift := newStore(t)
		return storetest.Harness{
			Store:   s,
			Advance: shift.Advance,
			TxWrite: func(ctx context.Context, name string) error { return localWrite(ctx, schema, name) },
			TxFail: func(ctx context.Context) error {
				tx, ok := pgstore.TxFrom(ctx)
				if !ok {
					return errNoTx
				}
				_, err := tx.Exec(ctx, "SELECT 1/0")
				return err
			},
			TxWritten: func(t *testing.T, name string) bool {
				return written(t, s.Pool(), schema, name)
			},
		}
	})
}
