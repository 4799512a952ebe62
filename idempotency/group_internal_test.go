package idempotency

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A batch of completions reports each execution's own result: one whose
// lease was lost fails alone, and the others are stored.
func TestCompleteBatchLostLeaseIsItsOwn(t *testing.T) {
	ctx := context.Background()
	store := NewMemoryBatchStore(nil)
	var cs []completion
	for _, key := range []string{"a", "b", "c"} {
		c, err := store.Claim(ctx, ClaimRequest{Caller: "alice", Key: key, Lease: time.Minute, TTL: time.Hour})
		require.NoError(t, err)
		cs = append(cs, completion{f: c.Record.Fence(), response: []byte("done " + key)})
	}
	cs[1].f.Attempt++ // b's lease was taken over
	errs, err := completeBatch(ctx, store, cs)
	require.NoError(t, err)
	require.Len(t, errs, 3)
	assert.NoError(t, errs[0])
	assert.ErrorIs(t, errs[1], ErrLeaseLost)
	assert.NoError(t, errs[2])
	for key, want := range map[string]State{"a": StateCompleted, "b": StateInProgress, "c": StateCompleted} {
		rec, err := store.Get(ctx, "alice", key)
		require.NoError(t, err)
		assert.Equal(t, want, rec.State, key)
	}
}
