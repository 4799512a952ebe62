package grpcretry_test

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
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

// firstFailsUnseen is a server interceptor for two concurrent keyed calls:
// the first to arrive fails as a proxy in front of the server would
// (UNAVAILABLE, no echo of its key) once the second has arrived; the
// second is answered after that failure, echoing its key when echo is set.
// Later calls are answered at once, with the echo when echo is set.
func firstFailsUnseen(echo bool) grpc.UnaryServerInterceptor {
	var n atomic.Int64
	second, firstFailed := make(chan struct{}), make(chan struct{})
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		switch n.Add(1) {
		case 1:
			<-second
			defer close(firstFailed)
			return nil, unavailable
		case 2:
			close(second)
			<-firstFailed
		}
		if echo {
			for _, k := range metadata.ValueFromIncomingContext(ctx, grpcretry.KeyMetadata) {
				_ = grpc.SetTrailer(ctx, metadata.Pairs(grpcretry.KeyMetadata, k))
			}
		}
		return h(ctx, req)
	}
}

// chargeTwice makes two keyed calls at once and returns their errors.
func chargeTwice(t *testing.T, client paymentspb.PaymentsClient) []error {
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = client.Charge(testCtx(t), &paymentspb.ChargeRequest{Account: "acct", AmountCents: int64(i + 1)})
		})
	}
	wg.Wait()
	return errs
}

// A keyed call that failed in a way that may have reached a target not
// known yet waits for the other keyed calls out to it: when one's answer
// echoes its key, the target honours keys, and the call is retried (as the
// HTTP Transport does) rather than failed.
func TestAKeyedCallWaitsForTheEvidenceOfTheCallsOut(t *testing.T) {
	a := &attempts{ignoresKeys: true}
	p := &payments{}
	client := dial(t, servePayments(t, false, p, a, firstFailsUnseen(true)), grpcretry.NewClient(fast))
	for i, err := range chargeTwice(t, client) {
		assert.NoError(t, err, "call %d", i)
	}
	assert.Equal(t, 3, a.Count(), "the failed call once more")
	assert.EqualValues(t, 2, p.charges.Load())
}

// The wait ends, and the call fails without a repeat, when the other call
// out shows that the target ignores keys (a success without the echo).
func TestAKeyedCallStopsWhenTheCallsOutShowKeysIgnored(t *testing.T) {
	a := &attempts{ignoresKeys: true}
	p := &payments{}
	client := dial(t, servePayments(t, false, p, a, firstFailsUnseen(false)), grpcretry.NewClient(fast))
	errs := chargeTwice(t, client)
	failed := 0
	for _, err := range errs {
		if err != nil {
			failed++
			assert.ErrorIs(t, err, retry.ErrNotIdempotent)
		}
	}
	assert.Equal(t, 1, failed)
	assert.Equal(t, 2, a.Count(), "a keyed call repeated to a target that ignores keys")
	assert.EqualValues(t, 1, p.charges.Load())
}
