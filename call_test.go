package retry_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/backoff"
	"github.com/exactlyonce/retry/protocol"
	"github.com/exactlyonce/retry/pushback"
)

var errCallFailed = errors.New("call failed")

// script returns an attempt function that answers attempt n with
// verdicts[n-1] (the last one over and over), and records the keys it saw.
func script(call *protocol.Call, verdicts ...protocol.Verdict) (func(context.Context, int, bool) protocol.Verdict, *[]string) {
	var mu sync.Mutex
	var keys []string
	return func(_ context.Context, n int, _ bool) protocol.Verdict {
		mu.Lock()
		keys = append(keys, call.Key)
		mu.Unlock()
		return verdicts[min(n, len(verdicts))-1]
	}, &keys
}

var transient = protocol.Verdict{Err: errCallFailed, Retry: true}

func TestCallerRetriesWithOneKey(t *testing.T) {
	clk := newAutoClock()
	cl := protocol.NewCaller(retry.WithClock(clk))
	require.NotNil(t, cl.Budget(), "a Caller has a budget of its own")
	call := &protocol.Call{Target: "svc", Method: "/svc/Create"}
	attempt, keys := script(call, transient, transient, protocol.Verdict{Result: "done"})
	var report retry.Report
	v, err := cl.Run(retry.NewContext(context.Background(), retry.WithReport(&report)), call, attempt)
	require.NoError(t, err)
	assert.Equal(t, "done", v.Result)
	require.Len(t, *keys, 3)
	assert.Regexp(t, `^"[0-9a-f-]{36}"$`, (*keys)[0], "the IETF draft's form, as the Transport's")
	assert.Equal(t, []string{(*keys)[0], (*keys)[0], (*keys)[0]}, *keys, "the same key on every attempt")
	assert.Equal(t, retry.Report{Attempts: 3, IdempotencyKey: call.Key}, report)
	assert.Len(t, clk.Waits(), 2)
}

func TestCallerKeys(t *testing.T) {
	for _, tc := range []struct {
		name    string
		call    protocol.Call
		opts    []retry.Option
		want    string // "" none, "new" a fresh one, else this one
		retried bool
	}{
		{name: "idempotent", call: protocol.Call{Idempotent: true}, want: "", retried: true},
		{name: "keyed", call: protocol.Call{}, want: "new", retried: true},
		{name: "caller's own", call: protocol.Call{Key: "mine"}, want: "mine", retried: true},
		{name: "without keys", call: protocol.Call{}, opts: []retry.Option{retry.WithoutKeys()}, want: ""},
		{name: "marked idempotent", call: protocol.Call{}, opts: []retry.Option{retry.WithIdempotent()}, want: "", retried: true},
		{name: "without retries", call: protocol.Call{}, opts: []retry.Option{retry.WithoutRetries()}, want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := protocol.NewCaller(append(tc.opts, retry.WithClock(newAutoClock()))...)
			call := tc.call
			attempt, keys := script(&call, transient, protocol.Verdict{})
			_, err := cl.Run(context.Background(), &call, attempt)
			switch tc.want {
			case "":
				assert.Empty(t, call.Key)
			case "new":
				assert.NotEmpty(t, call.Key)
			default:
				assert.Equal(t, tc.want, call.Key)
			}
			if tc.retried {
				assert.NoError(t, err)
				assert.Len(t, *keys, 2)
				return
			}
			assert.Len(t, *keys, 1)
			var rerr *retry.Error
			require.ErrorAs(t, err, &rerr)
			assert.ErrorIs(t, err, errCallFailed)
			if tc.name == "without keys" {
				assert.ErrorIs(t, err, retry.ErrNotIdempotent, "a call that may have had its effect is not repeated without a key")
			}
		})
	}
}

func TestCallerTokenKeys(t *testing.T) {
	cl := protocol.NewCaller(retry.WithTokenKeys())
	call := &protocol.Call{}
	_, err := cl.Run(context.Background(), call, func(context.Context, int, bool) protocol.Verdict { return protocol.Verdict{} })
	require.NoError(t, err)
	assert.Regexp(t, `^[0-9a-f-]{36}$`, call.Key)
}

