package idempotency_test

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/idempotency"
)

// An execution parked after failing MaxAttempts times is listed with its
// reason, and once its cause is mended RetryParked runs it again at once
// (its completed step skipped, its downstream key the same), stores the
// outcome its client then gets, and it is listed no more.
func TestRetryParkedFinishesAParkedExecution(t *testing.T) {
	f := newFleet(t)
	dep := &dependency{}
	var broken atomic.Bool
	broken.Store(true)
	var runs atomic.Int32
	work := func(ctx context.Context, e *idempotency.Execution) ([]byte, error) {
		runs.Add(1)
		id, err := e.Step(ctx, "charge", dep.charge)
		if err != nil {
			return nil, err
		}
		if broken.Load() {
			return nil, errors.New("the ledger is read-only")
		}
		return []byte("paid with " + string(id)), nil
	}
	req := idempotency.Request{Caller: "shop", Key: "order-7", Work: "ledger", Input: []byte("7 EUR")}
	stalled := stall(t, f, req)
	r := f.runner()
	r.Register("ledger", work)
	var log bytes.Buffer
	cfg := quiet(&log)
	cfg.MaxAttempts = 2
	for range 3 {
		f.clock.Add(testLease + time.Second)
		_, err := r.Reconcile(context.Background(), cfg)
		require.NoError(t, err)
	}
	parked, err := f.store.ListParked(context.Background(), "", "", 0)
	require.NoError(t, err)
	require.Len(t, parked, 1)
	assert.Equal(t, "order-7", parked[0].Key)
	assert.Contains(t, parked[0].Parked, "did not complete it")
	ranBefore := runs.Load()

	// Still broken: the retry fails as the work does, and the record is
	// left to the next retry (or its client).
	_, err = r.RetryParked(context.Background(), "shop", "order-7")
	require.ErrorContains(t, err, "read-only")
	assert.Equal(t, ranBefore+1, runs.Load())

	// Mended. A retry of the parked record runs now, not at the next pass.
	f.clock.Add(testLease + time.Second)
	for range 3 {
		_, err := r.Reconcile(context.Background(), cfg)
		require.NoError(t, err)
	}
	broken.Store(false)
	res, err := r.RetryParked(context.Background(), "shop", "order-7")
	require.NoError(t, err)
	assert.Equal(t, "paid with ch_1", string(res.Response))
	calls, effects := dep.count()
	assert.Equal(t, 1, effects, "one charge, whatever the retries")
	assert.Equal(t, 1, calls, "the completed step is skipped on every later run")
	parked, err = f.store.ListParked(context.Background(), "", "", 0)
	require.NoError(t, err)
	assert.Empty(t, parked)
	// Its client, coming back, gets the stored outcome.
	got, err := r.Do(context.Background(), req, work)
	require.NoError(t, err)
	assert.True(t, got.Replayed)
	assert.Equal(t, "paid with ch_1", string(got.Response))
	assert.ErrorIs(t, stalled(), idempotency.ErrLeaseLost)

	// Nothing parked, nothing to retry.
	_, err = r.RetryParked(context.Background(), "shop", "order-7")
	assert.ErrorIs(t, err, idempotency.ErrWrongState)
	_, err = r.RetryParked(context.Background(), "shop", "no-such-order")
	assert.ErrorIs(t, err, idempotency.ErrNotFound)
}

// A parked execution with nothing to run it with stays parked: RetryParked
// says why and changes nothing.
func TestRetryParkedWithoutWorkLeavesItParked(t *testing.T) {
	f := newFleet(t)
	stalled := stall(t, f, idempotency.Request{Caller: "shop", Key: "plain"}, "charge")
	f.clock.Add(testLease + time.Second)
	var log bytes.Buffer
	_, err := f.runner().Reconcile(context.Background(), quiet(&log))
	require.NoError(t, err)
	_, err = f.runner().RetryParked(context.Background(), "shop", "plain")
	assert.ErrorIs(t, err, idempotency.ErrNotResumable)
	parked, err := f.store.ListParked(context.Background(), "", "", 0)
	require.NoError(t, err)
	require.Len(t, parked, 1)
	assert.Equal(t, int64(2), parked[0].Attempt, "no takeover happened")
	assert.ErrorIs(t, stalled(), idempotency.ErrLeaseLost)
}
