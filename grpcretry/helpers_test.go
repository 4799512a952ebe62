package grpcretry_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/test/bufconn"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/backoff"
	"github.com/exactlyonce/retry/grpcretry"
	"github.com/exactlyonce/retry/grpcretry/paymentspb"
	"github.com/exactlyonce/retry/idempotency"
)

// fast is a backoff that keeps the tests quick: waits of at most 2 ms.
var fast = retry.WithBackoff(backoff.FullJitter(time.Millisecond, 2*time.Millisecond))

// payments is the service the tests call. Each method counts its runs and
// answers as its func says (by default: a reply that echoes the request).
type payments struct {
	paymentspb.UnimplementedPaymentsServer
	charge  func(ctx context.Context, req *paymentspb.ChargeRequest) (*paymentspb.ChargeReply, error)
	list    func(req *paymentspb.ListChargesRequest, s grpc.ServerStreamingServer[paymentspb.ChargeReply]) error
	charges atomic.Int64
}

func (p *payments) Charge(ctx context.Context, req *paymentspb.ChargeRequest) (*paymentspb.ChargeReply, error) {
	n := p.charges.Add(1)
	if p.charge != nil {
		return p.charge(ctx, req)
	}
	return &paymentspb.ChargeReply{Id: fmt.Sprintf("ch_%d", n), Account: req.Account, AmountCents: req.AmountCents, Labels: req.Labels}, nil
}

func (p *payments) GetCharge(_ context.Context, req *paymentspb.GetChargeRequest) (*paymentspb.ChargeReply, error) {
	return &paymentspb.ChargeReply{Id: req.Id}, nil
}

func (p *payments) SetLimit(_ context.Context, req *paymentspb.SetLimitRequest) (*paymentspb.SetLimitReply, error) {
	return &paymentspb.SetLimitReply{LimitCents: req.LimitCents}, nil
}

func (p *payments) ListCharges(req *paymentspb.ListChargesRequest, s grpc.ServerStreamingServer[paymentspb.ChargeReply]) error {
	if p.list != nil {
		return p.list(req, s)
	}
	for i := range req.Count {
		if err := s.Send(&paymentspb.ChargeReply{Id: fmt.Sprintf("ch_%d", i+1), Account: req.Account}); err != nil {
			return err
		}
	}
	return nil
}

func (p *payments) Export(req *paymentspb.ListChargesRequest, s grpc.ServerStreamingServer[paymentspb.ChargeReply]) error {
	return p.ListCharges(req, s)
}

func (p *payments) Upload(s grpc.ClientStreamingServer[paymentspb.ChargeRequest, paymentspb.ChargeReply]) error {
	n := 0
	for {
		if _, err := s.Recv(); err != nil {
			return s.SendAndClose(&paymentspb.ChargeReply{AmountCents: int64(n)})
		}
		n++
	}
}

// attempts records what every call that reached the server carried, and
// fails calls as its script says: a server interceptor in front of the
// service, the faults of the network or of an overloaded server. It
// echoes a call's key in the trailer, as a server that honours keys does
// (the ServerInterceptor), unless ignoresKeys.
type attempts struct {
	mu          sync.Mutex
	keys        []string // the key of each call, "" for none
	script      func(n int, method string) error
	n           atomic.Int64
	ignoresKeys bool
}

func (a *attempts) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	n := int(a.n.Add(1))
	a.note(ctx)
	if !a.ignoresKeys {
		for _, k := range metadata.ValueFromIncomingContext(ctx, grpcretry.KeyMetadata) {
			_ = grpc.SetTrailer(ctx, metadata.Pairs(grpcretry.KeyMetadata, k))
		}
	}
	if a.script != nil {
		if err := a.script(n, info.FullMethod); err != nil {
			return nil, err
		}
	}
	return h(ctx, req)
}

func (a *attempts) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	n := int(a.n.Add(1))
	a.note(ss.Context())
	if a.script != nil {
		if err := a.script(n, info.FullMethod); err != nil {
			return err
		}
	}
	return h(srv, ss)
}

