package idempotency_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/idempotency"
)

// savesCounted counts the recovery points saved through it.
type savesCounted struct {
	idempotency.Store
	saves atomic.Int64
}

func (s *savesCounted) SaveRecoveryPoint(ctx context.Context, f idempotency.Fence, point string, data []byte, lease time.Duration) error {
	s.saves.Add(1)
	return s.Store.SaveRecoveryPoint(ctx, f, point, data, lease)
}

// With StartedAtClaim the claim itself stores the started mark: before the
// work does anything (no write after the claim) the record is one a
// Reconciler takes over, and a work that dies there leaves it resumable.
func TestStartedAtClaimMarksTheClaim(t *testing.T) {
	clk := clock.NewMock()
	mem := idempotency.NewMemoryStore(clk)
	st := &savesCounted{Store: mem}
	r := idempotency.NewRunner(st, idempotency.WithClock(clk), idempotency.WithLease(time.Minute))
	errDied := errors.New("died")
	r.Register("ship", func(context.Context, *idempotency.Execution) ([]byte, error) { return nil, nil })
	req := idempotency.Request{Caller: "c", Key: "m1", Fingerprint: "fp", Work: "ship", Input: []byte("msg"), StartedAtClaim: true}
	_, err := r.Do(context.Background(), req, func(ctx context.Context, e *idempotency.Execution) ([]byte, error) {
		assert.True(t, e.Started(), "the execution is started from its claim")
		rec, err := mem.Get(ctx, "c", "m1")
		require.NoError(t, err)
		assert.Equal(t, "started", rec.RecoveryPoint, "the claim stored the started mark")
		assert.Zero(t, st.saves.Load(), "no write between the claim and the work")
		return nil, errDied
	})
	require.ErrorIs(t, err, errDied)

	// The failed execution is not released: its key waits for a Reconciler.
	clk.Add(time.Second)
	stalled, err := mem.TakeOverStalled(context.Background(), "", 0, time.Minute)
	require.NoError(t, err)
	require.Len(t, stalled, 1)
	assert.Equal(t, "m1", stalled[0].Key)
	assert.Equal(t, "started", stalled[0].RecoveryPoint)

	// Without StartedAtClaim the same failure frees the key, as before.
	req.Key, req.StartedAtClaim = "m2", false
	_, err = r.Do(context.Background(), req, func(context.Context, *idempotency.Execution) ([]byte, error) { return nil, errDied })
	require.ErrorIs(t, err, errDied)
	_, err = mem.Get(context.Background(), "c", "m2")
	require.ErrorIs(t, err, idempotency.ErrNotFound)
}

// StartedAtClaim without Work is a permanent error, and nothing is claimed.
func TestStartedAtClaimNeedsWork(t *testing.T) {
	mem := idempotency.NewMemoryStore(nil)
	r := idempotency.NewRunner(mem)
	ran := false
	_, err := r.Do(context.Background(), idempotency.Request{Caller: "c", Key: "k", Fingerprint: "fp", StartedAtClaim: true},
		func(context.Context, *idempotency.Execution) ([]byte, error) { ran = true; return nil, nil })
	require.True(t, retry.IsPermanent(err))
	assert.False(t, ran)
	_, err = mem.Get(context.Background(), "c", "k")
	require.ErrorIs(t, err, idempotency.ErrNotFound)
}
