package retry_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/backoff"
)

var errFlaky = errors.New("flaky")

// noWait is a backoff that waits nothing and keeps tests exact.
var noWait = retry.WithBackoff(backoff.Constant(0))

func TestDoSucceedsFirstTime(t *testing.T) {
	calls := 0
	err := retry.Do(context.Background(), func(context.Context) error { calls++; return nil })
	require.NoError(t, err)
	assert.Equal(t, 1, calls)
}

func TestDoRetriesUntilSuccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		err := retry.Do(t.Context(), func(context.Context) error {
			calls++
			if calls < 3 {
				return errFlaky
			}
			return nil
		})
		require.NoError(t, err)
		assert.Equal(t, 3, calls)
	})
}

func TestDoExhaustsAttemptsAndKeepsLastError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		errs := []error{errors.New("first"), errors.New("second"), errors.New("third"), errors.New("fourth")}
		err := retry.Do(t.Context(), func(context.Context) error { calls++; return errs[calls-1] })
		assert.Equal(t, retry.DefaultMaxAttempts, calls)
		var re *retry.Error
		require.ErrorAs(t, err, &re)
		assert.Equal(t, 4, re.Attempts)
		assert.ErrorIs(t, err, retry.ErrAttemptsExhausted)
		assert.ErrorIs(t, err, errs[3])
		assert.NotErrorIs(t, err, errs[0])
		assert.Contains(t, err.Error(), "fourth")
	})
}

func TestPermanentStopsAfterOneCall(t *testing.T) {
	calls := 0
	opErr := errors.New("bad request")
	err := retry.Do(context.Background(), func(context.Context) error { calls++; return retry.Permanent(opErr) })
	assert.Equal(t, 1, calls)
	assert.ErrorIs(t, err, retry.ErrPermanent)
	assert.ErrorIs(t, err, opErr)
	var re *retry.Error
	require.ErrorAs(t, err, &re)
	assert.Same(t, opErr, re.Last, "the marker is removed from the reported error")
}

func TestRetryAfterIsAFloorForTheNextWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var times []time.Time
		err := retry.Do(t.Context(), func(context.Context) error {
			times = append(times, time.Now())
			if len(times) == 1 {
				return retry.RetryAfter(2*time.Second, errFlaky)
			}
			return nil
		}, retry.WithBackoff(backoff.Constant(10*time.Millisecond)))
		require.NoError(t, err)
		require.Len(t, times, 2)
		assert.GreaterOrEqual(t, times[1].Sub(times[0]), 2*time.Second)
	})
}

func TestRetryAfterOverTheCapHandsBackAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		calls := 0
		err := retry.Do(t.Context(), func(context.Context) error {
			calls++
			return retry.RetryAfter(time.Hour, errFlaky)
		}, retry.WithMaxRetryAfter(time.Minute))
		assert.Equal(t, 1, calls)
		assert.ErrorIs(t, err, retry.ErrRetryAfterTooLong)
		assert.ErrorIs(t, err, errFlaky)
		assert.Zero(t, time.Since(start))
	})
}

func TestTotalTimeoutShorterThanBackoffReturnsWithoutWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		calls := 0
		err := retry.Do(t.Context(), func(context.Context) error { calls++; return errFlaky },
			retry.WithTotalTimeout(300*time.Millisecond),
			retry.WithBackoff(backoff.Constant(time.Second)))
		assert.Equal(t, 1, calls)
		assert.Zero(t, time.Since(start), "no wait was started that ends past the deadline")
		assert.ErrorIs(t, err, retry.ErrDeadline)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.ErrorIs(t, err, errFlaky)
	})
}

func TestContextDeadlineIsHonouredLikeTheOption(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		calls := 0
		err := retry.Do(ctx, func(context.Context) error { calls++; return errFlaky },
			retry.WithTotalTimeout(time.Hour), // the sooner deadline wins
			retry.WithBackoff(backoff.Constant(200*time.Millisecond)))
		assert.Equal(t, 2, calls, "one wait of 200 ms fits before 300 ms; a second does not")
		assert.ErrorIs(t, err, retry.ErrDeadline)
	})
}

