package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrNotMigrated is matched (errors.Is) by the error of New when the
// database answers that the store's schema has no tables: run Migrate (or
// apply SchemaSQL) first.
var ErrNotMigrated = errors.New("pgstore: the schema has no idempotency tables")

// checkTimeout bounds New's look at the schema.
const checkTimeout = 2 * time.Second

// checkSchema asks the database whether schema holds the store's table.
// A database that cannot be reached within checkTimeout is not checked:
// the store's first statement will say what is wrong.
func checkSchema(pool *pgxpool.Pool, schema string) error {
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	table := pgx.Identifier{schema, "idempotency_keys"}.Sanitize()
	var found bool
	if err := pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", table).Scan(&found); err != nil || found {
		return nil
	}
	return fmt.Errorf("%w: %s does not exist; create it with pgstore.Migrate(ctx, pool, %q) or apply pgstore.SchemaSQL(%q)",
		ErrNotMigrated, table, schema, schema)
}