func TestCallerVerdicts(t *testing.T) {
	for _, tc := range []struct {
		name     string
		verdicts []protocol.Verdict
		opts     []retry.Option
		reason   error
		attempts int
		waits    []time.Duration
	}{
		{name: "final", verdicts: []protocol.Verdict{{Err: errCallFailed}}, reason: retry.ErrPermanent, attempts: 1},
		{name: "stop", verdicts: []protocol.Verdict{{Err: errCallFailed, Retry: true, Stop: retry.ErrPushback}}, reason: retry.ErrPushback, attempts: 1},
		{name: "exhausted", verdicts: []protocol.Verdict{transient}, reason: retry.ErrAttemptsExhausted, attempts: 4},
		{name: "retry-after floor", attempts: 2,
			verdicts: []protocol.Verdict{{Err: errCallFailed, Retry: true, RetryAfter: 3 * time.Second, HasRetryAfter: true}, {}},
			waits:    []time.Duration{3 * time.Second}},
		{name: "retry-after over the cap", reason: retry.ErrRetryAfterTooLong, attempts: 1,
			verdicts: []protocol.Verdict{{Err: errCallFailed, Retry: true, RetryAfter: time.Hour, HasRetryAfter: true}}},
		{name: "retry-after past the deadline", reason: retry.ErrDeadline, attempts: 1,
			opts:     []retry.Option{retry.WithTotalTimeout(2 * time.Second)},
			verdicts: []protocol.Verdict{{Err: errCallFailed, Retry: true, RetryAfter: 5 * time.Second, HasRetryAfter: true}}},
		{name: "pending is neither an attempt nor a retry", attempts: 7, opts: []retry.Option{retry.WithMaxAttempts(2), retry.WithBudget(retry.NewBudget(0, 0, 1))},
			verdicts: []protocol.Verdict{
				{Err: errCallFailed, Retry: true, Pending: true, RetryAfter: time.Second, HasRetryAfter: true},
				{Err: errCallFailed, Retry: true, Pending: true, RetryAfter: time.Second, HasRetryAfter: true},
				{Err: errCallFailed, Retry: true, Pending: true, RetryAfter: time.Second, HasRetryAfter: true},
				{Err: errCallFailed, Retry: true, Pending: true, RetryAfter: time.Second, HasRetryAfter: true},
				{Err: errCallFailed, Retry: true, Pending: true, RetryAfter: time.Second, HasRetryAfter: true},
				transient, {}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newAutoClock()
			cl := protocol.NewCaller(append([]retry.Option{retry.WithClock(clk), retry.WithBackoff(backoff.Constant(0))}, tc.opts...)...)
			call := &protocol.Call{Target: "t"}
			attempt, keys := script(call, tc.verdicts...)
			_, err := cl.Run(context.Background(), call, attempt)
			assert.Len(t, *keys, tc.attempts)
			if tc.reason == nil {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, tc.reason)
				assert.ErrorIs(t, err, errCallFailed, "the last error is kept")
			}
			for i, w := range tc.waits {
				assert.Equal(t, w, clk.Waits()[i])
			}
		})
	}
}

func TestCallerAttemptTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := protocol.NewCaller(retry.WithAttemptTimeout(50 * time.Millisecond))
		call := &protocol.Call{Idempotent: true}
		v, err := cl.Run(context.Background(), call, func(ctx context.Context, n int, _ bool) protocol.Verdict {
			if n == 1 {
				<-ctx.Done() // hangs until its timeout cuts it off
				return protocol.Verdict{Err: ctx.Err()}
			}
			return protocol.Verdict{Result: n}
		})
		require.NoError(t, err)
		assert.Equal(t, 2, v.Result)
	})
}

func TestCallerAttemptTimeoutIsAnAttemptTimeoutError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := protocol.NewCaller(retry.WithAttemptTimeout(50*time.Millisecond), retry.WithMaxAttempts(2))
		_, err := cl.Run(context.Background(), &protocol.Call{Idempotent: true}, func(ctx context.Context, _ int, _ bool) protocol.Verdict {
			<-ctx.Done()
			return protocol.Verdict{Err: errCallFailed}
		})
		var timeout *retry.AttemptTimeoutError
		require.ErrorAs(t, err, &timeout)
		assert.Equal(t, 50*time.Millisecond, timeout.Timeout)
		assert.ErrorIs(t, err, retry.ErrAttemptsExhausted)
		assert.ErrorIs(t, err, errCallFailed)
		assert.NotErrorIs(t, err, context.Canceled)
	})
}

func TestCallerWithoutDeadlineBoundsEachAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := protocol.NewCaller(retry.WithMaxAttempts(1))
		start := time.Now()
		_, err := cl.Run(context.Background(), &protocol.Call{Idempotent: true}, func(ctx context.Context, _ int, _ bool) protocol.Verdict {
			<-ctx.Done()
			return protocol.Verdict{Err: ctx.Err()}
		})
		assert.ErrorAs(t, err, new(*retry.AttemptTimeoutError))
		assert.Equal(t, retry.DefaultAttemptTimeout, time.Since(start))
	})
}

