package grpcretry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/grpcretry"
	"github.com/exactlyonce/retry/grpcretry/paymentspb"
	"github.com/exactlyonce/retry/idempotency"
)

var (
	exhausted = status.Error(codes.ResourceExhausted, "quota, no pushback")
	internal  = status.Error(codes.Internal, "a proxy's hiccup")
)

// A code the caller lists is retried, per call; the default stays
// UNAVAILABLE alone (RESOURCE_EXHAUSTED without a pushback is final).
func TestRetryableCodesPerCall(t *testing.T) {
	a := &attempts{script: failFirst(2, exhausted)}
	client := dial(t, servePayments(t, true, &payments{}, a), grpcretry.NewClient(fast))
	_, err := client.GetCharge(testCtx(t), &paymentspb.GetChargeRequest{})
	assert.Equal(t, codes.ResourceExhausted, status.Code(err), "not listed: final")
	assert.ErrorIs(t, err, retry.ErrPermanent)
	assert.Equal(t, 1, a.Count())

	_, err = client.GetCharge(testCtx(t), &paymentspb.GetChargeRequest{},
		grpcretry.RetryableCodes(codes.Unavailable, codes.ResourceExhausted))
	require.NoError(t, err)
	assert.Equal(t, 3, a.Count(), "listed: retried")
}

// grpc.WithDefaultCallOptions gives every call of a connection its codes;
// a call's own come after them and decide.
func TestRetryableCodesPerConnectionAndTheCallsOwnDecide(t *testing.T) {
	a := &attempts{script: failFirst(1_000_000, internal)}
	client := dial(t, servePayments(t, true, &payments{}, a), grpcretry.NewClient(fast),
		grpc.WithDefaultCallOptions(grpcretry.RetryableCodes(codes.Internal)))
	_, err := client.GetCharge(testCtx(t), &paymentspb.GetChargeRequest{})
	assert.ErrorIs(t, err, retry.ErrAttemptsExhausted)
	assert.Equal(t, codes.Internal, status.Code(err))
	assert.Equal(t, 4, a.Count(), "the connection's list: INTERNAL retried")

	_, err = client.GetCharge(testCtx(t), &paymentspb.GetChargeRequest{}, grpcretry.RetryableCodes(codes.Unavailable))
	assert.ErrorIs(t, err, retry.ErrPermanent)
	assert.Equal(t, 5, a.Count(), "the call's own list: INTERNAL final")
}

// The list replaces UNAVAILABLE; an attempt's DEADLINE_EXCEEDED is still
// retried, and an empty list retries no code but it.
func TestRetryableCodesReplaceTheDefault(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fail     error
		list     []codes.Code
		attempts int
	}{
		{"UNAVAILABLE, not listed", unavailable, []codes.Code{codes.ResourceExhausted}, 1},
		{"UNAVAILABLE, empty list", unavailable, nil, 1},
		{"DEADLINE_EXCEEDED, not listed", status.Error(codes.DeadlineExceeded, "slow downstream"), nil, 4},
		{"NOT_FOUND, listed", status.Error(codes.NotFound, "not yet replicated"), []codes.Code{codes.NotFound}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &attempts{script: failFirst(1_000_000, tc.fail)}
			client := dial(t, servePayments(t, true, &payments{}, a), grpcretry.NewClient(fast))
			_, err := client.GetCharge(testCtx(t), &paymentspb.GetChargeRequest{}, grpcretry.RetryableCodes(tc.list...))
			assert.Equal(t, status.Code(tc.fail), status.Code(err))
			assert.Equal(t, tc.attempts, a.Count())
		})
	}
}

// A listed code is retried as UNAVAILABLE is: a call neither declared
// idempotent nor keyed is not repeated; a keyed one is, with its key; an
// IDEMPOTENT method is, as it is.
func TestAListedCodeKeepsTheIdempotencyRules(t *testing.T) {
	retryInternal := grpcretry.RetryableCodes(codes.Unavailable, codes.Internal)
	t.Run("neither idempotent nor keyed", func(t *testing.T) {
		a := &attempts{script: failFirst(1, internal)}
		client := dial(t, servePayments(t, true, &payments{}, a), grpcretry.NewClient(fast, retry.WithoutKeys()))
		_, err := client.Charge(testCtx(t), &paymentspb.ChargeRequest{}, retryInternal)
		assert.ErrorIs(t, err, retry.ErrNotIdempotent)
		assert.Equal(t, codes.Internal, status.Code(err))
		assert.Equal(t, 1, a.Count())
	})
	t.Run("keyed", func(t *testing.T) {
		a := &attempts{script: failFirst(2, internal)}
		client := dial(t, servePayments(t, true, &payments{}, a), grpcretry.NewClient(fast))
		_, err := client.Charge(testCtx(t), &paymentspb.ChargeRequest{}, retryInternal)
		require.NoError(t, err)
		keys := a.Keys()
		require.Len(t, keys, 3)
		assert.NotEmpty(t, keys[0])
		assert.Equal(t, []string{keys[0], keys[0], keys[0]}, keys, "one key on every attempt")
	})
	t.Run("declared IDEMPOTENT", func(t *testing.T) {
		a := &attempts{script: failFirst(2, internal)}
		client := dial(t, servePayments(t, true, &payments{}, a), grpcretry.NewClient(fast, retry.WithoutKeys()))
		_, err := client.SetLimit(testCtx(t), &paymentspb.SetLimitRequest{}, retryInternal)
		require.NoError(t, err)
		assert.Equal(t, []string{"", "", ""}, a.Keys())
	})
}

