package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/pgstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

func init() { openers["pg"] = openPG }

// pgBackend is pgstore with the ledger in the store's schema: effects and
// outbox messages written in the execution's transaction.
type pgBackend struct {
	pool   *pgxpool.Pool
	schema string
	ident  string
	store  *pgstore.Store
}

func openPG(ctx context.Context, dsn, schema string, migrate, store bool) (backend, error) {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, err
	}
	b := &pgBackend{pool: pool, schema: schema, ident: pgx.Identifier{schema}.Sanitize()}
	if migrate {
		if err := b.Migrate(ctx); err != nil {
			pool.Close()
			return nil, err
		}
	}
	if store {
		if b.store, err = pgstore.New(pool, pgstore.WithSchema(schema)); err != nil {
			pool.Close()
			return nil, err
		}
	}
	return b, nil
}

func (b *pgBackend) Store() idempotency.Store { return b.store }

func (b *pgBackend) Close() { b.pool.Close() }

func (b *pgBackend) Migrate(ctx context.Context) error {
	if err := pgstore.Migrate(ctx, b.pool, b.schema); err != nil {
		return err
	}
	_, err := b.pool.Exec(ctx, `
CREATE TABLE IF NOT EXISTS `+b.ident+`.upgrade_effects (k text NOT NULL, body text NOT NULL);
CREATE TABLE IF NOT EXISTS `+b.ident+`.upgrade_calls (k text NOT NULL, step text NOT NULL, dk text NOT NULL);
CREATE TABLE IF NOT EXISTS `+b.ident+`.upgrade_deliveries (id text NOT NULL, payload text NOT NULL)`)
	return err
}

// Schema lists the columns, indexes, constraints and functions of the
// store's schema, not the ledger's tables.
func (b *pgBackend) Schema(ctx context.Context) (string, error) {
	rows, err := b.pool.Query(ctx, `
SELECT 'column ' || table_name || '.' || column_name || ' ' || data_type || ' null=' || is_nullable
       || ' default=' || coalesce(column_default, '') || ' generated=' || coalesce(generation_expression, '')
  FROM information_schema.columns WHERE table_schema = $1 AND table_name NOT LIKE 'upgrade\_%'
UNION ALL
SELECT 'index ' || indexdef FROM pg_indexes WHERE schemaname = $1 AND tablename NOT LIKE 'upgrade\_%'
UNION ALL
SELECT 'constraint ' || c.conrelid::regclass::text || ' ' || pg_get_constraintdef(c.oid)
  FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace WHERE n.nspname = $1
UNION ALL
SELECT 'function ' || p.proname || ' ' || md5(p.prosrc)
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1
UNION ALL
SELECT 'sequence ' || sequence_name FROM information_schema.sequences WHERE sequence_schema = $1
ORDER BY 1`, b.schema)
	if err != nil {
		return "", err
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return strings.Join(lines, "\n"), err
}

func (b *pgBackend) Call(ctx context.Context, key, step, dk string) error {
	_, err := b.pool.Exec(ctx, `INSERT INTO `+b.ident+`.upgrade_calls (k, step, dk) VALUES ($1, $2, $3)`, key, step, dk)
	return err
}

func (b *pgBackend) Effect(ctx context.Context, key, body string) (string, error) {
	tx, ok := pgstore.TxFrom(ctx)
	if !ok {
		return "", fmt.Errorf("no transaction for %s", key)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO `+b.ident+`.upgrade_effects (k, body) VALUES ($1, $2)`, key, body); err != nil {
		return "", err
	}
	if _, err := b.store.Enqueue(ctx, tx, "orders", []byte(key)); err != nil {
		return "", err
	}
	return body, nil
}

func (b *pgBackend) Relay(ctx context.Context) (int, error) {
	r := &pgstore.Relay{Store: b.store, Deliver: func(ctx context.Context, m outboxMessage) error {
		_, err := b.pool.Exec(ctx, `INSERT INTO `+b.ident+`.upgrade_deliveries (id, payload) VALUES ($1, $2)`, m.ID, string(m.Payload))
		return err
	}}
	return r.RunOnce(ctx)
}

func (b *pgBackend) Ledger(ctx context.Context) (Ledger, error) {
	l := Ledger{Effects: map[string][]string{}, Calls: map[string]map[string]int{}, Outbox: &OutboxLedger{Messages: map[string]int{}, Deliveries: map[string]int{}}}
	rows, err := b.pool.Query(ctx, `SELECT k, body FROM `+b.ident+`.upgrade_effects`)
	if err != nil {
		return l, err
	}
	var k, v string
	if _, err := pgx.ForEachRow(rows, []any{&k, &v}, func() error {
		l.Effects[k] = append(l.Effects[k], v)
		return nil
	}); err != nil {
		return l, err
	}
	rows, err = b.pool.Query(ctx, `SELECT k, step FROM `+b.ident+`.upgrade_calls`)
	if err != nil {
		return l, err
	}
	if _, err := pgx.ForEachRow(rows, []any{&k, &v}, func() error {
		if l.Calls[k] == nil {
			l.Calls[k] = map[string]int{}
		}
		l.Calls[k][v]++
		return nil
	}); err != nil {
		return l, err
	}
	var delivered bool
	rows, err = b.pool.Query(ctx, `SELECT convert_from(payload, 'UTF8'), delivered_at IS NOT NULL FROM `+b.ident+`.outbox`)
	if err != nil {
		return l, err
	}
	if _, err := pgx.ForEachRow(rows, []any{&k, &delivered}, func() error {
		l.Outbox.Messages[k]++
		if !delivered {
			l.Outbox.Undelivered++
		}
		return nil
	}); err != nil {
		return l, err
	}
	rows, err = b.pool.Query(ctx, `SELECT payload FROM `+b.ident+`.upgrade_deliveries`)
	if err != nil {
		return l, err
	}
	_, err = pgx.ForEachRow(rows, []any{&k}, func() error {
		l.Outbox.Deliveries[k]++
		return nil
	})
	return l, err
}

func (b *pgBackend) Drop(ctx context.Context) error {
	_, err := b.pool.Exec(ctx, `DROP SCHEMA IF EXISTS `+b.ident+` CASCADE`)
	return err
}
