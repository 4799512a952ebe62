package grpcretry_test

import (
	"context"
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
)

// middle is a service whose GetCharge calls the next service down.
type middle struct {
	paymentspb.UnimplementedPaymentsServer
	next paymentspb.PaymentsClient
}

func (m *middle) GetCharge(ctx context.Context, req *paymentspb.GetChargeRequest) (*paymentspb.ChargeReply, error) {
	reply, err := m.next.GetCharge(ctx, req)
	if err != nil {
		return nil, status.Error(codes.Unavailable, "the next service failed")
	}
	return reply, nil
}

// Three services in a chain in front of a dead one, each retrying with the
// same four-attempt policy: with the pushback interceptor, only the
// innermost retries, 4 attempts per call at the top instead of 4 x 4 x 4.
func TestPushbackKeepsRetriesAtOneLayer(t *testing.T) {
	dead := &attempts{script: failFirst(1_000_000, unavailable)}
	next := servePayments(t, false, &payments{}, dead)
	for range 2 {
		m := &middle{next: dial(t, next, grpcretry.NewClient(fast, retry.WithoutRideThrough()))}
		next = serve(t, false, func(s *grpc.Server) { paymentspb.RegisterPaymentsServer(s, m) },
			grpc.ChainUnaryInterceptor(grpcretry.PushbackUnary))
	}
	top := dial(t, next, grpcretry.NewClient(fast, retry.WithoutRideThrough()))
	var trailer metadata.MD
	var report retry.Report
	_, err := top.GetCharge(testCtx(t), &paymentspb.GetChargeRequest{}, grpc.Trailer(&trailer), grpcretry.CallPolicy(retry.WithReport(&report)))
	assert.Equal(t, codes.Unavailable, status.Code(err))
	assert.ErrorIs(t, err, retry.ErrPushback)
	assert.Equal(t, []string{"pushback"}, trailer.Get(grpcretry.PushbackTrailer), "the middle layer passes its own pushback on")
	assert.Equal(t, []string{"-1"}, trailer.Get(grpcretry.PushbackMsTrailer))
	assert.Equal(t, 1, report.Attempts)
	assert.Equal(t, 4, dead.Count(), "only the innermost layer retried")
}

// grpc-go's own retry honours the pushback too: a negative
// grpc-retry-pushback-ms stops it.
func TestPushbackStopsGrpcGosBuiltInRetry(t *testing.T) {
	dead := &attempts{script: failFirst(1_000_000, unavailable)}
	m := &middle{next: dial(t, servePayments(t, false, &payments{}, dead), grpcretry.NewClient(fast, retry.WithoutRideThrough()))}
	front := serve(t, false, func(s *grpc.Server) { paymentspb.RegisterPaymentsServer(s, m) }, grpc.ChainUnaryInterceptor(grpcretry.PushbackUnary))
	builtIn := dial(t, front, nil, grpc.WithDefaultServiceConfig(`{"methodConfig":[{"name":[{"service":"exactlyonce.grpcretry.payments.Payments"}],
		"retryPolicy":{"maxAttempts":4,"initialBackoff":"0.001s","maxBackoff":"0.002s","backoffMultiplier":2,"retryableStatusCodes":["UNAVAILABLE"]}}]}`))
	_, err := builtIn.GetCharge(testCtx(t), &paymentspb.GetChargeRequest{})
	require.Error(t, err)
	assert.Equal(t, 4, dead.Count(), "one call of the front service: grpc-go did not retry it")
}

// A rejection is not the dependency's failure: no pushback.
func TestNoPushbackOnARejection(t *testing.T) {
	dead := &attempts{script: failFirst(1_000_000, unavailable)}
	bottom := dial(t, servePayments(t, false, &payments{}, dead), grpcretry.NewClient(fast, retry.WithoutRideThrough()))
	rejecting := &rejecter{next: bottom}
	front := serve(t, false, func(s *grpc.Server) { paymentspb.RegisterPaymentsServer(s, rejecting) }, grpc.ChainUnaryInterceptor(grpcretry.PushbackUnary))
	var trailer metadata.MD
	_, err := dial(t, front, nil).GetCharge(testCtx(t), &paymentspb.GetChargeRequest{}, grpc.Trailer(&trailer))
	assert.Equal(t, codes.InvalidArgument, status.Code(err))
	assert.Empty(t, trailer.Get(grpcretry.PushbackTrailer))
}

type rejecter struct {
	paymentspb.UnimplementedPaymentsServer
	next paymentspb.PaymentsClient
}

func (r *rejecter) GetCharge(ctx context.Context, req *paymentspb.GetChargeRequest) (*paymentspb.ChargeReply, error) {
	r.next.GetCharge(ctx, req)
	return nil, status.Error(codes.InvalidArgument, "no such charge")
}
