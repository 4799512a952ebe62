package idempotency_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/idempotency"
)

// ResumeStalled runs a stalled execution now, its completed step skipped,
// and refuses one whose lease still runs or that is not stalled.
func TestResumeStalledRunsAStalledExecutionNow(t *testing.T) {
	f := newFleet(t)
	req := idempotency.Request{Caller: "shop", Key: "order-9", Work: "ledger", Input: []byte("9 EUR")}
	wake := stall(t, f, req, "charge")
	r := f.runner()
	r.Register("ledger", func(ctx context.Context, e *idempotency.Execution) ([]byte, error) {
		return []byte("resumed " + string(e.Input())), nil
	})
	var held *idempotency.InProgressError
	_, err := r.ResumeStalled(context.Background(), "shop", "order-9")
	require.ErrorAs(t, err, &held, "the lease still runs")

	f.clock.Add(testLease + time.Second)
	res, err := r.ResumeStalled(context.Background(), "shop", "order-9")
	require.NoError(t, err)
	assert.Equal(t, "resumed 9 EUR", string(res.Response))
	require.ErrorIs(t, wake(), idempotency.ErrLeaseLost)

	_, err = r.ResumeStalled(context.Background(), "shop", "order-9")
	require.ErrorIs(t, err, idempotency.ErrWrongState, "completed")
	_, err = r.ResumeStalled(context.Background(), "shop", "nothing")
	require.ErrorIs(t, err, idempotency.ErrNotFound)
}

// DiscardParked deletes a parked execution, and nothing else.
func TestDiscardParkedDeletesOnlyAParkedExecution(t *testing.T) {
	f := newFleet(t)
	ctx := context.Background()
	r := f.runner()
	c, err := f.store.Claim(ctx, idempotency.ClaimRequest{Caller: "shop", Key: "k", Fingerprint: "fp", Lease: time.Minute, TTL: time.Hour})
	require.NoError(t, err)
	require.ErrorIs(t, r.DiscardParked(ctx, "shop", "k"), idempotency.ErrWrongState)
	require.NoError(t, f.store.Park(ctx, c.Record.Fence(), "gave up"))
	require.NoError(t, r.DiscardParked(ctx, "shop", "k"))
	_, err = f.store.Get(ctx, "shop", "k")
	require.ErrorIs(t, err, idempotency.ErrNotFound)
	require.True(t, errors.Is(r.DiscardParked(ctx, "shop", "k"), idempotency.ErrNotFound))
}
