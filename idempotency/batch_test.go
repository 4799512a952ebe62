package idempotency_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/idempotency"
)

// failingCommit is a MemoryBatchStore whose batches fail to commit.
type failingCommit struct {
	*idempotency.MemoryBatchStore
}

var errCommit = errors.New("the commit failed")

func (s failingCommit) BeginBatch(ctx context.Context) (idempotency.BatchTx, error) {
	tx, err := s.MemoryBatchStore.BeginBatch(ctx)
	return &failingBatch{BatchTx: tx}, err
}

// failingBatch fails every commit: it stores nothing and reports so for
// every execution whose Complete it took.
type failingBatch struct {
	idempotency.BatchTx
	fences []idempotency.Fence
}

func (b *failingBatch) Begin(ctx context.Context, f idempotency.Fence) (idempotency.Tx, error) {
	b.fences = append(b.fences, f)
	return b.BatchTx.Begin(ctx, f)
}

func (b *failingBatch) Commit(ctx context.Context) ([]idempotency.BatchResult, error) {
	_ = b.BatchTx.Close(ctx)
	res := make([]idempotency.BatchResult, len(b.fences))
	for i, f := range b.fences {
		res[i] = idempotency.BatchResult{Fence: f, Err: errCommit}
	}
	return res, errCommit
}

func batchReqs(keys ...string) []idempotency.Request {
	reqs := make([]idempotency.Request, len(keys))
	for i, k := range keys {
		reqs[i] = idempotency.Request{Caller: "c", Key: k, Fingerprint: "fp"}
	}
	return reqs
}

// An outcome in a batch is stored at Commit, not before.
func TestBatchStoresAtCommit(t *testing.T) {
	st := idempotency.NewMemoryBatchStore(nil)
	r := idempotency.NewRunner(st)
	ctx := context.Background()
	b, err := r.StartBatch(ctx, batchReqs("a", "b"))
	require.NoError(t, err)
	defer b.Close(ctx)
	for i := range 2 {
		res, err := b.Do(ctx, i, func(context.Context, *idempotency.Execution) ([]byte, error) { return []byte("ok"), nil })
		require.NoError(t, err)
		assert.False(t, res.Replayed)
	}
	rec, err := st.Get(ctx, "c", "a")
	require.NoError(t, err)
	assert.Equal(t, idempotency.StateInProgress, rec.State, "before Commit")
	assert.Equal(t, map[int]error{0: nil, 1: nil}, b.Commit(ctx))
	rec, err = st.Get(ctx, "c", "a")
	require.NoError(t, err)
	assert.Equal(t, idempotency.StateCompleted, rec.State, "after Commit")
}

// A batch whose commit failed gives its executions up as failed ones:
// their keys are freed at once for a retry, which runs the work again.
func TestBatchCommitFailureFreesKeys(t *testing.T) {
	st := failingCommit{idempotency.NewMemoryBatchStore(nil)}
	r := idempotency.NewRunner(st)
	ctx := context.Background()
	b, err := r.StartBatch(ctx, batchReqs("a"))
	require.NoError(t, err)
	defer b.Close(ctx)
	_, err = b.Do(ctx, 0, func(context.Context, *idempotency.Execution) ([]byte, error) { return []byte("ok"), nil })
	require.NoError(t, err)
	got := b.Commit(ctx)
	require.Len(t, got, 1)
	assert.ErrorIs(t, got[0], errCommit)
	_, err = st.Get(ctx, "c", "a")
	assert.ErrorIs(t, err, idempotency.ErrNotFound, "the key is freed")
	ran := false
	res, err := r.Do(ctx, batchReqs("a")[0], func(context.Context, *idempotency.Execution) ([]byte, error) {
		ran = true
		return []byte("again"), nil
	})
	require.NoError(t, err)
	assert.True(t, ran)
	assert.False(t, res.Replayed)
}

// Skip gives back a claim the batch made, freeing the key at once.
func TestBatchSkipFreesKey(t *testing.T) {
	st := idempotency.NewMemoryBatchStore(nil)
	r := idempotency.NewRunner(st)
	ctx := context.Background()
	b, err := r.StartBatch(ctx, batchReqs("a", "b"))
	require.NoError(t, err)
	defer b.Close(ctx)
	require.NoError(t, b.Skip(ctx, 1))
	_, err = st.Get(ctx, "c", "b")
	assert.ErrorIs(t, err, idempotency.ErrNotFound)
	// A Do after Skip claims afresh.
	res, err := b.Do(ctx, 1, func(context.Context, *idempotency.Execution) ([]byte, error) { return []byte("ok"), nil })
	require.NoError(t, err)
	assert.False(t, res.Replayed)
	assert.Equal(t, map[int]error{1: nil}, b.Commit(ctx))
}
