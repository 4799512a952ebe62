package main

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/mysqlstore"
	"github.com/go-sql-driver/mysql"
)

func init() { openers["mysql"] = openMySQL }

// mysqlBackend is mysqlstore with the ledger in tables of the same prefix:
// effects written in the execution's transaction.
type mysqlBackend struct {
	db     *sql.DB
	prefix string
	store  *mysqlstore.Store
}

func openMySQL(ctx context.Context, dsn, prefix string, migrate, _ bool) (backend, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	store, err := mysqlstore.Open(cfg, mysqlstore.WithTablePrefix(prefix))
	if err != nil {
		return nil, err
	}
	b := &mysqlBackend{db: store.DB(), prefix: prefix, store: store}
	if migrate {
		if err := b.Migrate(ctx); err != nil {
			_ = store.Close()
			return nil, err
		}
	}
	return b, nil
}

func (b *mysqlBackend) Store() idempotency.Store { return b.store }

func (b *mysqlBackend) Close() { _ = b.store.Close() }

func (b *mysqlBackend) Migrate(ctx context.Context) error {
	if err := mysqlstore.Migrate(ctx, b.db, b.prefix); err != nil {
		return err
	}
	for _, ddl := range []string{
		"CREATE TABLE IF NOT EXISTS `" + b.prefix + "upgrade_effects` (k VARCHAR(255) NOT NULL, body TEXT NOT NULL, KEY (k))",
		"CREATE TABLE IF NOT EXISTS `" + b.prefix + "upgrade_calls` (k VARCHAR(255) NOT NULL, step VARCHAR(64) NOT NULL, dk TEXT NOT NULL)",
	} {
		if _, err := b.db.ExecContext(ctx, ddl); err != nil {
			return err
		}
	}
	return nil
}

// tables returns the store's tables (not the ledger's).
func (b *mysqlBackend) tables(ctx context.Context, ledger bool) ([]string, error) {
	rows, err := b.db.QueryContext(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name LIKE ? ORDER BY table_name`,
		strings.ReplaceAll(b.prefix, "_", `\_`)+"%")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			return nil, err
		}
		if ledger || !strings.HasPrefix(t, b.prefix+"upgrade_") {
			out = append(out, t)
		}
	}
	return out, rows.Err()
}

// Schema is SHOW CREATE TABLE of each of the store's tables.
func (b *mysqlBackend) Schema(ctx context.Context) (string, error) {
	tables, err := b.tables(ctx, false)
	if err != nil {
		return "", err
	}
	var out []string
	for _, t := range tables {
		var name, ddl string
		if err := b.db.QueryRowContext(ctx, "SHOW CREATE TABLE `"+t+"`").Scan(&name, &ddl); err != nil {
			return "", err
		}
		out = append(out, ddl)
	}
	return strings.Join(out, "\n"), nil
}

func (b *mysqlBackend) Call(ctx context.Context, key, step, dk string) error {
	_, err := b.db.ExecContext(ctx, "INSERT INTO `"+b.prefix+"upgrade_calls` (k, step, dk) VALUES (?, ?, ?)", key, step, dk)
	return err
}

func (b *mysqlBackend) Effect(ctx context.Context, key, body string) (string, error) {
	tx, ok := mysqlstore.TxFrom(ctx)
	if !ok {
		return "", fmt.Errorf("no transaction for %s", key)
	}
	_, err := tx.ExecContext(ctx, "INSERT INTO `"+b.prefix+"upgrade_effects` (k, body) VALUES (?, ?)", key, body)
	return body, err
}

func (b *mysqlBackend) Relay(context.Context) (int, error) { return 0, nil }

func (b *mysqlBackend) Ledger(ctx context.Context) (Ledger, error) {
	l := Ledger{Effects: map[string][]string{}, Calls: map[string]map[string]int{}}
	rows, err := b.db.QueryContext(ctx, "SELECT k, body FROM `"+b.prefix+"upgrade_effects`")
	if err != nil {
		return l, err
	}
	defer rows.Close()
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return l, err
		}
		l.Effects[k] = append(l.Effects[k], v)
	}
	if err := rows.Err(); err != nil {
		return l, err
	}
	rows2, err := b.db.QueryContext(ctx, "SELECT k, step FROM `"+b.prefix+"upgrade_calls`")
	if err != nil {
		return l, err
	}
	defer rows2.Close()
	for rows2.Next() {
		var k, v string
		if err := rows2.Scan(&k, &v); err != nil {
			return l, err
		}
		if l.Calls[k] == nil {
			l.Calls[k] = map[string]int{}
		}
		l.Calls[k][v]++
	}
	return l, rows2.Err()
}

func (b *mysqlBackend) Drop(ctx context.Context) error {
	tables, err := b.tables(ctx, true)
	if err != nil {
		return err
	}
	for _, t := range tables {
		if _, err := b.db.ExecContext(ctx, "DROP TABLE IF EXISTS `"+t+"`"); err != nil {
			return err
		}
	}
	return nil
}
