package bench

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/exactlyonce/retry/grpcretry"
	"github.com/exactlyonce/retry/grpcretry/paymentspb"
	"github.com/exactlyonce/retry/idempotency"
)

// grpcFault is what the bench's gRPC service does to one call.
type grpcFault int

const (
	grpcFaultNone   grpcFault = iota
	grpcFaultBefore           // UNAVAILABLE before the call runs (a reset before the service saw it)
	grpcFaultAfter            // UNAVAILABLE after the call ran (its answer lost)
)

// grpcPayments is the service: Charge performs a charge in its ledger
// (duplicates counted by the request's account, the caller's reference),
// GetCharge only reads.
type grpcPayments struct {
	paymentspb.UnimplementedPaymentsServer
	mu       sync.Mutex
	byRef    map[string]int
	executed int
}

func (p *grpcPayments) Charge(_ context.Context, req *paymentspb.ChargeRequest) (*paymentspb.ChargeReply, error) {
	p.mu.Lock()
	p.executed++
	p.byRef[req.Account]++
	n := p.executed
	p.mu.Unlock()
	return &paymentspb.ChargeReply{Id: fmt.Sprintf("ch_%d", n), Account: req.Account, AmountCents: req.AmountCents}, nil
}

func (p *grpcPayments) GetCharge(_ context.Context, req *paymentspb.GetChargeRequest) (*paymentspb.ChargeReply, error) {
	return &paymentspb.ChargeReply{Id: req.Id}, nil
}

// totals returns the charges performed and the distinct references.
func (p *grpcPayments) totals() (executed, distinct int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.executed, len(p.byRef)
}

// grpcServer is the service on loopback TCP behind grpcretry's server
// interceptor (keys optional, so that clients without keys are served)
// and a front interceptor that counts every attempt, in buckets of time,
// and injects faults.
type grpcServer struct {
	addr     string
	svc      *grpcPayments
	attempts atomic.Int64
	start    time.Time
	bucket   time.Duration
	buckets  []atomic.Int64
	// fault decides the fault of the n-th attempt, since after start, whose
	// request message is msg, seen times so far with it.
	fault func(n uint64, since time.Duration, msg []byte, seen int) grpcFault
	mu    sync.Mutex
	seen  map[[sha256.Size]byte]int
	stop  func()
	// serviceTime, if set, is how long the service takes for the n-th
	// attempt, when no fault refuses it before.
	serviceTime func(n uint64) time.Duration
	// inner are interceptors between the front and the service's own.
	inner []grpc.UnaryServerInterceptor
}

// grpcServerOption configures a grpcServer.
type grpcServerOption func(*grpcServer)

// withServiceTime makes the service take d(n) for the n-th attempt it
// serves.
func withServiceTime(d func(n uint64) time.Duration) grpcServerOption {
	return func(s *grpcServer) { s.serviceTime = d }
}

// withInterceptor puts i between the front interceptor and the service's
// own (grpcretry's server interceptor).
func withInterceptor(i grpc.UnaryServerInterceptor) grpcServerOption {
	return func(s *grpcServer) { s.inner = append(s.inner, i) }
}

// startGRPCServer starts a server; buckets and bucket size its time series
// (none when 0). Its Stop waits for the handlers still running.
func startGRPCServer(fault func(uint64, time.Duration, []byte, int) grpcFault, buckets int, bucket time.Duration, opts ...grpcServerOption) (*grpcServer, error) {
	s := &grpcServer{svc: &grpcPayments{byRef: map[string]int{}}, fault: fault, bucket: bucket,
		buckets: make([]atomic.Int64, buckets), seen: map[[sha256.Size]byte]int{}, start: time.Now()}
	for _, o := range opts {
		o(s)
	}
	runner := idempotency.NewRunner(nil)
	dedup := grpcretry.NewServerInterceptor(runner, grpcretry.SingleTenant, grpcretry.WithOptionalKeys())
	chain := append(append([]grpc.UnaryServerInterceptor{s.front}, s.inner...), dedup.Unary)
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(chain...), grpc.WaitForHandlers(true))
	paymentspb.RegisterPaymentsServer(srv, s.svc)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.addr = ln.Addr().String()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	s.stop = func() {
		srv.Stop()
		<-done
	}
	return s, nil
}

// restart sets the time the series and the faults count from.
func (s *grpcServer) restart() { s.start = time.Now() }

var errGRPCUnavailable = status.Error(codes.Unavailable, "unavailable")

func (s *grpcServer) front(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	n := uint64(s.attempts.Add(1))
	since := time.Since(s.start)
	if i := int(since / max(s.bucket, 1)); i < len(s.buckets) {
		s.buckets[i].Add(1)
	}
	fault := grpcFaultNone
	if s.fault != nil {
		msg, _ := proto.MarshalOptions{Deterministic: true}.Marshal(req.(proto.Message))
		k := sha256.Sum256(msg)
		s.mu.Lock()
		s.seen[k]++
		seen := s.seen[k]
		s.mu.Unlock()
		fault = s.fault(n, since, msg, seen)
	}
	if fault == grpcFaultBefore {
		return nil, errGRPCUnavailable
	}
	if s.serviceTime != nil {
		time.Sleep(s.serviceTime(n))
	}
	reply, err := h(ctx, req)
	if fault == grpcFaultAfter {
		return nil, errGRPCUnavailable
	}
	return reply, err
}

// series returns the attempts per bucket.
func (s *grpcServer) series() []int {
	out := make([]int, len(s.buckets))
	for i := range out {
		out[i] = int(s.buckets[i].Load())
	}
	return out
}

// dial connects to s with lib's options.
func (s *grpcServer) dial(opts []grpc.DialOption) (*grpc.ClientConn, error) {
	return grpc.NewClient(s.addr, append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
}

// faultPlanOf is the demo's fault plan: a share drop of the calls answered
// UNAVAILABLE after they ran, a share reset before, chosen by a hash of the
// seed, the request message and how often it was seen, so that every
// library meets the same faults.
func faultPlanOf(seed uint64, drop, reset float64) func(uint64, time.Duration, []byte, int) grpcFault {
	return func(_ uint64, _ time.Duration, msg []byte, seen int) grpcFault {
		var head [16]byte
		binary.BigEndian.PutUint64(head[:8], seed)
		binary.BigEndian.PutUint64(head[8:], uint64(seen))
		sum := sha256.Sum256(append(head[:], msg...))
		u := float64(binary.BigEndian.Uint64(sum[:8])>>11) / (1 << 53)
		switch {
		case u < reset:
			return grpcFaultBefore
		case u < reset+drop:
			return grpcFaultAfter
		}
		return grpcFaultNone
	}
}
