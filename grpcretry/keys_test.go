package grpcretry_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/grpcretry"
	"github.com/exactlyonce/retry/grpcretry/paymentspb"
)

// A keyed call whose attempt reached a server that ignores keys (its
// answers never echo the key) is not repeated after a failure that may
// have followed its effect: a server that ignores the key would act
// again. Until this, the client trusted every key, and charged twice.
func TestAServerThatIgnoresKeysGetsNoDuplicate(t *testing.T) {
	a := &attempts{script: failFirst(1, unavailable), ignoresKeys: true}
	p := &payments{}
	client := dial(t, servePayments(t, false, p, a), grpcretry.NewClient(fast))
	var report retry.Report
	_, err := client.Charge(testCtx(t), &paymentspb.ChargeRequest{Account: "acct", AmountCents: 500},
		grpcretry.CallPolicy(retry.WithReport(&report)))
	require.Error(t, err)
	assert.Equal(t, codes.Unavailable, status.Code(err), "the server's own status")
	assert.ErrorIs(t, err, retry.ErrNotIdempotent)
	assert.Equal(t, 1, a.Count(), "repeated to a server that ignores keys")
	assert.Equal(t, 1, report.Attempts)
}

// A target shows it honours keys by echoing the key in the trailer (the
// ServerInterceptor's answers all do): from then on, a keyed call that may
// have reached it is repeated, with the same key.
func TestATargetThatEchoesKeysIsTrusted(t *testing.T) {
	fails := true
	a := &attempts{script: func(int, string) error {
		if fails {
			fails = false
			return unavailable
		}
		return nil
	}}
	p := &payments{}
	client := dial(t, servePayments(t, false, p, a), grpcretry.NewClient(fast))
	_, err := client.Charge(testCtx(t), &paymentspb.ChargeRequest{Account: "acct", AmountCents: 500})
	require.NoError(t, err, "the first answer's echo is the evidence")
	assert.Equal(t, 2, a.Count())
	assert.EqualValues(t, 1, p.charges.Load())
}

// A keyed call whose connection cannot be made never left: it is retried
// (riding the target's outage through) before the target showed anything.
func TestAKeyedCallThatNeverLeftIsRetried(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close()) // nothing listens there now
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(grpcretry.NewClient(fast).Unary))
	require.NoError(t, err)
	t.Cleanup(func() { cc.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var report retry.Report
	_, err = paymentspb.NewPaymentsClient(cc).Charge(ctx, &paymentspb.ChargeRequest{Account: "acct", AmountCents: 500},
		grpcretry.CallPolicy(retry.WithReport(&report)))
	require.Error(t, err)
	assert.NotErrorIs(t, err, retry.ErrNotIdempotent)
	assert.Greater(t, report.Attempts, 1, "a call that never left was not retried")
}

// A keyed call is not hedged (sent twice at once) to a target that has not
// shown it honours keys: a server that ignores them would act twice.
func TestAKeyedCallIsNotHedgedBeforeEvidence(t *testing.T) {
	p := &payments{}
	release := make(chan struct{})
	p.charge = func(ctx context.Context, req *paymentspb.ChargeRequest) (*paymentspb.ChargeReply, error) {
		select { // slow enough to be hedged
		case <-ctx.Done():
		case <-release:
		case <-time.After(100 * time.Millisecond):
		}
		return &paymentspb.ChargeReply{Id: "slow"}, nil
	}
	defer close(release)
	a := &attempts{ignoresKeys: true}
	client := dial(t, servePayments(t, false, p, a),
		grpcretry.NewClient(fast, retry.WithHedging(retry.Hedging{MinDelay: 10 * time.Millisecond})))
	for range 3 {
		_, err := client.Charge(testCtx(t), &paymentspb.ChargeRequest{Account: "acct", AmountCents: 1})
		require.NoError(t, err)
	}
	assert.Equal(t, 3, a.Count(), "a keyed call went twice to a server that ignores keys")
}
