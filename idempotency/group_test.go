package idempotency_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/idempotency"
)

// groupedStore is a MemoryBatchStore that counts its claims and
// completions, alone and in batches, and can hold its single claims.
type groupedStore struct {
	*idempotency.MemoryBatchStore
	hold      chan struct{} // when set, a single Claim waits for it
	holdBatch chan struct{} // when set, a ClaimBatch waits for it

	claims, claimBatches, completes, completeBatches atomic.Int32
	mu                                               sync.Mutex
	batchSizes                                       []int
}

func (s *groupedStore) Claim(ctx context.Context, req idempotency.ClaimRequest) (idempotency.Claim, error) {
	s.claims.Add(1)
	if s.hold != nil {
		<-s.hold
	}
	return s.MemoryBatchStore.Claim(ctx, req)
}

func (s *groupedStore) ClaimBatch(ctx context.Context, reqs []idempotency.ClaimRequest) ([]idempotency.Claim, error) {
	s.claimBatches.Add(1)
	s.mu.Lock()
	s.batchSizes = append(s.batchSizes, len(reqs))
	s.mu.Unlock()
	if s.holdBatch != nil {
		<-s.holdBatch
	}
	return s.MemoryBatchStore.ClaimBatch(ctx, reqs)
}

func (s *groupedStore) Complete(ctx context.Context, f idempotency.Fence, response []byte) error {
	s.completes.Add(1)
	return s.MemoryBatchStore.Complete(ctx, f, response)
}

func (s *groupedStore) BeginBatch(ctx context.Context) (idempotency.BatchTx, error) {
	s.completeBatches.Add(1)
	return s.MemoryBatchStore.BeginBatch(ctx)
}

func newGroupedStore() *groupedStore {
	return &groupedStore{MemoryBatchStore: idempotency.NewMemoryBatchStore(nil)}
}

// A request alone is claimed and completed alone, at once: group commit
// adds no wait and no batch when nothing else is on its way.
func TestGroupCommitLoneRequestGoesAlone(t *testing.T) {
	store := newGroupedStore()
	runner := idempotency.NewRunner(store)
	for _, key := range []string{"a", "b", "c"} {
		_, err := runner.Do(context.Background(), idempotency.Request{Caller: "alice", Key: key},
			func(context.Context, *idempotency.Execution) ([]byte, error) { return []byte("ok"), nil })
		require.NoError(t, err)
	}
	assert.Equal(t, int32(3), store.claims.Load())
	assert.Equal(t, int32(3), store.completes.Load())
	assert.Zero(t, store.claimBatches.Load())
	assert.Zero(t, store.completeBatches.Load())
}

// Claims asked for while one is on its way go to the store together, in
// one ClaimBatch, once it is back; each request gets its own outcome (a
// new key runs, a completed one replays, another payload is refused), and
// their completions are stored.
func TestGroupCommitClaimsWaitingGoTogether(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newGroupedStore()
		runner := idempotency.NewRunner(store)
		ctx := context.Background()
		ok := func(context.Context, *idempotency.Execution) ([]byte, error) { return []byte("ok"), nil }
		_, err := runner.Do(ctx, idempotency.Request{Caller: "alice", Key: "done", Fingerprint: "fp"}, ok)
		require.NoError(t, err)

		store.hold = make(chan struct{})
		first := make(chan error, 1)
		go func() {
			_, err := runner.Do(ctx, idempotency.Request{Caller: "alice", Key: "first"}, ok)
			first <- err
		}()
		synctest.Wait() // the first claim is on its way, held
		type answer struct {
			res idempotency.Result
			err error
		}
		reqs := []idempotency.Request{
			{Caller: "alice", Key: "new-1"}, {Caller: "alice", Key: "new-2"},
			{Caller: "alice", Key: "done", Fingerprint: "fp"}, {Caller: "alice", Key: "done", Fingerprint: "other"},
		}
		answers := make([]answer, len(reqs))
		var wg sync.WaitGroup
		for i, req := range reqs {
			wg.Go(func() {
				res, err := runner.Do(ctx, req, ok)
				answers[i] = answer{res, err}
			})
		}
		synctest.Wait() // all four wait for the first
		assert.Equal(t, int32(2), store.claims.Load(), "the waiting claims did not go alone")
		close(store.hold)
		require.NoError(t, <-first)
		wg.Wait()

		assert.Equal(t, int32(1), store.claimBatches.Load())
		assert.Equal(t, []int{4}, store.batchSizes)
		assert.NoError(t, answers[0].err)
		assert.False(t, answers[0].res.Replayed)
		assert.NoError(t, answers[1].err)
		assert.True(t, answers[2].res.Replayed, "the completed key replays")
		assert.ErrorIs(t, answers[3].err, idempotency.ErrFingerprintMismatch)
		for _, key := range []string{"first", "new-1", "new-2"} {
			rec, err := store.Get(ctx, "alice", key)
			require.NoError(t, err)
			assert.Equal(t, idempotency.StateCompleted, rec.State, key)
		}
	})
}

