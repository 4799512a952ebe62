package pgstore_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/pgstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Many sweepers at once delete every expired record exactly once between
// them, and leave live ones alone.
func TestSweepersConcurrent(t *testing.T) {
	t.Parallel()
	s, _, shift := newStore(t)
	ctx := context.Background()
	for i := range 300 {
		mustClaim(t, s, claimReq(fmt.Sprint("old", i)), idempotency.ClaimCreated)
	}
	shift.Advance(2 * time.Hour)
	live := claimReq("live")
	mustClaim(t, s, live, idempotency.ClaimCreated)

	var (
		wg      sync.WaitGroup
		deleted atomic.Int64
	)
	for range 4 {
		w := &pgstore.Sweeper{Store: s, Batch: 16}
		wg.Go(func() {
			n, err := w.Sweep(ctx)
			assert.NoError(t, err)
			deleted.Add(int64(n))
		})
	}
	wg.Wait()
	// A sweeper that skipped rows locked by another may leave some; one more
	// pass finishes.
	n, err := s.DeleteExpired(ctx, 0)
	require.NoError(t, err)
	assert.Equal(t, int64(300), deleted.Load()+int64(n))
	_, err = s.Get(ctx, "alice", "live")
	require.NoError(t, err)
}

func TestSweeperRunAndPurge(t *testing.T) {
	t.Parallel()
	s, schema, shift := newStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mustClaim(t, s, claimReq("k"), idempotency.ClaimCreated)
	enqueue(t, s, 3)
	k := newSink()
	n, err := (&pgstore.Relay{Store: s, Deliver: k.deliver}).RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	enqueue(t, s, 1) // not delivered: never purged
	shift.Advance(48 * time.Hour)

	w := &pgstore.Sweeper{Store: s, Interval: time.Millisecond, OutboxRetention: 24 * time.Hour,
		OnError: func(err error) { t.Errorf("sweep: %v", err) }}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	waitFor(t, func() bool {
		var keys int
		require.NoError(t, s.Pool().QueryRow(ctx, "SELECT count(*) FROM "+table(schema, "idempotency_keys")).Scan(&keys))
		return keys == 0 && outboxCount(t, s, schema) == 1
	})
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	assert.Equal(t, 1, pending(t, s, schema))
}
