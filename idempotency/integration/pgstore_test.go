package integration_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/idempotency/pgstore"
	"github.com/exactlyonce/retry/idempotency/storetest"
	"github.com/exactlyonce/retry/idempotency/storetest/linearize"
)

// pgDSNEnv names the environment variable holding the PostgreSQL test
// database's connection string.
const pgDSNEnv = "EXACTLYONCE_PG_DSN"

func pgDSN() string {
	if s := os.Getenv(pgDSNEnv); s != "" {
		return s
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// Concurrent calls on one pgstore, with owners paused past their leases
// and the clock moved, make a linearizable history.
func TestPGStoreLinearizable(t *testing.T) {
	t.Parallel()
	linearize.Run(t, func(t *testing.T) storetest.Harness {
		s, shift := newPGStore(t)
		return storetest.Harness{Store: s, Advance: shift.Advance}
	})
}

// newPGStore builds a pgstore on a fresh schema, dropped at cleanup, with a
// pool and a time shift of its own.
func newPGStore(t testing.TB) (*pgstore.Store, *pgstore.TimeShift) {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgDSN())
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "pgstore_test_" + hex.EncodeToString(b[:])
	require.NoError(t, pgstore.Migrate(ctx, pool, schema))
	t.Cleanup(func() {
		if _, err := pool.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	shift := new(pgstore.TimeShift)
	s, err := pgstore.New(pool, pgstore.WithSchema(schema), pgstore.WithTimeShift(shift))
	require.NoError(t, err)
	return s, shift
}
