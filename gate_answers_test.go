package retry_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/backoff"
	"github.com/exactlyonce/retry/protocol"
)

// gateOf returns what the Caller knows of target.
func gateOf(t *testing.T, cl *protocol.Caller, target string) retry.DependencyStats {
	t.Helper()
	for _, st := range cl.Dependencies() {
		if st.Name == target {
			return st
		}
	}
	t.Fatalf("no gate for %q", target)
	return retry.DependencyStats{}
}

// runOnce runs one call to target whose attempts all end with v.
func runOnce(ctx context.Context, cl *protocol.Caller, target string, v protocol.Verdict) error {
	_, err := cl.Run(ctx, &protocol.Call{Target: target, Key: "k"}, func(context.Context, int, bool) protocol.Verdict { return v })
	return err
}

var (
	failingVerdict  = protocol.Verdict{Err: errCallFailed, Retry: true, Failing: true}
	rejectedVerdict = protocol.Verdict{Err: errCallFailed, Answered: true}
)

// A target that answers is alive, whatever it answers: an earlier copy
// still running (Pending), however many times in a row, never takes it
// down.
func TestCallerPendingAnswersKeepATargetUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := protocol.NewCaller(retry.WithBackoff(backoff.Constant(time.Millisecond)))
		answers := 0
		_, err := cl.Run(context.Background(), &protocol.Call{Target: "t", Key: "k"}, func(context.Context, int, bool) protocol.Verdict {
			if answers++; answers <= 20 {
				return protocol.Verdict{Err: errCallFailed, Retry: true, Pending: true, Answered: true}
			}
			return protocol.Verdict{}
		})
		require.NoError(t, err)
		assert.Equal(t, 21, answers)
		st := gateOf(t, cl, "t")
		assert.Equal(t, "up", st.State)
		assert.Zero(t, st.Outages, "twenty answers 'still running' are no outage")
	})
}

// An answered rejection ends the streak of failures.
func TestCallerRejectionEndsTheFailureStreak(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := protocol.NewCaller(retry.WithMaxAttempts(1))
		for range 7 {
			require.Error(t, runOnce(context.Background(), cl, "t", failingVerdict))
		}
		require.ErrorIs(t, runOnce(context.Background(), cl, "t", rejectedVerdict), retry.ErrPermanent)
		for range 7 {
			require.Error(t, runOnce(context.Background(), cl, "t", failingVerdict))
		}
		st := gateOf(t, cl, "t")
		assert.Equal(t, "up", st.State, "7 failures, an answer, 7 failures: never 8 in a row")
		assert.Zero(t, st.Outages)
	})
}

// A probe answered with a rejection ends the outage: the target answers.
func TestCallerProbeAnsweredWithARejectionEndsTheOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := protocol.NewCaller(retry.WithMaxAttempts(1))
		for range 8 {
			require.Error(t, runOnce(context.Background(), cl, "t", failingVerdict))
		}
		require.Equal(t, "down", gateOf(t, cl, "t").State)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.ErrorIs(t, runOnce(ctx, cl, "t", rejectedVerdict), retry.ErrPermanent, "the probe went and was answered")
		st := gateOf(t, cl, "t")
		assert.Equal(t, uint64(1), st.Probes)
		assert.Equal(t, "up", st.State)
		require.NoError(t, runOnce(context.Background(), cl, "t", protocol.Verdict{}), "the next call goes at once")
	})
}

// An attempt that got no answer (neither Answered nor Failing: cancelled
// on the caller's side) tells the gate nothing: as a probe, it leaves the
// target down.
func TestCallerUnansweredProbeLeavesTheTargetDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := protocol.NewCaller(retry.WithMaxAttempts(1))
		for range 8 {
			require.Error(t, runOnce(context.Background(), cl, "t", failingVerdict))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.Error(t, runOnce(ctx, cl, "t", protocol.Verdict{Err: context.Canceled}))
		assert.Equal(t, "down", gateOf(t, cl, "t").State)
	})
}