func TestCallerHedgesAndKeepsTheWinner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var hedgedSeen atomic.Bool
		var firstCancelled atomic.Bool
		var won []bool
		tr := &retry.Trace{Hedged: func(_ context.Context, w bool) { won = append(won, w) }}
		cl := protocol.NewCaller(retry.WithHedging(retry.Hedging{MinDelay: 10 * time.Millisecond}), retry.WithTrace(tr))
		call := &protocol.Call{Idempotent: true, Hedgeable: true}
		v, err := cl.Run(context.Background(), call, func(ctx context.Context, n int, hedge bool) protocol.Verdict {
			hedgedSeen.Store(hedge)
			if n == 1 {
				<-ctx.Done() // the slow copy: cancelled once the hedge wins
				firstCancelled.Store(true)
				return protocol.Verdict{Err: ctx.Err(), Retry: true}
			}
			return protocol.Verdict{Result: "hedge"}
		})
		require.NoError(t, err)
		assert.Equal(t, "hedge", v.Result)
		assert.True(t, hedgedSeen.Load(), "each copy is told it is hedged")
		synctest.Wait()
		assert.True(t, firstCancelled.Load(), "the losing copy is cancelled")
		assert.Equal(t, []bool{true}, won)
	})
}

func TestCallerNeverHedgesAHeldOrUnsafeCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := protocol.NewCaller(retry.WithHedging(retry.Hedging{MinDelay: time.Millisecond}), retry.WithoutKeys())
		for _, call := range []*protocol.Call{
			{Idempotent: true, Hedgeable: true, Hold: true},
			{Hedgeable: true}, // no key: not safe to send twice
			{Idempotent: true},
		} {
			var copies atomic.Int32
			_, err := cl.Run(context.Background(), call, func(context.Context, int, bool) protocol.Verdict {
				copies.Add(1)
				time.Sleep(time.Second)
				return protocol.Verdict{}
			})
			require.NoError(t, err)
			call.Release()
			assert.EqualValues(t, 1, copies.Load())
		}
	})
}

func TestCallerHoldLeavesTheContextToRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := protocol.NewCaller(retry.WithTotalTimeout(time.Minute), retry.WithAttemptTimeout(time.Second))
		var attemptCtx context.Context
		call := &protocol.Call{Idempotent: true, Hold: true}
		_, err := cl.Run(context.Background(), call, func(ctx context.Context, _ int, _ bool) protocol.Verdict {
			attemptCtx = ctx
			return protocol.Verdict{}
		})
		require.NoError(t, err)
		time.Sleep(2 * time.Second) // past the attempt timeout: it no longer applies
		assert.NoError(t, attemptCtx.Err(), "a held call's context outlives Run and its attempt timeout")
		call.Release()
		assert.ErrorIs(t, attemptCtx.Err(), context.Canceled)
		call.Release() // twice is fine
	})
}

func TestCallerEndsContextsOfAnUnheldCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := protocol.NewCaller(retry.WithTotalTimeout(time.Minute))
		var ctxs []context.Context
		_, err := cl.Run(context.Background(), &protocol.Call{Idempotent: true}, func(ctx context.Context, n int, _ bool) protocol.Verdict {
			ctxs = append(ctxs, ctx)
			if n == 1 {
				return transient
			}
			return protocol.Verdict{}
		})
		require.NoError(t, err)
		for _, ctx := range ctxs {
			assert.Error(t, ctx.Err())
		}
	})
}

func TestCallerInsideDoMakesOneAttemptWithTheLoopsKey(t *testing.T) {
	cl := protocol.NewCaller(retry.WithClock(newAutoClock()))
	var keys []string
	attempts := 0
	err := retry.Do(context.Background(), func(ctx context.Context) error {
		attempts++
		call := &protocol.Call{Target: "t", Method: "/svc/Create"}
		_, err := cl.Run(ctx, call, func(context.Context, int, bool) protocol.Verdict {
			keys = append(keys, call.Key)
			if attempts < 3 {
				return transient
			}
			return protocol.Verdict{}
		})
		return err
	}, retry.WithClock(newAutoClock()))
	require.NoError(t, err)
	assert.Equal(t, 3, attempts)
	require.Len(t, keys, 3, "one attempt per attempt of the enclosing loop")
	assert.Equal(t, keys[0], keys[1])
	assert.Equal(t, keys[0], keys[2])
}

func TestCallerInsideDoMarksItsErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		verdict  protocol.Verdict
		attempts int
	}{
		{"final", protocol.Verdict{Err: errCallFailed}, 1},
		{"stopped", protocol.Verdict{Err: errCallFailed, Retry: true, Stop: retry.ErrPushback}, 1},
		{"transient", transient, 4},
		{"with a wait", protocol.Verdict{Err: errCallFailed, Retry: true, RetryAfter: 2 * time.Second, HasRetryAfter: true}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newAutoClock()
			cl := protocol.NewCaller(retry.WithClock(clk))
			attempts := 0
			err := retry.Do(context.Background(), func(ctx context.Context) error {
				attempts++
				_, err := cl.Run(ctx, &protocol.Call{Idempotent: true}, func(context.Context, int, bool) protocol.Verdict { return tc.verdict })
				return err
			}, retry.WithClock(clk))
			assert.ErrorIs(t, err, errCallFailed)
			assert.Equal(t, tc.attempts, attempts)
			if tc.verdict.HasRetryAfter {
				for _, w := range clk.Waits() {
					assert.GreaterOrEqual(t, w, 2*time.Second)
				}
			}
		})
	}
}

