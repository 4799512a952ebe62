package pgstore_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/exactlyonce/retry/idempotency/pgstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every instance may migrate at start-up at the same time, and again later.
func TestMigrateConcurrentAndRepeatable(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	schema := newSchema(t, pool) // migrated once already
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { assert.NoError(t, pgstore.Migrate(context.Background(), pool, schema)) })
	}
	wg.Wait()
}

func TestSchemaSQLQuotesTheSchema(t *testing.T) {
	sql := pgstore.SchemaSQL(`we"ird`)
	assert.Contains(t, sql, `CREATE SCHEMA IF NOT EXISTS "we""ird";`)
	assert.NotContains(t, sql, "__SCHEMA__")
	assert.True(t, strings.Contains(sql, "PRIMARY KEY (caller, key)"))
}

func TestNewValidates(t *testing.T) {
	_, err := pgstore.New(nil)
	assert.Error(t, err)
	pool := newPool(t)
	_, err = pgstore.New(pool, pgstore.WithSchema(""))
	assert.Error(t, err)
	require.Error(t, pgstore.Migrate(context.Background(), pool, ""))
}

// A store on a schema that was never migrated fails loudly; it does not
// create tables behind the caller's back.
func TestNoSilentSchemaCreation(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	s, err := pgstore.New(pool, pgstore.WithSchema("pgstore_test_never_migrated"))
	require.NoError(t, err)
	_, err = s.Claim(context.Background(), claimReq("k"))
	require.Error(t, err)
	var exists bool
	require.NoError(t, pool.QueryRow(context.Background(),
		"SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'pgstore_test_never_migrated')").Scan(&exists))
	assert.False(t, exists)
}
