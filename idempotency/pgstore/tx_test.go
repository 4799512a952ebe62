package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/pgstore"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func claimReq(key string) idempotency.ClaimRequest {
	return idempotency.ClaimRequest{Caller: "alice", Key: key, Fingerprint: "fp", Lease: time.Minute, TTL: time.Hour}
}

func fenceOf(r idempotency.Record) idempotency.Fence {
	return r.Fence()
}

func mustClaim(t *testing.T, s idempotency.Store, req idempotency.ClaimRequest, want idempotency.ClaimOutcome) idempotency.Record {
	t.Helper()
	c, err := s.Claim(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, want, c.Outcome)
	return c.Record
}

// The handler's own insert and the stored response commit together.
func TestTxLocalWriteCommitsWithResponse(t *testing.T) {
	t.Parallel()
	s, schema, _ := newStore(t)
	ctx := context.Background()
	r := mustClaim(t, s, claimReq("k"), idempotency.ClaimCreated)

	tx, err := s.Begin(ctx, fenceOf(r))
	require.NoError(t, err)
	require.NoError(t, localWrite(tx.Context(ctx), schema, "order-1"))
	// Not visible outside the transaction before Complete.
	assert.False(t, written(t, s.Pool(), schema, "order-1"))
	require.NoError(t, tx.Complete(ctx, []byte("created order-1")))
	require.NoError(t, tx.Rollback(ctx), "Rollback after Complete is a no-op")

	assert.True(t, written(t, s.Pool(), schema, "order-1"))
	g, err := s.Get(ctx, "alice", "k")
	require.NoError(t, err)
	assert.Equal(t, idempotency.StateCompleted, g.State)
	assert.Equal(t, "created order-1", string(g.Response))
}

// When the lease was lost, the handler's insert and the response both roll back.
func TestTxLostLeaseRollsBackLocalWrite(t *testing.T) {
	t.Parallel()
	s, schema, shift := newStore(t)
	ctx := context.Background()
	old := mustClaim(t, s, claimReq("k"), idempotency.ClaimCreated)

	tx, err := s.Begin(ctx, fenceOf(old))
	require.NoError(t, err)
	txCtx := tx.Context(ctx)
	require.NoError(t, localWrite(txCtx, schema, "order-1"))
	id, err := s.Enqueue(txCtx, mustTx(t, txCtx), "orders", []byte("order-1 created"))
	require.NoError(t, err)
	require.NotEmpty(t, id)

	shift.Advance(2 * time.Minute)
	cur := mustClaim(t, s, claimReq("k"), idempotency.ClaimTakenOver)
	require.ErrorIs(t, tx.Complete(ctx, []byte("late")), idempotency.ErrLeaseLost)

	assert.False(t, written(t, s.Pool(), schema, "order-1"), "local write must roll back")
	assert.Zero(t, outboxCount(t, s, schema), "outbox message must roll back")
	g, err := s.Get(ctx, "alice", "k")
	require.NoError(t, err)
	assert.Equal(t, idempotency.StateInProgress, g.State)
	assert.Equal(t, cur.Attempt, g.Attempt)
	assert.Empty(t, g.Response)

	// The connection went back to the pool usable: the new holder completes.
	tx2, err := s.Begin(ctx, fenceOf(cur))
	require.NoError(t, err)
	require.NoError(t, localWrite(tx2.Context(ctx), schema, "order-1"))
	require.NoError(t, tx2.Complete(ctx, []byte("recovered")))
	assert.True(t, written(t, s.Pool(), schema, "order-1"))
}

func TestTxFrom(t *testing.T) {
	t.Parallel()
	s, schema, _ := newStore(t)
	ctx := context.Background()
	_, ok := pgstore.TxFrom(ctx)
	assert.False(t, ok)

	r := mustClaim(t, s, claimReq("k"), idempotency.ClaimCreated)
	tx, err := s.Begin(ctx, fenceOf(r))
	require.NoError(t, err)
	txCtx := tx.Context(ctx)
	ptx := mustTx(t, txCtx)
	assert.ErrorIs(t, ptx.Commit(ctx), pgstore.ErrTxOwned)
	assert.ErrorIs(t, ptx.Rollback(ctx), pgstore.ErrTxOwned)

	// Savepoints work: a failed nested step rolls back alone.
	sp, err := ptx.Begin(ctx)
	require.NoError(t, err)
	_, err = sp.Exec(ctx, "INSERT INTO "+table(schema, "local_writes")+" (name) VALUES ('inner')")
	require.NoError(t, err)
	require.NoError(t, sp.Rollback(ctx))
	require.NoError(t, localWrite(txCtx, schema, "outer"))
	require.NoError(t, tx.Complete(ctx, []byte("ok")))
	assert.True(t, written(t, s.Pool(), schema, "outer"))
	assert.False(t, written(t, s.Pool(), schema, "inner"))
	assert.ErrorIs(t, tx.Complete(ctx, []byte("again")), pgx.ErrTxClosed)
}

// A handler error inside the transaction leaves it aborted; Complete then
// fails and stores nothing, and the record stays owned.
func TestTxAbortedByHandlerError(t *testing.T) {
	t.Parallel()
	s, schema, _ := newStore(t)
	ctx := context.Background()
	r := mustClaim(t, s, claimReq("k"), idempotency.ClaimCreated)
	tx, err := s.Begin(ctx, fenceOf(r))
	require.NoError(t, err)
	txCtx := tx.Context(ctx)
	require.NoError(t, localWrite(txCtx, schema, "dup"))
	require.Error(t, localWrite(txCtx, schema, "dup")) // primary key violation aborts the transaction
	err = tx.Complete(ctx, []byte("x"))
	require.Error(t, err)
	assert.NotErrorIs(t, err, idempotency.ErrLeaseLost)
	assert.False(t, written(t, s.Pool(), schema, "dup"))
	g, err := s.Get(ctx, "alice", "k")
	require.NoError(t, err)
	assert.Equal(t, idempotency.StateInProgress, g.State)
	require.NoError(t, s.Complete(ctx, fenceOf(r), []byte("done")))
}

func mustTx(t *testing.T, ctx context.Context) pgx.Tx {
	t.Helper()
	tx, ok := pgstore.TxFrom(ctx)
	require.True(t, ok, "no transaction in the context")
	return tx
}

func outboxCount(t *testing.T, s *pgstore.Store, schema string) int {
	t.Helper()
	var n int
	require.NoError(t, s.Pool().QueryRow(context.Background(), "SELECT count(*) FROM "+table(schema, "outbox")).Scan(&n))
	return n
}
