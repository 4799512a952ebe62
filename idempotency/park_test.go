package idempotency_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/idempotency"
)

// A Work that parks its execution leaves it listed with its reason and its
// input, heard as OutcomeParked; RetryParked runs the registered work
// again with that input and stores the outcome a repeat then gets.
func TestWorkParksItsExecution(t *testing.T) {
	var outcomes []idempotency.Outcome
	r := idempotency.NewRunner(nil, idempotency.WithObserver(func(_ context.Context, o idempotency.Observation) {
		outcomes = append(outcomes, o.Outcome)
	}))
	var broken atomic.Bool
	broken.Store(true)
	var inputs []string
	work := func(ctx context.Context, e *idempotency.Execution) ([]byte, error) {
		inputs = append(inputs, string(e.Input()))
		if broken.Load() {
			return nil, idempotency.Park(errors.New("poison: no such product"))
		}
		return []byte("shipped " + string(e.Input())), nil
	}
	r.Register("ship", work)
	req := idempotency.Request{Caller: "orders", Key: "msg-1", Fingerprint: "f", Work: "ship", Input: []byte("order 42")}

	_, err := r.Do(context.Background(), req, nil)
	require.ErrorIs(t, err, idempotency.ErrParked)
	assert.ErrorContains(t, err, "poison: no such product")
	assert.Equal(t, []idempotency.Outcome{idempotency.OutcomeParked}, outcomes)
	parked, err := r.Store().ListParked(context.Background(), "", "", 0)
	require.NoError(t, err)
	require.Len(t, parked, 1)
	assert.Equal(t, "msg-1", parked[0].Key)
	assert.Equal(t, "poison: no such product", parked[0].Parked)

	// Parked again by a retry that fails the same way: still listed.
	_, err = r.RetryParked(context.Background(), "orders", "msg-1")
	require.ErrorIs(t, err, idempotency.ErrParked)
	parked, err = r.Store().ListParked(context.Background(), "", "", 0)
	require.NoError(t, err)
	require.Len(t, parked, 1)

	broken.Store(false)
	res, err := r.RetryParked(context.Background(), "orders", "msg-1")
	require.NoError(t, err)
	assert.Equal(t, "shipped order 42", string(res.Response))
	assert.Equal(t, []string{"order 42", "order 42", "order 42"}, inputs)
	res, err = r.Do(context.Background(), req, nil)
	require.NoError(t, err)
	assert.True(t, res.Replayed)
	parked, err = r.Store().ListParked(context.Background(), "", "", 0)
	require.NoError(t, err)
	assert.Empty(t, parked)
}

// Park(nil) is nil, and a parked error is seen through wrapping.
func TestParkNil(t *testing.T) {
	assert.NoError(t, idempotency.Park(nil))
	cause := errors.New("cause")
	err := idempotency.Park(cause)
	assert.ErrorIs(t, err, idempotency.ErrParked)
	assert.ErrorIs(t, err, cause)
}
