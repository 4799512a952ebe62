package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

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
// over a sequential scan), so every batch on the grown table read every
// record. The count is the server's own (sequential scans and the rows
// they read), not a time.
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
		reqs := make([]idempotency.ClaimRequest, 3)
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

	scans := func() (n, rows int64) {
		t.Helper()
		// The one connection's statistics are sent now, then read afresh.
		_, err := pool.Exec(ctx, "SELECT pg_stat_force_next_flush()")
		require.NoError(t, err)
		require.NoError(t, pool.QueryRow(ctx, `SELECT pg_stat_clear_snapshot() IS NULL, seq_scan, seq_tup_read
			FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'idempotency_keys'`, schema).Scan(new(bool), &n, &rows))
		return n, rows
	}
	scansBefore, rowsBefore := scans()
	for i := range 4 {
		batch(fmt.Sprintf("grown-batch-%d", i), i%2 == 1)
	}
	scansAfter, rowsAfter := scans()
	assert.Zero(t, scansAfter-scansBefore, "sequential scans of the records by the batches on the grown table")
	assert.Zero(t, rowsAfter-rowsBefore, "records read by sequential scans")
}
