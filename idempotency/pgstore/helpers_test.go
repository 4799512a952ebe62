package pgstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"

	"github.com/exactlyonce/retry/idempotency/pgstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// dsnEnv names the environment variable holding the test database's
// connection string.
const dsnEnv = "EXACTLYONCE_PG_DSN"

func dsn() string {
	if s := os.Getenv(dsnEnv); s != "" {
		return s
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// newPool opens a pool on the test database, closed at cleanup.
func newPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn())
	require.NoError(t, err)
	return newPoolFrom(t, cfg)
}

func newPoolFrom(t testing.TB, cfg *pgxpool.Config) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// newSchema creates a fresh, migrated schema with a random name, dropped at
// cleanup, plus a local_writes table standing for a handler's own data.
func newSchema(t testing.TB, pool *pgxpool.Pool) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "pgstore_test_" + hex.EncodeToString(b[:])
	ctx := context.Background()
	require.NoError(t, pgstore.Migrate(ctx, pool, schema))
	t.Cleanup(func() {
		_, err := pool.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	_, err := pool.Exec(ctx, "CREATE TABLE "+pgx.Identifier{schema, "local_writes"}.Sanitize()+
		" (name text PRIMARY KEY, n int NOT NULL DEFAULT 1)")
	require.NoError(t, err)
	return schema
}

// freshSchema returns a new schema name made of prefix and random digits,
// for an example: test processes running at the same time (CI, and a
// developer's run) never share it.
func freshSchema(prefix string) string { return prefix + "_" + randomHex(12) }

// table returns the quoted name of a table in schema.
func table(schema, name string) string { return pgx.Identifier{schema, name}.Sanitize() }

// newStore builds a Store on a fresh schema; the returned pool and shift are its own.
func newStore(t testing.TB) (*pgstore.Store, string, *pgstore.TimeShift) {
	t.Helper()
	pool := newPool(t)
	schema := newSchema(t, pool)
	shift := new(pgstore.TimeShift)
	s, err := pgstore.New(pool, pgstore.WithSchema(schema), pgstore.WithTimeShift(shift))
	require.NoError(t, err)
	return s, schema, shift
}

// localWrite inserts name into local_writes through the transaction in ctx.
func localWrite(ctx context.Context, schema, name string) error {
	tx, ok := pgstore.TxFrom(ctx)
	if !ok {
		return errNoTx
	}
	_, err := tx.Exec(ctx, "INSERT INTO "+table(schema, "local_writes")+" (name) VALUES ($1)", name)
	return err
}

// written reports whether a committed local write named name exists.
func written(t testing.TB, pool *pgxpool.Pool, schema, name string) bool {
	t.Helper()
	var ok bool
	require.NoError(t, pool.QueryRow(context.Background(),
		"SELECT EXISTS (SELECT 1 FROM "+table(schema, "local_writes")+" WHERE name = $1)", name).Scan(&ok))
	return ok
}

type testError string

func (e testError) Error() string { return string(e) }

const errNoTx = testError("no transaction in the context")

// countRows counts the rows of a table in schema.
func countRows(t testing.TB, pool *pgxpool.Pool, schema, name string) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table(schema, name)).Scan(&n))
	return n
}

// randomHex returns n random hexadecimal digits.
func randomHex(n int) string {
	b := make([]byte, (n+1)/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)[:n]
}
