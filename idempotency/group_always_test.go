package idempotency_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/internal/grouptest"
)

// A Runner set by grouptest.AlwaysBatch sends a request alone through the
// store's batch operations, a batch of one; another Runner on the same
// store still sends it alone.
func TestGroupCommitAlwaysBatchIsPerRunner(t *testing.T) {
	store := newGroupedStore()
	batched, plain := idempotency.NewRunner(store), idempotency.NewRunner(store)
	require.True(t, grouptest.AlwaysBatch(batched))
	work := func(context.Context, *idempotency.Execution) ([]byte, error) { return []byte("ok"), nil }
	for _, key := range []string{"a", "b"} {
		_, err := batched.Do(context.Background(), idempotency.Request{Caller: "alice", Key: key}, work)
		require.NoError(t, err)
	}
	assert.Zero(t, store.claims.Load())
	assert.Zero(t, store.completes.Load())
	assert.Equal(t, int32(2), store.claimBatches.Load())
	assert.Equal(t, int32(2), store.completeBatches.Load())
	assert.Equal(t, []int{1, 1}, store.batchSizes)

	res, err := plain.Do(context.Background(), idempotency.Request{Caller: "alice", Key: "c"}, work)
	require.NoError(t, err)
	assert.Equal(t, "ok", string(res.Response))
	assert.Equal(t, int32(1), store.claims.Load())
	assert.Equal(t, int32(1), store.completes.Load())
	assert.Equal(t, int32(2), store.claimBatches.Load())
	for _, key := range []string{"a", "b", "c"} {
		rec, err := store.Get(context.Background(), "alice", key)
		require.NoError(t, err)
		assert.Equal(t, idempotency.StateCompleted, rec.State, key)
	}
}

// AlwaysBatch changes nothing for a Runner whose store is not a
// BatchStore, nor for anything but a Runner.
func TestGroupCommitAlwaysBatchNeedsABatchStore(t *testing.T) {
	assert.False(t, grouptest.AlwaysBatch(idempotency.NewRunner(idempotency.NewMemoryStore(nil))))
	assert.False(t, grouptest.AlwaysBatch("not a runner"))
}