func TestCancelDuringWaitReturnsPromptlyWithBothErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		start := time.Now()
		time.AfterFunc(50*time.Millisecond, cancel)
		err := retry.Do(ctx, func(context.Context) error { return errFlaky },
			retry.WithBackoff(backoff.Constant(10*time.Second)))
		assert.Equal(t, 50*time.Millisecond, time.Since(start), "returns the moment the context is cancelled")
		assert.ErrorIs(t, err, context.Canceled)
		assert.ErrorIs(t, err, errFlaky)
		assert.ErrorIs(t, err, retry.ErrCancelled)
	})
}

func TestCancelledOperationIsNotRetried(t *testing.T) {
	calls := 0
	err := retry.Do(context.Background(), func(context.Context) error { calls++; return context.Canceled })
	assert.Equal(t, 1, calls)
	assert.ErrorIs(t, err, retry.ErrPermanent)
}

func TestAttemptTimeoutCutsEachAttemptAndRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var deadlines []time.Duration
		calls := 0
		err := retry.Do(t.Context(), func(ctx context.Context) error {
			calls++
			d, ok := ctx.Deadline()
			require.True(t, ok)
			deadlines = append(deadlines, d.Sub(time.Now()))
			if calls == 3 {
				return nil
			}
			<-ctx.Done() // hang until the attempt times out
			return ctx.Err()
		}, retry.WithAttemptTimeout(100*time.Millisecond), noWait)
		require.NoError(t, err)
		assert.Equal(t, 3, calls)
		assert.Equal(t, []time.Duration{100 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond}, deadlines)
		assert.Equal(t, 200*time.Millisecond, time.Since(start))
	})
}

func TestAttemptTimeoutNeverExceedsWhatIsLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var left []time.Duration
		err := retry.Do(t.Context(), func(ctx context.Context) error {
			d, _ := ctx.Deadline()
			left = append(left, time.Until(d))
			<-ctx.Done()
			return ctx.Err()
		}, retry.WithAttemptTimeout(100*time.Millisecond), retry.WithTotalTimeout(250*time.Millisecond),
			noWait)
		assert.ErrorIs(t, err, retry.ErrDeadline)
		// The second attempt would leave less than an attempt's time after
		// its cut: it runs to the deadline.
		assert.Equal(t, []time.Duration{100 * time.Millisecond, 150 * time.Millisecond}, left)
	})
}

func TestDoValueReturnsTheValue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		v, err := retry.DoValue(t.Context(), func(context.Context) (string, error) {
			calls++
			if calls == 1 {
				return "partial", errFlaky
			}
			return "done", nil
		})
		require.NoError(t, err)
		assert.Equal(t, "done", v)

		v, err = retry.DoValue(t.Context(), func(context.Context) (string, error) {
			return "ignored", retry.Permanent(errFlaky)
		})
		assert.Empty(t, v, "a failed call returns the zero value")
		assert.ErrorIs(t, err, errFlaky)
	})
}

func TestBadOptionsAreClamped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, n := range []int{-5, 0, 1} {
			calls := 0
			err := retry.Do(t.Context(), func(context.Context) error { calls++; return errFlaky },
				retry.WithMaxAttempts(n))
			assert.Equal(t, 1, calls, "WithMaxAttempts(%d) makes one attempt", n)
			assert.ErrorIs(t, err, retry.ErrAttemptsExhausted)
		}
		calls := 0
		err := retry.Do(t.Context(), func(context.Context) error { calls++; return errFlaky },
			retry.WithBackoff(backoff.FullJitter(0, -time.Second)),
			retry.WithTotalTimeout(-time.Second), retry.WithAttemptTimeout(-time.Second),
			retry.WithMaxAttempts(3), retry.WithBackoff(nil), retry.WithClassifier(nil),
			retry.WithClock(nil), nil)
		assert.Equal(t, 3, calls)
		assert.ErrorIs(t, err, retry.ErrAttemptsExhausted)
	})
}

