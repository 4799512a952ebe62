package pgstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/pgstore"
)

// A store that grew from empty still finds a batch's records by their key.
// Its connection planned the batch statements while the table was empty
// and keeps those plans for its prepared statements; before, the plans
// joined the requests with the whole table (a hash join, or a nested loop
// over a sequential scan, or a scan of the expiry index), so every batch
// on the grown table read every record. The count is the server's own
// (rows and index entries read), not a time.
func TestBatchesOnAGrownTableReadOnlyTheirRecords(t *testing.T) {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(dsn())
	require.NoError(t, err)
	cfg.MaxConns = 1 // one connection: the plans it made on the empty table are the ones used
	pool := newPoolFrom(t, cfg)
	schema := newSchema(t, pool)
	s, err := pgstore.New(pool, pgstore.WithSchema(schema))
	require.NoError(t, err)

	batch := func(name string, durable bool) {
		t.Helper()
		reqs := make([]idempotency.ClaimRequest, 16)
		for i := range reqs {
			reqs[i] = idempotency.ClaimRequest{Caller: "alice", Key: fmt.Sprintf("%s-%d", name, i), Fingerprint: "fp", Lease: time.Minute, TTL: time.Hour}
			if durable {
				reqs[i].Point = "delivered"
			}
		}
		claims, err := s.ClaimBatch(ctx, reqs)
		require.NoError(t, err)
		bt, err := s.BeginBatch(ctx)
		require.NoError(t, err)
		defer bt.Close(ctx)
		for _, c := range claims {
			require.Equal(t, idempotency.ClaimCreated, c.Outcome)
			tx, err := bt.Begin(ctx, c.Record.Fence())
			require.NoError(t, err)
			require.NoError(t, tx.Complete(ctx, []byte("done")))
		}
		results, err := bt.Commit(ctx)
		require.NoError(t, err)
		require.Len(t, results, len(reqs))
		for _, r := range results {
			require.NoError(t, r.Err)
		}
	}
	// More than five executions of each statement on the empty table, so
	// that the server settles on a generic plan made there.
	for i := range 8 {
		batch(fmt.Sprintf("empty-%d", i), i%2 == 1)
	}
	_, err = pool.Exec(ctx, `INSERT INTO `+table(schema, "idempotency_keys")+`
		(caller, key, fingerprint, status, attempt, locked_until, created_at, expires_at)
		SELECT 'bob', ('grown-' || g)::bytea, 'fp', 2, 1, now(), now(), now() + interval '1 hour'
		FROM generate_series(1, 5000) g`)
	require.NoError(t, err)

	// What the batches read besides their records' primary key entries:
	// the rows of sequential scans, and the entries of the other indexes.
	readBesidesKeys := func() (n int64) {
		t.Helper()
		// The one connection's statistics are sent now, then read afresh.
		_, err := pool.Exec(ctx, "SELECT pg_stat_force_next_flush()")
		require.NoError(t, err)
		require.NoError(t, pool.QueryRow(ctx, `SELECT pg_stat_clear_snapshot() IS NULL,
			(SELECT seq_tup_read FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'idempotency_keys') +
			(SELECT COALESCE(sum(idx_tup_read), 0) FROM pg_stat_user_indexes
				WHERE schemaname = $1 AND relname = 'idempotency_keys' AND indexrelname <> 'idempotency_keys_pkey')`,
			schema).Scan(new(bool), &n))
		return n
	}
	before := readBesidesKeys()
	for i := range 4 {
		batch(fmt.Sprintf("grown-batch-%d", i), i%2 == 1)
	}
	assert.Zero(t, readBesidesKeys()-before, "rows read by sequential scans and index entries other than the records' keys")

	// And the connection planned each batch statement once, not at every
	// execution.
	rows, err := pool.Query(ctx, `SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE '%unnest(%' AND statement NOT LIKE '%pg_prepared_statements%'`)
	require.NoError(t, err)
	plans, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ Generic, Custom int64 }])
	require.NoError(t, err)
	require.Len(t, plans, 2, "the batch claim and completion statements, prepared on the one connection")
	for _, p := range plans {
		assert.Zero(t, p.Custom, "executions planned again for their own arguments")
		assert.NotZero(t, p.Generic, "executions with the kept plan")
	}
}

// The batch statements' plans find every record by its primary key, under
// the settings the store runs them with, in the worst case for the
// planner's estimates: a generic plan made on an empty, never analyzed
// table; then on one of 500 records, never analyzed; and on 5,500
// analyzed records.
func TestBatchStatementsPlanKeyLookups(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t)
	schema := newSchema(t, pool)
	claim, complete := pgstore.BatchStatements(schema)
	statements := []struct{ name, sql, args string }{
		{"claim", claim, `ARRAY['\x61']::bytea[], ARRAY['\x6b']::bytea[], ARRAY['\x66']::bytea[], ARRAY[1]::bigint[],
			ARRAY[1]::bigint[], ARRAY[NULL]::bytea[], ARRAY[NULL]::bytea[], 0, 4611686018427387904`},
		{"complete", complete, `ARRAY['\x61']::bytea[], ARRAY['\x6b']::bytea[], ARRAY[1]::bigint[], ARRAY['\x72']::bytea[],
			ARRAY[1]::bigint[], 0`},
	}
	plans := func(when string) {
		t.Helper()
		for _, st := range statements {
			plan := explainGeneric(t, pool, st.sql, st.args)
			text := strings.Join(plan, "\n")
			scans := 0
			for _, line := range plan {
				if strings.Contains(line, " on idempotency_keys") && strings.Contains(line, "Scan") {
					scans++
					assert.Contains(t, line, "Index Scan using idempotency_keys_pkey", "%s, %s: a scan of the records other than by key:\n%s", st.name, when, text)
				}
			}
			assert.NotZero(t, scans, "%s, %s: no scan of the records:\n%s", st.name, when, text)
		}
	}
	grow := func(n int) {
		t.Helper()
		_, err := pool.Exec(ctx, `INSERT INTO `+table(schema, "idempotency_keys")+`
			(caller, key, fingerprint, status, attempt, locked_until, created_at, expires_at)
			SELECT 'bob', ('grown-' || g || '-' || $1::int)::bytea, 'fp', 1 + g % 2, 1, now(), now(), now() + interval '1 hour'
			FROM generate_series(1, $1::int) g`, n)
		require.NoError(t, err)
	}
	plans("on an empty table")
	grow(500)
	plans("on 500 records, never analyzed")
	grow(5000)
	_, err := pool.Exec(ctx, "ANALYZE "+table(schema, "idempotency_keys"))
	require.NoError(t, err)
	plans("on 5,500 analyzed records")
}

// explainGeneric returns the lines of the generic plan of sql with args
// (SQL literals), made under the store's planner settings (IndexLookups).
func explainGeneric(t *testing.T, pool *pgxpool.Pool, sql, args string) []string {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	for _, setup := range []string{pgstore.IndexLookups, "SET LOCAL plan_cache_mode TO force_generic_plan", "PREPARE batch_statement AS " + sql} {
		_, err = tx.Exec(ctx, setup)
		require.NoError(t, err, setup)
	}
	rows, err := tx.Query(ctx, "EXPLAIN EXECUTE batch_statement("+args+")")
	require.NoError(t, err)
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "DEALLOCATE batch_statement") // a prepared statement outlives the transaction
	require.NoError(t, err)
	return plan
}
