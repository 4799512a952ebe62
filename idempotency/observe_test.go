package idempotency_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/idempotency"
)

// The Observer hears one outcome per call of Do, with the call's caller,
// key and attempt.
func TestObserverHearsEachOutcome(t *testing.T) {
	mock := clock.NewMock()
	var heard []idempotency.Observation
	runner := idempotency.NewRunner(idempotency.NewMemoryStore(mock), idempotency.WithClock(mock),
		idempotency.WithLease(testLease),
		idempotency.WithObserver(func(ctx context.Context, o idempotency.Observation) { heard = append(heard, o) }))
	ctx := context.Background()
	req := idempotency.Request{Caller: "c", Key: "k", Fingerprint: "v1:a"}
	done := func(context.Context, *idempotency.Execution) ([]byte, error) { return []byte("ok"), nil }
	boom := errors.New("boom")

	_, _ = runner.Do(ctx, idempotency.Request{Caller: "c", Key: "r"}, func(context.Context, *idempotency.Execution) ([]byte, error) {
		return nil, idempotency.Reject(boom)
	})
	// A crashed first execution (a step began, then the work failed) is
	// taken over by the next call, which a repeat with another payload
	// cannot enter.
	_, _ = runner.Do(ctx, req, func(ctx context.Context, e *idempotency.Execution) ([]byte, error) {
		_, _ = e.Step(ctx, "charge", func(context.Context, string) ([]byte, error) { return nil, nil })
		_, err := runner.Do(ctx, req, done) // in progress
		require.Error(t, err)
		return nil, boom
	})
	mock.Add(time.Second) // the abandoned lease has run out
	_, _ = runner.Do(ctx, req, done)
	_, _ = runner.Do(ctx, req, done)
	_, _ = runner.Do(ctx, idempotency.Request{Caller: "c", Key: "k", Fingerprint: "v1:b"}, done)

	var got []idempotency.Outcome
	for _, o := range heard {
		got = append(got, o.Outcome)
	}
	assert.Equal(t, []idempotency.Outcome{
		idempotency.OutcomeRejected, idempotency.OutcomeInProgress, idempotency.OutcomeExecuted,
		idempotency.OutcomeTakenOver, idempotency.OutcomeReplayed, idempotency.OutcomeMismatch,
	}, got)
	assert.ErrorIs(t, heard[0].Err, boom)
	assert.ErrorIs(t, heard[2].Err, boom, "the failed execution says why")
	assert.NoError(t, heard[3].Err)
	assert.Equal(t, int64(2), heard[3].Attempt, "the takeover is the record's second attempt")
	for _, o := range heard[1:] {
		assert.Equal(t, "c", o.Caller)
		assert.Equal(t, "k", o.Key)
	}
}
