package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/pgstore"
)

// Stores the demo can run on.
const (
	storeMemory   = "memory"
	storePostgres = "postgres"
)

// defaultDSN is the PostgreSQL server the demo uses unless EXACTLYONCE_PG_DSN
// or -dsn says otherwise.
const defaultDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// envDSN returns EXACTLYONCE_PG_DSN, or defaultDSN.
func envDSN() string {
	if dsn := os.Getenv("EXACTLYONCE_PG_DSN"); dsn != "" {
		return dsn
	}
	return defaultDSN
}

// openStore returns a fresh, empty idempotency store of the configured kind
// and a function that removes it. A PostgreSQL store gets a schema of its
// own, created with pgstore.Migrate and dropped afterwards.
func openStore(ctx context.Context, cfg config) (idempotency.Store, func(), error) {
	if cfg.Store != storePostgres {
		return idempotency.NewMemoryStore(nil), func() {}, nil
	}
	pool, err := pgxpool.New(ctx, cfg.DSN)
	if err != nil {
		return nil, nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	schema := fmt.Sprintf("payments_demo_%d", time.Now().UnixNano())
	drop := func() {
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		pool.Exec(dctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		pool.Close()
	}
	if err := pgstore.Migrate(ctx, pool, schema); err != nil {
		drop()
		return nil, nil, fmt.Errorf("migrate PostgreSQL schema %s: %w", schema, err)
	}
	store, err := pgstore.New(pool, pgstore.WithSchema(schema))
	if err != nil {
		drop()
		return nil, nil, err
	}
	return store, drop, nil
}
