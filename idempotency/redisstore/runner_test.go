package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func quietConfig() idempotency.ReconcilerConfig {
	return idempotency.ReconcilerConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

var errCrash = errors.New("crashed")

// Runner.Do on Redis: many goroutines on one key run the work once; a
// repeat replays; a rejection frees the key.
func TestRunnerDoOnce(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	runner := idempotency.NewRunner(s)
	ctx := context.Background()
	var runs atomic.Int32
	var wg sync.WaitGroup
	results := make(chan idempotency.Result, 20)
	for range 20 {
		wg.Go(func() {
			res, err := runner.Do(ctx, idempotency.Request{Caller: "c", Key: "job-1", Fingerprint: "fp"},
				func(ctx context.Context, e *idempotency.Execution) ([]byte, error) {
					runs.Add(1)
					return []byte("done"), nil
				})
			var busy *idempotency.InProgressError
			if errors.As(err, &busy) {
				return
			}
			if assert.NoError(t, err) {
				results <- res
			}
		})
	}
	wg.Wait()
	close(results)
	assert.EqualValues(t, 1, runs.Load())
	for res := range results {
		assert.Equal(t, "done", string(res.Response))
	}
	res, err := runner.Do(ctx, idempotency.Request{Caller: "c", Key: "job-1", Fingerprint: "fp"}, nil)
	require.NoError(t, err)
	assert.True(t, res.Replayed)

	_, err = runner.Do(ctx, idempotency.Request{Caller: "c", Key: "job-2", Fingerprint: "fp"},
		func(context.Context, *idempotency.Execution) ([]byte, error) {
			return nil, idempotency.Reject(errors.New("bad"))
		})
	require.ErrorIs(t, err, idempotency.ErrRejected)
	_, err = s.Get(ctx, "c", "job-2")
	require.ErrorIs(t, err, idempotency.ErrNotFound)
}

// Executions that stalled after a step are resumed by a Reconciler with
// the registered work (the step's result kept, not run again); one with no
// work registered is parked, listed, and run again by RetryParked once its
// work is there.
func TestReconcilerOnRedis(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	var charges atomic.Int32
	work := func(ctx context.Context, e *idempotency.Execution) ([]byte, error) {
		ch, err := e.Step(ctx, "charge", func(context.Context, string) ([]byte, error) {
			charges.Add(1)
			return []byte("ch_1"), nil
		})
		if err != nil {
			return nil, err
		}
		return append([]byte("paid "), ch...), nil
	}
	runner := idempotency.NewRunner(s)
	runner.Register("pay", work)
	// A first attempt charges and dies before completing: its lease is cut
	// short, so the execution is stalled at once.
	for i := range 3 {
		_, err := runner.Do(ctx, idempotency.Request{Caller: "c", Key: fmt.Sprint("k", i), Work: "pay", Input: []byte("in")},
			func(ctx context.Context, e *idempotency.Execution) ([]byte, error) {
				if _, err := work(ctx, e); err != nil {
					return nil, err
				}
				return nil, errCrash
			})
		require.ErrorIs(t, err, errCrash)
	}
	n, err := idempotency.Reconcile(ctx, runner, quietConfig())
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	assert.EqualValues(t, 3, charges.Load(), "the charges' results were kept")
	for i := range 3 {
		res, err := runner.Do(ctx, idempotency.Request{Caller: "c", Key: fmt.Sprint("k", i), Work: "pay", Input: []byte("in")}, nil)
		require.NoError(t, err)
		assert.True(t, res.Replayed)
		assert.Equal(t, "paid ch_1", string(res.Response))
	}

	// No work registered under the name: parked, listed, then retried.
	other := idempotency.NewRunner(s)
	_, err = other.Do(ctx, idempotency.Request{Caller: "c", Key: "lost", Work: "refund"},
		func(ctx context.Context, e *idempotency.Execution) ([]byte, error) {
			e.MarkStarted()
			return nil, errCrash
		})
	require.ErrorIs(t, err, errCrash)
	n, err = idempotency.Reconcile(ctx, other, quietConfig())
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	parked, err := s.ListParked(ctx, "", "", 0)
	require.NoError(t, err)
	require.Len(t, parked, 1)
	assert.Equal(t, "lost", parked[0].Key)
	assert.Contains(t, parked[0].Parked, "refund")
	other.Register("refund", func(context.Context, *idempotency.Execution) ([]byte, error) { return []byte("refunded"), nil })
	res, err := other.RetryParked(ctx, "c", "lost")
	require.NoError(t, err)
	assert.Equal(t, "refunded", string(res.Response))
	parked, err = s.ListParked(ctx, "", "", 0)
	require.NoError(t, err)
	assert.Empty(t, parked)
}

// Sweepers at once with claims replacing the same expired records: every
// expired record is removed once, every claim creates a fresh record, and
// nothing live is removed.
func TestSweepersRaceClaims(t *testing.T) {
	t.Parallel()
	s, shift := newStore(t)
	ctx := context.Background()
	const keys = 200
	for i := range keys {
		mustClaim(t, s, claimReq(fmt.Sprint("k", i)), idempotency.ClaimCreated)
	}
	shift.Advance(2 * time.Hour)
	var (
		wg      sync.WaitGroup
		removed atomic.Int64
	)
	for range 3 {
		wg.Go(func() {
			n, err := idempotency.Sweep(ctx, s, 16)
			assert.NoError(t, err)
			removed.Add(int64(n))
		})
	}
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < keys; i += 8 {
				c, err := s.Claim(ctx, claimReq(fmt.Sprint("k", i)))
				if assert.NoError(t, err) {
					assert.Equal(t, idempotency.ClaimCreated, c.Outcome)
				}
			}
		})
	}
	wg.Wait()
	n, err := s.DeleteExpired(ctx, 0)
	require.NoError(t, err)
	// A record a claim replaced first is not there to remove; one a
	// sweeper removed first, the claim makes afresh.
	total := removed.Load() + int64(n)
	assert.True(t, total >= keys/2 && total <= keys, "removed %d of %d expired records", total, keys)
	for i := range keys {
		_, err := s.Get(ctx, "alice", fmt.Sprint("k", i))
		if i%8 < 4 {
			require.NoError(t, err)
		} else {
			require.ErrorIs(t, err, idempotency.ErrNotFound)
		}
	}
	n, err = s.DeleteExpired(ctx, 0)
	require.NoError(t, err)
	assert.Zero(t, n)
	// The sweeper on its own goroutine, run by the store's clock.
	shift.Advance(2 * time.Hour)
	sweeps := make(chan int, 10)
	sw := idempotency.StartSweeper(s, idempotency.SweeperConfig{Interval: time.Millisecond,
		OnSweep: func(n int, err error) {
			assert.NoError(t, err)
			sweeps <- n
		}})
	defer sw.Stop()
	assert.Equal(t, keys/2, <-sweeps)
}