func TestClassifierDecides(t *testing.T) {
	calls := 0
	err := retry.Do(context.Background(), func(context.Context) error { calls++; return errFlaky },
		retry.WithClassifier(retry.IsTransient))
	assert.Equal(t, 1, calls, "a plain error is not a known transient failure")
	assert.ErrorIs(t, err, retry.ErrPermanent)
}

func TestHooksSeeEveryAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var all, retries []retry.Attempt
		calls := 0
		err := retry.Do(t.Context(), func(context.Context) error {
			calls++
			if calls < 3 {
				return errFlaky
			}
			return nil
		}, retry.WithBackoff(backoff.Constant(time.Second)), retry.WithTrace(&retry.Trace{
			Decided: func(_ context.Context, a retry.Attempt) {
				all = append(all, a)
				if a.Retrying {
					retries = append(retries, a)
				}
			},
		}))
		require.NoError(t, err)
		require.Len(t, all, 3)
		require.Len(t, retries, 2)
		assert.Equal(t, retry.Attempt{Number: 1, Err: errFlaky, Retrying: true, Delay: time.Second}, all[0])
		assert.Equal(t, retry.Attempt{Number: 2, Err: errFlaky, Retrying: true, Delay: time.Second, Elapsed: time.Second}, all[1])
		assert.Equal(t, retry.Attempt{Number: 3, Elapsed: 2 * time.Second}, all[2])
		assert.Equal(t, all[:2], retries)
		assert.Equal(t, "attempt 1: flaky; retrying in 1s", all[0].String())
	})
}

func TestMockClockDrivesWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mock := clock.NewMock()
		var calls atomic.Int32
		done := make(chan error)
		go func() {
			done <- retry.Do(t.Context(), func(context.Context) error {
				calls.Add(1)
				return errFlaky
			}, retry.WithClock(mock), retry.WithMaxAttempts(2), retry.WithBackoff(backoff.Constant(time.Minute)))
		}()
		synctest.Wait() // blocked on the mock's timer
		assert.Equal(t, int32(1), calls.Load())
		mock.Add(time.Minute)
		err := <-done
		assert.Equal(t, int32(2), calls.Load())
		assert.ErrorIs(t, err, retry.ErrAttemptsExhausted)
	})
}

func TestNestedDoMakesOneAttemptPerOuterAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inner := 0
		outer := 0
		err := retry.Do(t.Context(), func(ctx context.Context) error {
			outer++
			return retry.Do(ctx, func(context.Context) error { inner++; return errFlaky })
		})
		assert.Equal(t, retry.DefaultMaxAttempts, outer)
		assert.Equal(t, outer, inner, "the inner loop runs its operation once per outer attempt")
		var re *retry.Error
		require.ErrorAs(t, err, &re)
		assert.Equal(t, errFlaky, re.Last, "the inner error reaches the outer loop unchanged")
	})
}

func TestNestedPermanentStopsTheOuterLoop(t *testing.T) {
	outer := 0
	err := retry.Do(context.Background(), func(ctx context.Context) error {
		outer++
		return retry.Do(ctx, func(context.Context) error { return retry.Permanent(errFlaky) })
	})
	assert.Equal(t, 1, outer)
	assert.ErrorIs(t, err, retry.ErrPermanent)
}

func TestErrorFromAnotherLoopIsNotRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gaveUp := retry.Do(context.Background(), func(context.Context) error { return errFlaky },
			retry.WithMaxAttempts(2))
		calls := 0
		err := retry.Do(t.Context(), func(context.Context) error { calls++; return gaveUp })
		assert.Equal(t, 1, calls, "a loop that already retried is not retried again")
		assert.ErrorIs(t, err, retry.ErrPermanent)
	})
}

type ctxKey struct{}

func TestOperationContextKeepsValuesAndCancellation(t *testing.T) {
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "v"))
	err := retry.Do(parent, func(ctx context.Context) error {
		assert.Equal(t, "v", ctx.Value(ctxKey{}))
		child, stop := context.WithCancel(ctx)
		defer stop()
		cancel()
		<-child.Done() // cancelling the caller's context reaches contexts made inside op
		return child.Err()
	})
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorIs(t, err, retry.ErrCancelled)
}