func (a *attempts) note(ctx context.Context) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.keys = append(a.keys, strings.Join(metadata.ValueFromIncomingContext(ctx, grpcretry.KeyMetadata), ","))
}

// Keys returns the keys seen so far.
func (a *attempts) Keys() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.keys...)
}

// Count is the number of calls that reached the server.
func (a *attempts) Count() int { return int(a.n.Load()) }

// server is a gRPC server of payments for a test, on loopback TCP or on
// an in-memory bufconn listener.
type server struct {
	addr string
	lis  *bufconn.Listener // nil on TCP
}

// serve starts a grpc.Server with opts, registers the service with
// register, and stops it when the test ends. tcp picks a real loopback
// socket over the in-memory listener.
func serve(t *testing.T, tcp bool, register func(*grpc.Server), opts ...grpc.ServerOption) *server {
	t.Helper()
	s := &server{}
	var lis net.Listener
	if tcp {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		lis, s.addr = l, l.Addr().String()
	} else {
		s.lis = bufconn.Listen(1 << 20)
		lis, s.addr = s.lis, "passthrough:///bufconn"
	}
	srv := grpc.NewServer(opts...)
	register(srv)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return s
}

// servePayments serves p behind the attempts recorder a (and the
// interceptors given, innermost last).
func servePayments(t *testing.T, tcp bool, p *payments, a *attempts, unary ...grpc.UnaryServerInterceptor) *server {
	t.Helper()
	chain := append([]grpc.UnaryServerInterceptor{a.unary}, unary...)
	return serve(t, tcp, func(s *grpc.Server) { paymentspb.RegisterPaymentsServer(s, p) },
		grpc.ChainUnaryInterceptor(chain...), grpc.ChainStreamInterceptor(a.stream))
}

// dial connects to s through the Client c (none when nil) and closes the
// connection when the test ends.
func dial(t *testing.T, s *server, c *grpcretry.Client, opts ...grpc.DialOption) paymentspb.PaymentsClient {
	t.Helper()
	return paymentspb.NewPaymentsClient(conn(t, s, c, opts...))
}

func conn(t *testing.T, s *server, c *grpcretry.Client, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if s.lis != nil {
		opts = append(opts, grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return s.lis.DialContext(ctx)
		}))
	}
	if c != nil {
		opts = append(opts, grpc.WithChainUnaryInterceptor(c.Unary), grpc.WithChainStreamInterceptor(c.Stream))
	}
	cc, err := grpc.NewClient(s.addr, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { cc.Close() })
	return cc
}

// testCtx is a context that ends with the test, at the latest in a minute.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// env is a Runner on a MemoryStore, both on one mock clock.
type env struct {
	clock  *clock.Mock
	store  *idempotency.MemoryStore
	runner *idempotency.Runner
}

const (
	testLease = 30 * time.Second
	testTTL   = 24 * time.Hour
)

func newEnv(opts ...idempotency.Option) *env {
	mock := clock.NewMock()
	mock.Set(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	store := idempotency.NewMemoryStore(mock)
	opts = append([]idempotency.Option{idempotency.WithClock(mock), idempotency.WithLease(testLease), idempotency.WithTTL(testTTL)}, opts...)
	return &env{clock: mock, store: store, runner: idempotency.NewRunner(store, opts...)}
}

// tenantMetadata names the metadata the tests' CallerFunc reads.
const tenantMetadata = "x-tenant"

func byTenant(ctx context.Context) (string, error) {
	v := metadata.ValueFromIncomingContext(ctx, tenantMetadata)
	if len(v) != 1 {
		return "", fmt.Errorf("no tenant")
	}
	return v[0], nil
}

// asTenant returns ctx with the tenant and, if key is not empty, the key in
// its outgoing metadata.
func asTenant(ctx context.Context, tenant, key string) context.Context {
	ctx = metadata.AppendToOutgoingContext(ctx, tenantMetadata, tenant)
	if key != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, grpcretry.KeyMetadata, key)
	}
	return ctx
}
