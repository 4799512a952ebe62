package pgstore

import (
	"context"
	_ "embed"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

//go:embed schema.sql
var schemaSQL string

// migrateLockID is the advisory lock that serialises concurrent migrations.
const migrateLockID = 0x65786f6e6365 // "exonce"

// DefaultSchema is the schema a Store uses when no WithSchema option is given.
const DefaultSchema = "exactlyonce"

// SchemaSQL returns the DDL that Migrate applies for schema, for teams that
// run migrations with their own tool. Every statement is idempotent.
func SchemaSQL(schema string) string {
	ident := pgx.Identifier{schema}.Sanitize()
	return strings.NewReplacer("__SCHEMA__", ident, "__GENERATION_SEQ__", generationSeq(ident),
		"__SCHEMA_TEXT__", "'"+strings.ReplaceAll(ident, "'", "''")+"'").Replace(schemaSQL)
}

// generationSeq is the name of the generation sequence in the schema whose
// quoted name is ident, as a string literal (for nextval).
func generationSeq(ident string) string {
	return "'" + strings.ReplaceAll(ident+".idempotency_generation_seq", "'", "''") + "'"
}

// Beginner starts a transaction; *pgxpool.Pool and *pgx.Conn implement it.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Migrate creates (or completes) the store's tables in schema, in one
// transaction holding an advisory lock, so every instance may call it at
// start-up at the same time. On an up-to-date schema it changes nothing
// and takes no table lock, so it may run beside instances that serve. A Store never creates its tables by itself:
// call Migrate (or apply SchemaSQL) before using it. An empty schema is
// DefaultSchema, the one New uses without WithSchema.
func Migrate(ctx context.Context, db Beginner, schema string) error {
	if schema == "" {
		schema = DefaultSchema
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgstore: migrate: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(migrateLockID)); err != nil {
		return fmt.Errorf("pgstore: migrate: lock: %w", err)
	}
	if _, err := tx.Exec(ctx, SchemaSQL(schema)); err != nil {
		return fmt.Errorf("pgstore: migrate schema %q: %w", schema, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgstore: migrate: commit: %w", err)
	}
	return nil
}
