package grpcretry_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/grpcretry"
	"github.com/exactlyonce/retry/grpcretry/paymentspb"
)

// Nothing of a hedged call runs after Unary returned: the losing copy,
// cancelled, has ended (everything below our interceptor included, here
// one that reads the request after its call, as a logging interceptor
// does), and the caller may change its request at once. (Under -race this
// test fails if the losing copy still reads it.)
func TestHedgedLoserEndsBeforeTheCallReturns(t *testing.T) {
	p := &payments{}
	var arrivals atomic.Int64
	p.charge = func(ctx context.Context, req *paymentspb.ChargeRequest) (*paymentspb.ChargeReply, error) {
		if req.Account == "warm-up" {
			return &paymentspb.ChargeReply{}, nil
		}
		if arrivals.Add(1) == 1 {
			<-ctx.Done() // the slow copy: it ends when the client cancels it
			return nil, ctx.Err()
		}
		return &paymentspb.ChargeReply{Id: "fast"}, nil
	}
	var returned atomic.Bool
	var running, ranAfter atomic.Int64
	loserDone := make(chan struct{})
	below := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
		invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		running.Add(1)
		defer running.Add(-1)
		err := invoker(ctx, method, req, reply, cc, opts...)
		if err != nil { // the loser
			defer close(loserDone)
			for range 100 {
				_, _ = proto.Marshal(req.(proto.Message))
			}
			if returned.Load() {
				ranAfter.Add(1)
			}
		}
		return err
	}
	retrying := grpcretry.NewClient(fast, retry.WithHedging(retry.Hedging{MinDelay: 20 * time.Millisecond}))
	client := dial(t, servePayments(t, false, p, &attempts{}), nil, grpc.WithChainUnaryInterceptor(retrying.Unary, below))
	// A keyed call is hedged once its target has shown it honours keys.
	_, err := client.Charge(testCtx(t), &paymentspb.ChargeRequest{Account: "warm-up"})
	require.NoError(t, err)
	req := &paymentspb.ChargeRequest{Account: "acct", AmountCents: 1}
	reply, err := client.Charge(testCtx(t), req)
	returned.Store(true)
	require.NoError(t, err)
	assert.Equal(t, "fast", reply.Id)
	assert.Zero(t, running.Load(), "every copy ended before the call returned")
	for i := range 200 { // the caller reuses its request
		req.Account = "acct-" + strconv.Itoa(i)
		req.AmountCents = int64(i)
	}
	<-loserDone
	assert.Zero(t, ranAfter.Load(), "the losing copy ran after the call returned")
}
