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

// failingComplete is a MemoryStore whose next Complete fails, as a
// database that is briefly out of reach.
type failingComplete struct {
	*idempotency.MemoryStore
	fail atomic.Bool
}

var errCompleteDown = errors.New("store unreachable")

func (s *failingComplete) Complete(ctx context.Context, f idempotency.Fence, response []byte) error {
	if s.fail.CompareAndSwap(true, false) {
		return errCompleteDown
	}
	return s.MemoryStore.Complete(ctx, f, response)
}

// An Abort whose outcome could not be stored is no Abort: Do's error does
// not match ErrAborted (so nobody takes the key as settled), the key is
// given up as after a plain failure, and the retry runs the work again and
// stores its Abort.
func TestAbortNotStoredIsNotAborted(t *testing.T) {
	store := &failingComplete{MemoryStore: idempotency.NewMemoryStore(nil)}
	runner := idempotency.NewRunner(store)
	var runs atomic.Int32
	work := func(context.Context, *idempotency.Execution) ([]byte, error) {
		runs.Add(1)
		return nil, idempotency.Abort([]byte("out of stock"), errors.New("out of stock"))
	}
	req := idempotency.Request{Caller: "c", Key: "k", Fingerprint: "v1:f"}
	store.fail.Store(true)
	_, err := runner.Do(context.Background(), req, work)
	require.Error(t, err)
	assert.NotErrorIs(t, err, idempotency.ErrAborted)
	assert.ErrorIs(t, err, errCompleteDown)
	_, err = store.Get(context.Background(), "c", "k")
	assert.ErrorIs(t, err, idempotency.ErrNotFound, "the key is freed, as after a plain failure")

	res, err := runner.Do(context.Background(), req, work)
	require.ErrorIs(t, err, idempotency.ErrAborted)
	assert.Equal(t, "out of stock", string(res.Response))
	assert.Equal(t, int32(2), runs.Load())
	rec, err := store.Get(context.Background(), "c", "k")
	require.NoError(t, err)
	assert.Equal(t, idempotency.StateCompleted, rec.State)
}
