package mysqlstore

import (
	"context"
	"database/sql"
	_ "embed"
	"fmt"
	"strings"
)

//go:embed schema.sql
var schemaSQL string

// SchemaSQL returns the DDL that Migrate applies for prefix (see
// WithTablePrefix), statements separated by lines holding only ";", for
// teams that apply migrations with their own tool.
func SchemaSQL(prefix string) (string, error) {
	if !validPrefix.MatchString(prefix) {
		return "", fmt.Errorf("mysqlstore: table prefix %q: letters, digits and underscores, at most 32", prefix)
	}
	return strings.ReplaceAll(schemaSQL, "__PREFIX__", prefix), nil
}

// Migrate creates the store's tables with prefix if they do not exist. It is
// safe to run again and from many instances at once. It needs MySQL 8.0 or
// MariaDB 10.6 or later (FOR UPDATE SKIP LOCKED).
func Migrate(ctx context.Context, db *sql.DB, prefix string) error {
	ddl, err := SchemaSQL(prefix)
	if err != nil {
		return err
	}
	for _, stmt := range strings.Split(ddl, "\n;\n") {
		if strings.TrimSpace(stripComments(stmt)) == "" {
			continue
		}
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("mysqlstore: migrate: %w", classify(err))
		}
	}
	return nil
}

// stripComments drops the lines that are only a comment.
func stripComments(stmt string) string {
	var b strings.Builder
	for line := range strings.SplitSeq(stmt, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}
