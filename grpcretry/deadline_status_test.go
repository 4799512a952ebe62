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
	"google.golang.org/protobuf/proto"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/grpcretry"
	"github.com/exactlyonce/retry/grpcretry/paymentspb"
)

// A server that asks for a longer wait than the call's deadline leaves:
// the call ends at once, with the server's status and details unchanged,
// and the reason beside it.
func TestPushbackPastTheDeadlineKeepsTheServersStatus(t *testing.T) {
	info := &errdetails.ErrorInfo{Domain: "example.com", Reason: "MAINTENANCE"}
	st, err := status.New(codes.Unavailable, "back in five seconds").WithDetails(info)
	require.NoError(t, err)
	p := &payments{}
	fail := func(ctx context.Context, _ *paymentspb.ChargeRequest) (*paymentspb.ChargeReply, error) {
		grpc.SetTrailer(ctx, metadata.Pairs(grpcretry.PushbackMsTrailer, "5000"))
		return nil, st.Err()
	}
	srv := serve(t, false, func(s *grpc.Server) { paymentspb.RegisterPaymentsServer(s, &failing{p, fail}) })
	client := dial(t, srv, grpcretry.NewClient(fast))
	ctx, cancel := context.WithTimeout(testCtx(t), 2*time.Second)
	defer cancel()
	_, err = client.GetCharge(ctx, &paymentspb.GetChargeRequest{})

	got := status.Convert(err)
	assert.Equal(t, codes.Unavailable, got.Code())
	assert.Equal(t, "back in five seconds", got.Message())
	require.Len(t, got.Details(), 1)
	assert.True(t, proto.Equal(info, got.Details()[0].(proto.Message)), "the server's details, unchanged")
	assert.ErrorIs(t, err, retry.ErrDeadline, "why it ended: the wait would end past the deadline")
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	var rerr *retry.Error
	require.ErrorAs(t, err, &rerr)
	assert.Equal(t, 1, rerr.Attempts)
	assert.NoError(t, ctx.Err(), "handed back before the deadline")
}