// A request whose context ends while its claim waits to go leaves
// without it: nothing is claimed for it, so its retry runs at once.
func TestGroupCommitCancelledWaiterClaimsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newGroupedStore()
		runner := idempotency.NewRunner(store)
		ok := func(context.Context, *idempotency.Execution) ([]byte, error) { return []byte("ok"), nil }
		store.hold = make(chan struct{})
		first := make(chan error, 1)
		go func() {
			_, err := runner.Do(context.Background(), idempotency.Request{Caller: "alice", Key: "first"}, ok)
			first <- err
		}()
		synctest.Wait()
		ctx, cancel := context.WithCancel(context.Background())
		gone := make(chan error, 1)
		go func() {
			_, err := runner.Do(ctx, idempotency.Request{Caller: "alice", Key: "gone"}, ok)
			gone <- err
		}()
		synctest.Wait()
		cancel()
		assert.ErrorIs(t, <-gone, context.Canceled)
		close(store.hold)
		require.NoError(t, <-first)
		synctest.Wait()
		_, err := store.Get(context.Background(), "alice", "gone")
		assert.ErrorIs(t, err, idempotency.ErrNotFound, "the cancelled request's key was claimed")
		assert.Zero(t, store.claimBatches.Load())
	})
}

// A request whose context ends after its claim went with others leaves
// at once, and the claim, when it comes back, is given up: its key is
// free for the retry, not held for a lease by nobody.
func TestGroupCommitWaiterGoneAfterItsClaimWentFreesTheKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newGroupedStore()
		runner := idempotency.NewRunner(store)
		ok := func(context.Context, *idempotency.Execution) ([]byte, error) { return []byte("ok"), nil }
		store.hold, store.holdBatch = make(chan struct{}), make(chan struct{})
		first := make(chan error, 1)
		go func() {
			_, err := runner.Do(context.Background(), idempotency.Request{Caller: "alice", Key: "first"}, ok)
			first <- err
		}()
		synctest.Wait()
		ctx, cancel := context.WithCancel(context.Background())
		gone, stays := make(chan error, 1), make(chan error, 1)
		go func() {
			_, err := runner.Do(ctx, idempotency.Request{Caller: "alice", Key: "gone"}, ok)
			gone <- err
		}()
		go func() {
			_, err := runner.Do(context.Background(), idempotency.Request{Caller: "alice", Key: "stays"}, ok)
			stays <- err
		}()
		synctest.Wait()
		close(store.hold) // the first comes back; the two others go together, held
		require.NoError(t, <-first)
		synctest.Wait()
		require.Equal(t, int32(1), store.claimBatches.Load())
		cancel()
		assert.ErrorIs(t, <-gone, context.Canceled)
		close(store.holdBatch)
		require.NoError(t, <-stays)
		synctest.Wait()
		_, err := store.Get(context.Background(), "alice", "gone")
		assert.ErrorIs(t, err, idempotency.ErrNotFound, "the claim of the request that left holds its key")
		rec, err := store.Get(context.Background(), "alice", "stays")
		require.NoError(t, err)
		assert.Equal(t, idempotency.StateCompleted, rec.State)
	})
}