func TestCallerRidesThroughPerTarget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := protocol.NewCaller(retry.WithMaxAttempts(1))
		down := protocol.Verdict{Err: errCallFailed, Failing: true}
		for range 8 {
			// Failures 15 ms apart: the first probe is due 100 ms after
			// the target went down.
			time.Sleep(15 * time.Millisecond)
			_, err := cl.Run(context.Background(), &protocol.Call{Target: "dead", Idempotent: true},
				func(context.Context, int, bool) protocol.Verdict { return down })
			require.ErrorIs(t, err, retry.ErrPermanent)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		calls := 0
		_, err := cl.Run(ctx, &protocol.Call{Target: "dead", Idempotent: true}, func(context.Context, int, bool) protocol.Verdict {
			calls++
			return protocol.Verdict{}
		})
		assert.ErrorIs(t, err, retry.ErrDependencyDown, "a call to a dead target waits for it, within its deadline")
		assert.Zero(t, calls)
		_, err = cl.Run(context.Background(), &protocol.Call{Target: "alive", Idempotent: true},
			func(context.Context, int, bool) protocol.Verdict { return protocol.Verdict{} })
		assert.NoError(t, err, "another target is not held back")
		states := map[string]string{}
		for _, st := range cl.Dependencies() {
			states[st.Name] = st.State
		}
		assert.Equal(t, map[string]string{"dead": "down", "alive": "up"}, states)
	})
}

func TestCallerRejectionsDoNotTakeATargetDown(t *testing.T) {
	cl := protocol.NewCaller()
	for range 20 {
		_, err := cl.Run(context.Background(), &protocol.Call{Target: "t", Idempotent: true},
			func(context.Context, int, bool) protocol.Verdict { return protocol.Verdict{Err: errCallFailed} })
		require.ErrorIs(t, err, retry.ErrPermanent)
	}
	assert.Equal(t, "up", cl.Dependencies()[0].State)
}

func TestCallerGiveUpIsRecordedForPushback(t *testing.T) {
	cl := protocol.NewCaller(retry.WithClock(newAutoClock()))
	ctx := pushback.NewContext(context.Background())
	assert.Empty(t, pushback.Value(ctx))
	_, err := cl.Run(ctx, &protocol.Call{Idempotent: true}, func(context.Context, int, bool) protocol.Verdict { return transient })
	require.ErrorIs(t, err, retry.ErrAttemptsExhausted)
	assert.Equal(t, "exhausted", pushback.Value(ctx))
	assert.Empty(t, pushback.Value(context.Background()))
}

func TestCallerTraces(t *testing.T) {
	var events []string
	var mu sync.Mutex
	note := func(s string) {
		mu.Lock()
		events = append(events, s)
		mu.Unlock()
	}
	tr := &retry.Trace{
		Start: func(ctx context.Context, _ *http.Request) context.Context { note("start"); return ctx },
		AttemptStart: func(ctx context.Context, n int, hedge bool, _ *http.Request) context.Context {
			note("attempt")
			return ctx
		},
		AttemptEnd: func(_ context.Context, n int, _ *http.Response, err error) {
			if err != nil {
				note("failed")
			} else {
				note("ok")
			}
		},
		End: func(_ context.Context, r retry.Report) { note("end " + r.String()) },
	}
	cl := protocol.NewCaller(retry.WithClock(newAutoClock()), retry.WithTrace(tr))
	_, err := cl.Run(context.Background(), &protocol.Call{Idempotent: true}, func(_ context.Context, n int, _ bool) protocol.Verdict {
		if n == 1 {
			return transient
		}
		return protocol.Verdict{}
	})
	require.NoError(t, err)
	assert.Equal(t, "start attempt failed attempt ok end 2 attempts, succeeded", strings.Join(events, " "))
}

func TestCallerPanicReleasesTheCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := protocol.NewCaller(retry.WithTotalTimeout(time.Minute), retry.WithAttemptTimeout(time.Second))
		var attemptCtx context.Context
		assert.Panics(t, func() {
			cl.Run(context.Background(), &protocol.Call{Idempotent: true}, func(ctx context.Context, _ int, _ bool) protocol.Verdict {
				attemptCtx = ctx
				panic("boom")
			})
		})
		assert.Error(t, attemptCtx.Err(), "the attempt's context and timer end with the panic")
	})
}
