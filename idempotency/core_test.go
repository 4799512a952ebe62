package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/idempotency"
)

func req(key string) idempotency.Request {
	return idempotency.Request{Caller: "consumer", Key: key, Fingerprint: "fp"}
}

func TestDoRunsOnceAndReplays(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	var runs atomic.Int64
	work := func(ctx context.Context, x *idempotency.Execution) ([]byte, error) {
		runs.Add(1)
		require.Same(t, x, idempotency.FromContext(ctx))
		return []byte("ok"), nil
	}
	res, err := e.runner.Do(ctx, req("msg-1"), work)
	require.NoError(t, err)
	assert.Equal(t, idempotency.Result{Response: []byte("ok"), Attempt: 1}, res)
	res, err = e.runner.Do(ctx, req("msg-1"), work)
	require.NoError(t, err)
	assert.Equal(t, idempotency.Result{Response: []byte("ok"), Replayed: true, Attempt: 1}, res)
	assert.EqualValues(t, 1, runs.Load())

	_, err = e.runner.Do(ctx, idempotency.Request{Caller: "consumer", Key: "msg-1", Fingerprint: "other"}, work)
	require.ErrorIs(t, err, idempotency.ErrFingerprintMismatch)
	_, err = e.runner.Do(ctx, req(""), work)
	require.Error(t, err)
	assert.EqualValues(t, 1, runs.Load())
}

func TestDoInProgressRetryAfter(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	hint := func(key string) time.Duration {
		t.Helper()
		_, err := e.runner.Do(ctx, req(key), nil)
		var ip *idempotency.InProgressError
		require.ErrorAs(t, err, &ip)
		var inProgress *idempotency.InProgressError
		require.ErrorAs(t, err, &inProgress)
		return ip.RetryAfter
	}
	// hold starts an execution of key that takes d (on the mock clock) once
	// released, and returns its release and done channels.
	hold := func(key string, d time.Duration) (chan struct{}, chan error) {
		inside, release, done := make(chan struct{}), make(chan struct{}), make(chan error)
		go func() {
			_, err := e.runner.Do(ctx, req(key), func(context.Context, *idempotency.Execution) ([]byte, error) {
				close(inside)
				<-release
				return nil, nil
			})
			done <- err
		}()
		<-inside
		e.clock.Add(d)
		return release, done
	}
	run := func(key string, d time.Duration) {
		t.Helper()
		release, done := hold(key, d)
		close(release)
		require.NoError(t, <-done)
	}

	// Before any execution ended: the shortest hint, never the lease.
	release, done := hold("first", 10*time.Second)
	assert.Equal(t, time.Second, hint("first"))
	close(release)
	require.NoError(t, <-done)

	// Executions that take about 5 s: the hint follows them, never the lease.
	for i := range 20 {
		run(fmt.Sprint("five-", i), 5*time.Second)
	}
	release, done = hold("busy", 0)
	got := hint("busy")
	assert.GreaterOrEqual(t, got, 5*time.Second)
	assert.Less(t, got, 7*time.Second)
	// Never more than the time left on the holder's lease...
	e.clock.Add(testLease - 3*time.Second)
	assert.Equal(t, 3*time.Second, hint("busy"))
	// ...and never less than a second.
	e.clock.Add(3*time.Second - time.Millisecond)
	assert.Equal(t, time.Second, hint("busy"))
	close(release)
	require.NoError(t, <-done)

	// Fast executions bring it back down.
	for i := range 40 {
		run(fmt.Sprint("fast-", i), time.Millisecond)
	}
	release, done = hold("fast", 0)
	assert.Equal(t, time.Second, hint("fast"))
	close(release)
	require.NoError(t, <-done)
}

func TestDoErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	errBad := errors.New("bad input")

	t.Run("Reject frees the key", func(t *testing.T) {
		e := newEnv(t)
		_, err := e.runner.Do(ctx, req("k"), func(context.Context, *idempotency.Execution) ([]byte, error) {
			return nil, idempotency.Reject(errBad)
		})
		require.ErrorIs(t, err, idempotency.ErrRejected)
		require.ErrorIs(t, err, errBad)
		require.Zero(t, e.store.Len())
		assert.NoError(t, idempotency.Reject(nil))
	})
	t.Run("plain error before any step frees the key", func(t *testing.T) {
		e := newEnv(t)
		_, err := e.runner.Do(ctx, req("k"), func(context.Context, *idempotency.Execution) ([]byte, error) {
			return nil, errBad
		})
		require.ErrorIs(t, err, errBad)
		require.Zero(t, e.store.Len())
	})
	t.Run("Abort stores the outcome", func(t *testing.T) {
		e := newEnv(t)
		res, err := e.runner.Do(ctx, req("k"), func(context.Context, *idempotency.Execution) ([]byte, error) {
			return []byte("ignored"), idempotency.Abort([]byte("declined"), errBad)
		})
		require.ErrorIs(t, err, idempotency.ErrAborted)
		require.ErrorIs(t, err, errBad)
		assert.Equal(t, []byte("declined"), res.Response)
		res, err = e.runner.Do(ctx, req("k"), nil)
		require.NoError(t, err)
		assert.Equal(t, []byte("declined"), res.Response)
		assert.True(t, res.Replayed)
	})
	t.Run("panic frees the key and is re-raised", func(t *testing.T) {
		e := newEnv(t)
		require.PanicsWithValue(t, "boom", func() {
			_, _ = e.runner.Do(ctx, req("k"), func(context.Context, *idempotency.Execution) ([]byte, error) {
				panic("boom")
			})
		})
		require.Zero(t, e.store.Len())
	})
	t.Run("store failure", func(t *testing.T) {
		_, err := idempotency.NewRunner(failingStore{}).Do(ctx, req("k"), nil)
		require.ErrorIs(t, err, errStoreDown)
	})
}

