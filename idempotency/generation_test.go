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

// A holder that paused past its lease must not complete a later record of its
// key: here its successor released the key and a new request claimed it
// afresh, at Attempt 1 again, and is still running when the holder wakes.
func TestDoPausedHolderCannotCompleteALaterRecord(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()

	// A claims (attempt 1) and pauses.
	aInside, aWake, aDone := make(chan struct{}), make(chan struct{}), make(chan error)
	go func() {
		_, err := e.runner.Do(ctx, req("k"), func(context.Context, *idempotency.Execution) ([]byte, error) {
			close(aInside)
			<-aWake
			return []byte("A"), nil
		})
		aDone <- err
	}()
	<-aInside

	// Its lease runs out; B takes over (attempt 2), fails before any step and
	// so frees the key.
	e.clock.Add(testLease + time.Second)
	boom := errors.New("boom")
	_, err := e.runner.Do(ctx, req("k"), func(_ context.Context, x *idempotency.Execution) ([]byte, error) {
		assert.EqualValues(t, 2, x.Attempt())
		return nil, boom
	})
	require.ErrorIs(t, err, boom)
	_, err = e.store.Get(ctx, "consumer", "k")
	require.ErrorIs(t, err, idempotency.ErrNotFound)

	// C, another request with the same key, claims it afresh (attempt 1, like
	// A) and is still running when A wakes.
	other := req("k")
	other.Fingerprint = "another request"
	cInside, cWake, cDone := make(chan struct{}), make(chan struct{}), make(chan idempotency.Result)
	go func() {
		res, err := e.runner.Do(ctx, other, func(_ context.Context, x *idempotency.Execution) ([]byte, error) {
			assert.EqualValues(t, 1, x.Attempt())
			close(cInside)
			<-cWake
			return []byte("C"), nil
		})
		assert.NoError(t, err)
		cDone <- res
	}()
	<-cInside

	close(aWake)
	require.ErrorIs(t, <-aDone, idempotency.ErrLeaseLost)
	rec, err := e.store.Get(ctx, "consumer", "k")
	require.NoError(t, err)
	assert.Equal(t, idempotency.StateInProgress, rec.State, "A's outcome landed on C's record")
	assert.Equal(t, "another request", rec.Fingerprint)

	close(cWake)
	assert.Equal(t, "C", string((<-cDone).Response))
	res, err := e.runner.Do(ctx, other, nil)
	require.NoError(t, err)
	assert.True(t, res.Replayed)
	assert.Equal(t, "C", string(res.Response))
	_, err = e.runner.Do(ctx, req("k"), nil)
	require.ErrorIs(t, err, idempotency.ErrFingerprintMismatch)
}
