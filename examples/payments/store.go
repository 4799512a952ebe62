package main

import (
	"context"
	"fmt"
	"os"
	"sync"
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
	storeRedis    = "redis"
	storeMySQL    = "mysql"
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

// storeOpener opens the idempotency store for one instance of the service.
type storeOpener func(context.Context) (idempotency.Store, error)

// openStore prepares a fresh, empty idempotency store of the configured kind
// and returns a function that opens it for one instance of the service, and
// a function that removes it. Every instance sees the same records: a
// MemoryStore is shared (it lives in this process, which outlives a killed
// instance), and each instance on PostgreSQL, Redis or MySQL gets
// connections of its own to one schema, key prefix or set of tables, made
// for the run and removed afterwards.
func openStore(ctx context.Context, cfg config) (storeOpener, func(), error) {
	switch cfg.Store {
	case storePostgres:
		return openPostgres(ctx, cfg)
	case storeRedis:
		return openRedis(ctx, cfg)
	case storeMySQL:
		return openMySQL(ctx, cfg)
	}
	store := idempotency.NewMemoryStore(nil)
	return func(context.Context) (idempotency.Store, error) { return store, nil }, func() {}, nil
}

// openPostgres prepares a fresh schema on cfg.DSN (see openStore).
func openPostgres(ctx context.Context, cfg config) (storeOpener, func(), error) {
	admin, err := pgxpool.New(ctx, cfg.DSN)
	if err != nil {
		return nil, nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	schema := fmt.Sprintf("payments_demo_%d", time.Now().UnixNano())
	var (
		mu    sync.Mutex
		pools []*pgxpool.Pool
	)
	drop := func() {
		mu.Lock()
		for _, p := range pools {
			p.Close()
		}
		pools = nil
		mu.Unlock()
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		admin.Exec(dctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		admin.Close()
	}
	if err := pgstore.Migrate(ctx, admin, schema); err != nil {
		drop()
		return nil, nil, fmt.Errorf("migrate PostgreSQL schema %s: %w", schema, err)
	}
	open := func(ctx context.Context) (idempotency.Store, error) {
		pool, err := pgxpool.New(ctx, cfg.DSN)
		if err != nil {
			return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
		}
		store, err := pgstore.New(pool, pgstore.WithSchema(schema))
		if err != nil {
			pool.Close()
			return nil, err
		}
		mu.Lock()
		pools = append(pools, pool)
		mu.Unlock()
		return store, nil
	}
	return open, drop, nil
}