func TestDoLateCompletionIsFenced(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	inside := make(chan struct{})
	release := make(chan struct{})
	done := make(chan error)
	go func() {
		_, err := e.runner.Do(ctx, req("k"), func(context.Context, *idempotency.Execution) ([]byte, error) {
			close(inside)
			<-release
			return []byte("stale"), nil
		})
		done <- err
	}()
	<-inside
	e.clock.Add(testLease + time.Second)
	res, err := e.runner.Do(ctx, req("k"), func(_ context.Context, x *idempotency.Execution) ([]byte, error) {
		assert.True(t, x.Resumed())
		return []byte("fresh"), nil
	})
	require.NoError(t, err)
	assert.EqualValues(t, 2, res.Attempt)
	close(release)
	require.ErrorIs(t, <-done, idempotency.ErrLeaseLost)
	res, err = e.runner.Do(ctx, req("k"), nil)
	require.NoError(t, err)
	assert.Equal(t, "fresh", string(res.Response))
}

func TestNilStoreIsMemory(t *testing.T) {
	t.Parallel()
	r := idempotency.NewRunner(nil)
	require.IsType(t, &idempotency.MemoryStore{}, r.Store())
	assert.Equal(t, time.Minute, r.Lease())
	assert.Equal(t, 24*time.Hour, r.TTL())
	r = idempotency.NewRunner(nil, idempotency.WithLease(-1), idempotency.WithTTL(0), idempotency.WithClock(nil))
	assert.Equal(t, time.Minute, r.Lease())
	assert.Equal(t, 24*time.Hour, r.TTL())
}

func TestCorruptRecoveryDataIsAnError(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c, err := e.store.Claim(ctx, idempotency.ClaimRequest{Caller: "consumer", Key: "k", Fingerprint: "fp", Lease: testLease, TTL: testTTL})
	require.NoError(t, err)
	f := c.Record.Fence()
	require.NoError(t, e.store.SaveRecoveryPoint(ctx, f, "done:x", []byte{1, 5, 'x'}, testLease))
	e.clock.Add(testLease + time.Second)
	_, err = e.runner.Do(ctx, req("k"), func(context.Context, *idempotency.Execution) ([]byte, error) {
		t.Error("work ran with unreadable recovery data")
		return nil, nil
	})
	require.ErrorContains(t, err, "recovery data")
}

func TestRefingerprintMatchesOlderVersions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	old := idempotency.Request{Caller: "c", Key: "k", Fingerprint: "v0:abc"}
	_, err := e.runner.Do(ctx, old, func(context.Context, *idempotency.Execution) ([]byte, error) {
		return []byte("stored under v0"), nil
	})
	require.NoError(t, err)

	var asked []string
	current := idempotency.Request{Caller: "c", Key: "k", Fingerprint: "v1:def",
		Refingerprint: func(v string) (string, bool) {
			asked = append(asked, v)
			return "v0:abc", v == "v0"
		}}
	res, err := e.runner.Do(ctx, current, nil)
	require.NoError(t, err)
	assert.True(t, res.Replayed)
	assert.Equal(t, "stored under v0", string(res.Response))
	assert.Equal(t, []string{"v0"}, asked)

	// Another request in the old version still mismatches.
	current.Refingerprint = func(string) (string, bool) { return "v0:other", true }
	_, err = e.runner.Do(ctx, current, nil)
	require.ErrorIs(t, err, idempotency.ErrFingerprintMismatch)
	// And a mismatch within one version never asks.
	asked = nil
	current.Fingerprint = "v0:zzz"
	_, err = e.runner.Do(ctx, current, nil)
	require.ErrorIs(t, err, idempotency.ErrFingerprintMismatch)
	assert.Empty(t, asked)
}

// An execution that stalled past its lease (and lost it) does not teach the
// Runner that executions take that long.
func TestRetryAfterIgnoresStalledExecutions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	inside, release, done := make(chan struct{}), make(chan struct{}), make(chan error)
	go func() {
		_, err := e.runner.Do(ctx, req("stalled"), func(context.Context, *idempotency.Execution) ([]byte, error) {
			close(inside)
			<-release
			return nil, nil
		})
		done <- err
	}()
	<-inside
	e.clock.Add(3 * testLease)
	_, err := e.runner.Do(ctx, req("stalled"), func(context.Context, *idempotency.Execution) ([]byte, error) {
		return nil, nil
	})
	require.NoError(t, err)
	close(release)
	require.ErrorIs(t, <-done, idempotency.ErrLeaseLost)

	inside2, release2, done2 := make(chan struct{}), make(chan struct{}), make(chan error)
	go func() {
		_, err := e.runner.Do(ctx, req("busy"), func(context.Context, *idempotency.Execution) ([]byte, error) {
			close(inside2)
			<-release2
			return nil, nil
		})
		done2 <- err
	}()
	<-inside2
	_, err = e.runner.Do(ctx, req("busy"), nil)
	var ip *idempotency.InProgressError
	require.ErrorAs(t, err, &ip)
	assert.Equal(t, time.Second, ip.RetryAfter)
	close(release2)
	require.NoError(t, <-done2)
}
