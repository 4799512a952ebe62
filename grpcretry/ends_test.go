package grpcretry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/backoff"
	"github.com/exactlyonce/retry/grpcretry"
	"github.com/exactlyonce/retry/grpcretry/paymentspb"
)

// takeDown fails eight calls of client in a row, one attempt each and at
// least 15 ms apart: its Client takes the target as down, and probes it
// first 100 ms later (failures that came faster would be probed sooner:
// see retry.RideThrough).
func takeDown(t *testing.T, client paymentspb.PaymentsClient, retrying *grpcretry.Client) {
	t.Helper()
	for range 8 {
		time.Sleep(15 * time.Millisecond)
		_, err := client.GetCharge(testCtx(t), &paymentspb.GetChargeRequest{}, grpcretry.CallPolicy(retry.WithMaxAttempts(1)))
		require.Error(t, err)
	}
	require.Equal(t, "down", targetState(t, retrying).State)
}

// A call without a deadline waits for a target that is down up to MaxWait,
// then ends with UNAVAILABLE and retry.ErrDependencyDown, not at its
// context's end.
func TestACallWithoutADeadlineWaitsUpToMaxWait(t *testing.T) {
	dead := &attempts{script: failFirst(1_000_000, unavailable)}
	retrying := grpcretry.NewClient(fast)
	client := dial(t, servePayments(t, true, &payments{}, dead), retrying)
	takeDown(t, client, retrying)

	ctx, cancel := context.WithCancel(context.Background()) // no deadline
	defer cancel()
	_, err := client.GetCharge(ctx, &paymentspb.GetChargeRequest{},
		grpcretry.CallPolicy(retry.WithRideThrough(retry.RideThrough{MaxWait: time.Second})))
	assert.ErrorIs(t, err, retry.ErrDependencyDown)
	assert.Equal(t, codes.Unavailable, status.Code(err))
	assert.NotErrorIs(t, err, context.DeadlineExceeded)
	assert.NoError(t, ctx.Err())
	st := targetState(t, retrying)
	assert.Equal(t, uint64(1), st.Waited, "it waited")
	assert.Equal(t, uint64(1), st.Expired, "MaxWait ended its wait")
}

// A call cancelled while it waits for a target that is down ends with
// CANCELED.
func TestACallCancelledAtTheGateIsCanceled(t *testing.T) {
	mock := clock.NewMock() // frozen: no probe is ever due, no wait ends
	dead := &attempts{script: failFirst(1_000_000, unavailable)}
	retrying := grpcretry.NewClient(fast, retry.WithClock(mock))
	client := dial(t, servePayments(t, true, &payments{}, dead), retrying)
	takeDown(t, client, retrying)

	ctx, cancel := context.WithCancel(testCtx(t))
	errc := make(chan error, 1)
	go func() {
		_, err := client.GetCharge(ctx, &paymentspb.GetChargeRequest{})
		errc <- err
	}()
	require.Eventually(t, func() bool { return targetState(t, retrying).Waiting == 1 }, 10*time.Second, time.Millisecond)
	cancel()
	err := <-errc
	assert.Equal(t, codes.Canceled, status.Code(err))
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorIs(t, err, retry.ErrCancelled)
	assert.Equal(t, uint64(1), targetState(t, retrying).Abandoned)
}

// A call cancelled in its backoff ends with CANCELED too, its last
// attempt's status in its *retry.Error.
func TestACallCancelledInItsBackoffIsCanceled(t *testing.T) {
	a := &attempts{script: failFirst(1_000_000, unavailable)}
	ctx, cancel := context.WithCancel(context.Background()) // no deadline: the hour's wait begins
	defer cancel()
	waits := retry.WithTrace(&retry.Trace{Decided: func(_ context.Context, at retry.Attempt) {
		if at.Retrying {
			cancel()
		}
	}})
	client := dial(t, servePayments(t, true, &payments{}, a), grpcretry.NewClient(retry.WithBackoff(backoff.Constant(time.Hour)), waits))
	_, err := client.GetCharge(ctx, &paymentspb.GetChargeRequest{})
	assert.Equal(t, codes.Canceled, status.Code(err))
	assert.ErrorIs(t, err, context.Canceled)
	var rerr *retry.Error
	require.ErrorAs(t, err, &rerr)
	assert.Equal(t, codes.Unavailable, status.Code(rerr.Last))
	assert.Equal(t, 1, a.Count())
}

// With riding through off, a retry the budget denies ends the call with
// the last attempt's status and retry.ErrBudgetDenied.
func TestABudgetDeniedCallKeepsTheLastStatus(t *testing.T) {
	a := &attempts{script: failFirst(1_000_000, unavailable)}
	retrying := grpcretry.NewClient(fast, retry.WithBudget(retry.NewBudget(0.1, 0, 1)), retry.WithoutRideThrough())
	client := dial(t, servePayments(t, true, &payments{}, a), retrying)
	var err error
	for range 3 {
		if _, err = client.GetCharge(testCtx(t), &paymentspb.GetChargeRequest{}); errors.Is(err, retry.ErrBudgetDenied) {
			break
		}
	}
	assert.ErrorIs(t, err, retry.ErrBudgetDenied)
	assert.Equal(t, codes.Unavailable, status.Code(err))
}

// The default backoff doubles from 100 ms: the waits before retries 1, 2
// and 3 are below 100, 200 and 400 ms.
func TestTheDefaultBackoffDoubles(t *testing.T) {
	a := &attempts{script: failFirst(1_000_000, unavailable)}
	var delays []time.Duration
	trace := retry.WithTrace(&retry.Trace{Decided: func(_ context.Context, at retry.Attempt) {
		if at.Retrying {
			delays = append(delays, at.Delay)
		}
	}})
	client := dial(t, servePayments(t, true, &payments{}, a), grpcretry.NewClient(trace))
	_, err := client.GetCharge(testCtx(t), &paymentspb.GetChargeRequest{})
	assert.ErrorIs(t, err, retry.ErrAttemptsExhausted)
	require.Len(t, delays, 3)
	for i, d := range delays {
		assert.Less(t, d, (100*time.Millisecond)<<i, "retry %d", i+1) // the default full jitter from 100 ms
		assert.GreaterOrEqual(t, d, time.Duration(0))
	}
}
