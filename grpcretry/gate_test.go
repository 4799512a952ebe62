package grpcretry_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/grpcretry"
	"github.com/exactlyonce/retry/grpcretry/paymentspb"
)

// inProgress answers as our server does to a repeat of a key whose first
// call still runs (asking for a short wait, to keep the test quick).
func inProgress(ctx context.Context) error {
	grpc.SetTrailer(ctx, metadata.Pairs(grpcretry.PushbackMsTrailer, "1"))
	st, _ := status.New(codes.Aborted, "still running").
		WithDetails(&errdetails.ErrorInfo{Domain: grpcretry.ErrorDomain, Reason: grpcretry.ReasonInProgress})
	return st.Err()
}

// scripted answers each call that reaches the service as script says (nil:
// a reply).
func scripted(script func(n int) func(context.Context) error) *payments {
	p := &payments{}
	n := 0
	p.charge = func(ctx context.Context, req *paymentspb.ChargeRequest) (*paymentspb.ChargeReply, error) {
		n++
		if f := script(n); f != nil {
			return nil, f(ctx)
		}
		return &paymentspb.ChargeReply{Id: "ch"}, nil
	}
	return p
}

func targetState(t *testing.T, c *grpcretry.Client) retry.DependencyStats {
	t.Helper()
	deps := c.Dependencies()
	require.Len(t, deps, 1)
	return deps[0]
}

// A target that answers "in progress" (a keyed call still running) is
// alive: waiting out ten such answers takes nothing down.
func TestInProgressAnswersKeepTheTargetUp(t *testing.T) {
	p := scripted(func(n int) func(context.Context) error {
		if n <= 10 {
			return inProgress
		}
		return nil
	})
	retrying := grpcretry.NewClient(fast)
	client := dial(t, servePayments(t, false, p, &attempts{}), retrying)
	_, err := client.Charge(testCtx(t), &paymentspb.ChargeRequest{})
	require.NoError(t, err)
	assert.EqualValues(t, 11, p.charges.Load())
	st := targetState(t, retrying)
	assert.Equal(t, "up", st.State)
	assert.Zero(t, st.Outages, "ten answers 'in progress' are no outage")
}

// A rejection is an answer: it ends the streak of failures, and a probe
// answered with one ends the outage.
func TestARejectionIsAnAnswer(t *testing.T) {
	unavailableNow := constant(unavailable)
	notFound := constant(status.Error(codes.NotFound, "no such account"))
	t.Run("it ends the streak", func(t *testing.T) {
		p := scripted(func(n int) func(context.Context) error {
			if n == 8 {
				return notFound
			}
			return unavailableNow
		})
		retrying := grpcretry.NewClient(fast, retry.WithMaxAttempts(1))
		client := dial(t, servePayments(t, false, p, &attempts{}), retrying)
		for range 15 {
			_, err := client.Charge(testCtx(t), &paymentspb.ChargeRequest{})
			require.Error(t, err)
		}
		st := targetState(t, retrying)
		assert.Equal(t, "up", st.State, "7 failures, a rejection, 7 failures: never 8 in a row")
		assert.Zero(t, st.Outages)
	})
	t.Run("a probe answered with one ends the outage", func(t *testing.T) {
		p := scripted(func(n int) func(context.Context) error {
			if n <= 8 {
				return unavailableNow
			}
			return notFound
		})
		retrying := grpcretry.NewClient(fast, retry.WithMaxAttempts(1))
		client := dial(t, servePayments(t, false, p, &attempts{}), retrying)
		for range 8 {
			_, err := client.Charge(testCtx(t), &paymentspb.ChargeRequest{})
			require.Error(t, err)
		}
		require.Equal(t, "down", targetState(t, retrying).State)
		ctx, cancel := context.WithTimeout(testCtx(t), 10*time.Second)
		defer cancel()
		_, err := client.Charge(ctx, &paymentspb.ChargeRequest{})
		assert.Equal(t, codes.NotFound, status.Code(err), "the probe went, and was answered")
		st := targetState(t, retrying)
		assert.Equal(t, uint64(1), st.Probes)
		assert.Equal(t, "up", st.State)
	})
}
