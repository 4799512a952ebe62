package grpcretry_test

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/backoff"
	"github.com/exactlyonce/retry/grpcretry"
	"github.com/exactlyonce/retry/grpcretry/paymentspb"
	"github.com/exactlyonce/retry/idempotency"
)

// loseFirstAnswer executes the first call, then loses its answer, as a
// network that dropped the response after the service charged.
func loseFirstAnswer() grpc.UnaryServerInterceptor {
	var n atomic.Int64
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		resp, err := h(ctx, req)
		if n.Add(1) == 1 {
			return nil, status.Error(codes.Unavailable, "connection lost")
		}
		return resp, err
	}
}

// A charge whose answer is lost after the service charged is retried with
// the same key, and the service answers the retry from its store: one
// charge.
func Example() {
	// The server: the idempotency interceptor in front of the service.
	runner := idempotency.NewRunner(nil) // in-memory; pgstore for many instances
	dedup := grpcretry.NewServerInterceptor(runner, grpcretry.SingleTenant)
	server := grpc.NewServer(grpc.ChainUnaryInterceptor(grpcretry.PushbackUnary, loseFirstAnswer(), dedup.Unary))
	service := &payments{}
	paymentspb.RegisterPaymentsServer(server, service)
	lis := bufconn.Listen(1 << 20)
	go server.Serve(lis)
	defer server.Stop()

	// The client: our interceptors on the connection.
	retrying := grpcretry.NewClient(retry.WithBackoff(backoff.Constant(0)))
	conn, err := grpc.NewClient("passthrough:///payments",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(retrying.Unary), grpc.WithChainStreamInterceptor(retrying.Stream))
	if err != nil {
		panic(err)
	}
	defer conn.Close()

	var report retry.Report
	reply, err := paymentspb.NewPaymentsClient(conn).Charge(context.Background(),
		&paymentspb.ChargeRequest{Account: "acct_1", AmountCents: 1200}, grpcretry.CallPolicy(retry.WithReport(&report)))
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s for %d cents after %d attempts; the service charged %d time(s)\n",
		reply.Id, reply.AmountCents, report.Attempts, service.charges.Load())
	// Output: ch_1 for 1200 cents after 2 attempts; the service charged 1 time(s)
}
