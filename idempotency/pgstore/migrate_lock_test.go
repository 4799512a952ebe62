package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/idempotency/pgstore"
)

// Migrating an up-to-date schema takes no lock that waits for the writes
// of instances that serve (a claim, an outbox message in their open
// transactions), so an instance may migrate at start-up during a rolling
// deploy. CREATE INDEX IF NOT EXISTS took a SHARE lock before it looked,
// and deadlocked with such a transaction.
func TestMigrateUpToDateDoesNotWaitForWriters(t *testing.T) {
	t.Parallel()
	s, schema, _ := newStore(t)
	ctx := context.Background()
	writer, err := s.Pool().Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = writer.Rollback(ctx) }()
	for _, name := range []string{"idempotency_keys", "outbox"} {
		_, err = writer.Exec(ctx, "UPDATE "+table(schema, name)+" SET created_at = created_at WHERE false")
		require.NoError(t, err)
	}

	mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	require.NoError(t, pgstore.Migrate(mctx, s.Pool(), schema))
}

// An outbox made before messages could be parked (no parked_at column)
// gets the column and its index.
func TestMigrateAddsOutboxParkedAt(t *testing.T) {
	t.Parallel()
	s, schema, _ := newStore(t)
	ctx := context.Background()
	_, err := s.Pool().Exec(ctx, "ALTER TABLE "+table(schema, "outbox")+" DROP COLUMN parked_at")
	require.NoError(t, err)
	require.NoError(t, pgstore.Migrate(ctx, s.Pool(), schema))
	var columns, indexes int
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM information_schema.columns
		WHERE table_schema = $1 AND table_name = 'outbox' AND column_name = 'parked_at'`, schema).Scan(&columns))
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_indexes
		WHERE schemaname = $1 AND indexname = 'outbox_pending_idx'`, schema).Scan(&indexes))
	assert.Equal(t, 1, columns)
	assert.Equal(t, 1, indexes)
}