// Against our server a listed code stored as the call's outcome is final
// at the replay: the handler runs once, and the retry gets its answer.
func TestAListedCodeStopsAtTheReplayedOutcome(t *testing.T) {
	p := &payments{}
	p.charge = func(ctx context.Context, _ *paymentspb.ChargeRequest) (*paymentspb.ChargeReply, error) {
		idempotency.MarkStarted(ctx)
		return nil, internal
	}
	dedup := grpcretry.NewServerInterceptor(newEnv().runner, grpcretry.SingleTenant)
	a := &attempts{}
	client := dial(t, servePayments(t, true, p, a, dedup.Unary), grpcretry.NewClient(fast))
	var trailer metadata.MD
	_, err := client.Charge(testCtx(t), &paymentspb.ChargeRequest{}, grpc.Trailer(&trailer),
		grpcretry.RetryableCodes(codes.Unavailable, codes.Internal))
	assert.Equal(t, codes.Internal, status.Code(err))
	assert.ErrorIs(t, err, retry.ErrPermanent)
	assert.Equal(t, 2, a.Count(), "one retry, answered from the store")
	assert.Equal(t, []string{"true"}, trailer.Get(grpcretry.ReplayedTrailer))
	assert.EqualValues(t, 1, p.charges.Load())
}

// A server stream retries the listed codes before its first reply.
func TestRetryableCodesOfAServerStream(t *testing.T) {
	a := &attempts{script: failFirst(2, exhausted)}
	client := dial(t, servePayments(t, true, &payments{}, a), grpcretry.NewClient(fast))
	stream, err := client.ListCharges(testCtx(t), &paymentspb.ListChargesRequest{Count: 1},
		grpcretry.RetryableCodes(codes.ResourceExhausted))
	require.NoError(t, err)
	reply, err := stream.Recv()
	require.NoError(t, err)
	assert.Equal(t, "ch_1", reply.Id)
	_, err = stream.Recv()
	assert.ErrorIs(t, err, io.EOF)
	assert.Equal(t, 3, a.Count())
}

// OK, CANCELED and codes gRPC does not define are never retried: a call
// given one is not made, and says why, unary or stream, and its
// grpc.OnFinish callbacks are told.
func TestRetryableCodesRefusesCodesNeverRetried(t *testing.T) {
	for _, code := range []codes.Code{codes.OK, codes.Canceled, codes.Code(17)} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			a := &attempts{}
			client := dial(t, servePayments(t, true, &payments{}, a), grpcretry.NewClient(fast))
			list := grpcretry.RetryableCodes(codes.Unavailable, code)
			var finished []error
			onFinish := grpc.OnFinish(func(err error) { finished = append(finished, err) })

			_, err := client.GetCharge(testCtx(t), &paymentspb.GetChargeRequest{}, list, onFinish)
			var cerr *grpcretry.CodeError
			require.ErrorAs(t, err, &cerr)
			assert.Equal(t, code, cerr.Code)
			assert.Equal(t, codes.InvalidArgument, status.Code(err))
			assert.Contains(t, err.Error(), "never retried")

			_, err = client.ListCharges(testCtx(t), &paymentspb.ListChargesRequest{Count: 1}, list, onFinish)
			assert.ErrorAs(t, err, &cerr)
			_, err = client.Upload(testCtx(t), list, onFinish)
			assert.ErrorAs(t, err, &cerr, "a client stream, never retried, is refused too")

			assert.Zero(t, a.Count(), "no call was made")
			require.Len(t, finished, 3)
			for _, e := range finished {
				assert.True(t, errors.As(e, &cerr))
			}
		})
	}
}

// The rules not about the list hold whatever it says: RESOURCE_EXHAUSTED
// with a pushback is retried unlisted, and ABORTED, listed, is retried for
// a call that is not keyed (a NO_SIDE_EFFECTS method).
func TestRetryableCodesKeepTheRulesNotAboutTheList(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail func(context.Context) error
		list []codes.Code
	}{
		{"RESOURCE_EXHAUSTED with a pushback, empty list",
			withTrailer(exhausted, metadata.Pairs(grpcretry.PushbackMsTrailer, "1")), nil},
		{"ABORTED listed, not keyed", constant(status.Error(codes.Aborted, "conflict")), []codes.Code{codes.Aborted}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &payments{}
			fail := func(ctx context.Context, _ *paymentspb.ChargeRequest) (*paymentspb.ChargeReply, error) {
				return nil, tc.fail(ctx)
			}
			a := &attempts{}
			srv := serve(t, true, func(s *grpc.Server) { paymentspb.RegisterPaymentsServer(s, &failing{p, fail}) },
				grpc.ChainUnaryInterceptor(a.unary))
			client := dial(t, srv, grpcretry.NewClient(fast))
			_, err := client.GetCharge(testCtx(t), &paymentspb.GetChargeRequest{}, grpcretry.RetryableCodes(tc.list...))
			assert.ErrorIs(t, err, retry.ErrAttemptsExhausted)
			assert.Equal(t, 4, a.Count())
			assert.Equal(t, []string{"", "", "", ""}, a.Keys(), "not keyed")
		})
	}
}
