package grpcretry_test

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/exactlyonce/retry/grpcretry"
	"github.com/exactlyonce/retry/grpcretry/paymentspb"
	"github.com/exactlyonce/retry/idempotency"
)

// bank is a payment provider that deduplicates charges by their key.
type bank struct {
	mu      sync.Mutex
	charges map[string]string
}

func (b *bank) charge(_ context.Context, key string) ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.charges == nil {
		b.charges = map[string]string{}
	}
	if id, ok := b.charges[key]; ok {
		return []byte(id), nil
	}
	id := "bank_" + string(rune('0'+len(b.charges)+1))
	b.charges[key] = id
	return []byte(id), nil
}

// stepping charges in a Step; crash makes it hang after the step, as a
// process that died there.
type stepping struct {
	paymentspb.UnimplementedPaymentsServer
	bank    *bank
	crash   bool
	stepped chan struct{}
	hang    chan struct{}
	saw     chan []string
}

func (s *stepping) Charge(ctx context.Context, req *paymentspb.ChargeRequest) (*paymentspb.ChargeReply, error) {
	e := idempotency.FromContext(ctx)
	md, _ := metadata.FromIncomingContext(ctx)
	s.saw <- []string{e.Caller(), e.Key(), req.Account, first(md.Get("x-trace")), first(md.Get("authorization")), first(md.Get(grpcretry.KeyMetadata))}
	id, err := e.Step(ctx, "charge", s.bank.charge)
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	if s.crash {
		s.stepped <- struct{}{}
		<-s.hang
	}
	return &paymentspb.ChargeReply{Id: string(id), Account: req.Account}, nil
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// A Reconciler finishes a call whose instance died after its charge: it
// calls the handler again with the stored request and metadata (never the
// credentials), as the same caller with the same key; the client that
// comes back gets the stored outcome; the bank charged once.
func TestReconcilerCallsAStalledCallAgain(t *testing.T) {
	e := newEnv()
	b := &bank{}
	saw := make(chan []string, 2)
	opt := grpcretry.WithResume("payments", "x-trace")
	crashed := &stepping{bank: b, crash: true, stepped: make(chan struct{}), hang: make(chan struct{}), saw: saw}
	dead := grpcretry.NewServerInterceptor(e.runner, byTenant, opt)
	deadSrv := serve(t, false, func(s *grpc.Server) { paymentspb.RegisterPaymentsServer(dead.Registrar(s), crashed) },
		grpc.ChainUnaryInterceptor(dead.Unary))

	survivorRunner := idempotency.NewRunner(e.store, idempotency.WithClock(e.clock), idempotency.WithLease(testLease), idempotency.WithTTL(testTTL))
	alive := grpcretry.NewServerInterceptor(survivorRunner, byTenant, opt)
	aliveSrv := serve(t, false, func(s *grpc.Server) {
		paymentspb.RegisterPaymentsServer(alive.Registrar(s), &stepping{bank: b, saw: saw})
	}, grpc.ChainUnaryInterceptor(alive.Unary))

	ctx := metadata.AppendToOutgoingContext(asTenant(testCtx(t), "shop", `"order-5"`), "x-trace", "t-1", "authorization", "Bearer secret")
	req := &paymentspb.ChargeRequest{Account: "acct", AmountCents: 10}
	lost := make(chan error, 1)
	go func() {
		_, err := dial(t, deadSrv, nil).Charge(ctx, req)
		lost <- err
	}()
	<-crashed.stepped
	assert.Equal(t, []string{"shop", "order-5", "acct", "t-1", "Bearer secret", `"order-5"`}, <-saw)

	e.clock.Add(testLease + time.Second)
	var log bytes.Buffer
	n, err := survivorRunner.Reconcile(context.Background(),
		idempotency.ReconcilerConfig{Logger: slog.New(slog.NewTextHandler(&log, nil))})
	require.NoError(t, err, log.String())
	require.Equal(t, 1, n)
	assert.Equal(t, []string{"shop", "order-5", "acct", "t-1", "", `"order-5"`}, <-saw,
		"the same call, caller and key; never the credentials")

	var trailer metadata.MD
	reply, err := dial(t, aliveSrv, nil).Charge(ctx, req, grpc.Trailer(&trailer))
	require.NoError(t, err)
	assert.Equal(t, "bank_1", reply.Id)
	assert.Equal(t, []string{"true"}, trailer.Get(grpcretry.ReplayedTrailer))
	assert.Len(t, b.charges, 1)

	close(crashed.hang)
	assert.Equal(t, codes.Aborted, status.Code(<-lost), "the stalled attempt lost its lease")
	rec, err := e.store.Get(context.Background(), "shop", "order-5")
	require.NoError(t, err)
	assert.Empty(t, rec.Resume, "the stored call goes when the record completes")
}

func TestWithResumeNeverStoresCredentials(t *testing.T) {
	for _, m := range []string{"Authorization", "cookie", "proxy-authorization"} {
		assert.Panics(t, func() { grpcretry.WithResume("x", m) })
	}
	assert.Panics(t, func() { grpcretry.WithResume("") })
}
