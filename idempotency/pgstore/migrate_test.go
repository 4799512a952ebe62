package pgstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/pgstore"
	"github.com/jackc/pgx/v5"
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

// A table made before records had generations gets the column, with a
// distinct generation for every row, and fencing works on the old rows.
func TestMigrateAddsGenerations(t *testing.T) {
	t.Parallel()
	s, schema, _ := newStore(t)
	ctx := context.Background()
	var recs []idempotency.Record
	for _, k := range []string{"a", "b", "c"} {
		recs = append(recs, mustClaim(t, s, claimReq(k), idempotency.ClaimCreated))
	}
	keys := table(schema, "idempotency_keys")
	_, err := s.Pool().Exec(ctx, "ALTER TABLE "+keys+" DROP COLUMN generation")
	require.NoError(t, err)

	require.NoError(t, pgstore.Migrate(ctx, s.Pool(), schema))
	var distinct, null int
	require.NoError(t, s.Pool().QueryRow(ctx, "SELECT count(DISTINCT generation), count(*) FILTER (WHERE generation IS NULL) FROM "+keys).Scan(&distinct, &null))
	assert.Equal(t, 3, distinct)
	assert.Zero(t, null)
	got, err := s.Get(ctx, "alice", "a")
	require.NoError(t, err)
	require.NotZero(t, got.Generation)
	// The old fence (from before the column existed) no longer holds; the
	// record's new one does.
	require.ErrorIs(t, s.Complete(ctx, fenceOf(recs[0]), []byte("x")), idempotency.ErrLeaseLost)
	require.NoError(t, s.Complete(ctx, fenceOf(got), []byte("ok")))
	// New records continue the sequence.
	n := mustClaim(t, s, claimReq("d"), idempotency.ClaimCreated)
	require.NoError(t, s.Pool().QueryRow(ctx, "SELECT count(*) FROM "+keys+" WHERE generation = $1", n.Generation).Scan(&distinct))
	assert.Equal(t, 1, distinct)
}

// Migrating an up-to-date schema takes no lock that would wait for (or
// block) transactions reading the records.
func TestMigrateUpToDateDoesNotWaitForReaders(t *testing.T) {
	t.Parallel()
	s, schema, _ := newStore(t)
	ctx := context.Background()
	reader, err := s.Pool().Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = reader.Rollback(ctx) }()
	_, err = reader.Exec(ctx, "SELECT count(*) FROM "+table(schema, "idempotency_keys"))
	require.NoError(t, err)

	mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	require.NoError(t, pgstore.Migrate(mctx, s.Pool(), schema))
}

// Any schema name works, quotes and dollar signs included. (The name is
// random too: a fixed one was dropped by the same test of another test
// process running at the same time.)
func TestMigrateOddSchemaName(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	ctx := context.Background()
	schema := "pgstore_test_it's \"odd\" $$ " + randomHex(12)
	require.NoError(t, pgstore.Migrate(ctx, pool, schema))
	t.Cleanup(func() {
		_, err := pool.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		assert.NoError(t, err)
	})
	require.NoError(t, pgstore.Migrate(ctx, pool, schema))
	s, err := pgstore.New(pool, pgstore.WithSchema(schema))
	require.NoError(t, err)
	r := mustClaim(t, s, claimReq("k"), idempotency.ClaimCreated)
	require.NotZero(t, r.Generation)
	require.NoError(t, s.Complete(ctx, fenceOf(r), []byte("ok")))
	mustClaim(t, s, claimReq("k"), idempotency.ClaimCompleted)
}

func TestSchemaSQLQuotesTheSchema(t *testing.T) {
	sql := pgstore.SchemaSQL(`we"ird`)
	assert.Contains(t, sql, `CREATE SCHEMA IF NOT EXISTS "we""ird";`)
	assert.NotContains(t, sql, "__SCHEMA__")
	assert.NotContains(t, sql, "__GENERATION_SEQ__")
	assert.True(t, strings.Contains(sql, "PRIMARY KEY (key_hash)"))
}

func TestNewValidates(t *testing.T) {
	_, err := pgstore.New(nil)
	assert.Error(t, err)
}

// A store on a schema that was never migrated fails loudly, at New, with
// the command that creates its tables; it does not create them behind the
// caller's back.
func TestNoSilentSchemaCreation(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	_, err := pgstore.New(pool, pgstore.WithSchema("pgstore_test_never_migrated"))
	require.ErrorIs(t, err, pgstore.ErrNotMigrated)
	assert.Contains(t, err.Error(), `pgstore.Migrate(ctx, pool, "pgstore_test_never_migrated")`)
	var exists bool
	require.NoError(t, pool.QueryRow(context.Background(),
		"SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'pgstore_test_never_migrated')").Scan(&exists))
	assert.False(t, exists)
}

// oldSchemaSQL is the DDL of a store from before key_hash, for schema.
func oldSchemaSQL(t *testing.T, schema string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/schema_before_key_hash.sql")
	require.NoError(t, err)
	ident := pgx.Identifier{schema}.Sanitize()
	seq := "'" + strings.ReplaceAll(ident+".idempotency_generation_seq", "'", "''") + "'"
	return strings.NewReplacer("__SCHEMA__", ident, "__GENERATION_SEQ__", seq).Replace(string(b))
}

// Migrate upgrades, in place, a table made before records were indexed by
// the hash of caller and key: its rows keep their state and fences, and the
// store then takes callers and keys of any length.
func TestMigrateUpgradesToKeyHash(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	ctx := context.Background()
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "pgstore_test_upgrade_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		_, err := pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		assert.NoError(t, err)
	})
	_, err := pool.Exec(ctx, oldSchemaSQL(t, schema))
	require.NoError(t, err)
	keys := table(schema, "idempotency_keys")
	// A completed record and an in-progress one with a recovery point, as
	// the old store wrote them.
	_, err = pool.Exec(ctx, "INSERT INTO "+keys+` (caller, key, fingerprint, status, attempt, locked_until,
		recovery_point, recovery_data, response, created_at, expires_at) VALUES
		('alice', 'done', 'fp', 2, 1, now(), '', NULL, 'stored', now(), now() + interval '1 hour'),
		('alice', 'open', 'fp', 1, 2, now() + interval '1 minute', 'done:charge é', 'data', NULL, now(), now() + interval '1 hour'),
		('alice', 'stalled', 'fp', 1, 1, now() - interval '1 minute', 'begin:charge', NULL, NULL, now(), now() + interval '1 hour')`)
	require.NoError(t, err)

	require.NoError(t, pgstore.Migrate(ctx, pool, schema))
	require.NoError(t, pgstore.Migrate(ctx, pool, schema), "a second run changes nothing")
	s, err := pgstore.New(pool, pgstore.WithSchema(schema))
	require.NoError(t, err)

	done := mustClaim(t, s, claimReq("done"), idempotency.ClaimCompleted)
	assert.Equal(t, "stored", string(done.Response))
	open, err := s.Get(ctx, "alice", "open")
	require.NoError(t, err)
	assert.Equal(t, "done:charge é", open.RecoveryPoint)
	assert.Equal(t, "data", string(open.RecoveryData))
	assert.EqualValues(t, 2, open.Attempt)
	mustClaim(t, s, claimReq("open"), idempotency.ClaimInProgress)
	require.NoError(t, s.SaveRecoveryPoint(ctx, fenceOf(open), "done:ship\x00", nil, time.Minute))
	require.NoError(t, s.Complete(ctx, fenceOf(open), []byte("ok")))

	long := idempotency.ClaimRequest{Caller: randomHex(4 << 10), Key: randomHex(4 << 10), Fingerprint: "fp", Lease: time.Minute, TTL: time.Hour}
	c, err := s.Claim(ctx, long)
	require.NoError(t, err)
	require.Equal(t, idempotency.ClaimCreated, c.Outcome)

	// The reconciler's columns and index are there, and an execution that
	// stalled before the upgrade is found.
	stalled, err := s.TakeOverStalled(ctx, "", 0, time.Minute)
	require.NoError(t, err)
	require.Len(t, stalled, 1)
	assert.Equal(t, "stalled", stalled[0].Key)
	assert.EqualValues(t, 2, stalled[0].Attempt)
	assert.Nil(t, stalled[0].Resume)
	require.NoError(t, s.Park(ctx, fenceOf(stalled[0]), "no stored request"))
	var indexes int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_indexes WHERE schemaname = $1
		AND indexname = 'idempotency_keys_stalled_idx'`, schema).Scan(&indexes))
	assert.Equal(t, 1, indexes)

	var pk string
	require.NoError(t, pool.QueryRow(ctx, `SELECT pg_get_constraintdef(oid) FROM pg_constraint
		WHERE conrelid = $1::regclass AND contype = 'p'`, keys).Scan(&pk))
	assert.Equal(t, "PRIMARY KEY (key_hash)", pk)
}

// An empty schema name is the default schema, the one New uses without
// WithSchema: the simplest setup is Migrate(ctx, pool, "") and New(pool).
// New takes an empty name alike, so one setting read from the
// environment, empty or not, serves both.
func TestMigrateEmptySchemaIsTheDefault(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	ctx := context.Background()
	require.NoError(t, pgstore.Migrate(ctx, pool, ""))
	var found bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, pgstore.DefaultSchema+".idempotency_keys").Scan(&found))
	assert.True(t, found, "no table in the default schema")
	for _, opts := range [][]pgstore.Option{nil, {pgstore.WithSchema("")}} {
		store, err := pgstore.New(pool, opts...)
		require.NoError(t, err)
		_, err = store.Get(ctx, "caller", "no-such-key")
		assert.ErrorIs(t, err, idempotency.ErrNotFound)
	}
}
