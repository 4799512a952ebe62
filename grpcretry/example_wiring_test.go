package grpcretry_test

import (
	"context"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/grpcretry"
	"github.com/exactlyonce/retry/grpcretry/paymentspb"
	"github.com/exactlyonce/retry/idempotency"
)

// The package documentation's wiring, line for line (TestDocWiringIsTheExample
// keeps the two the same): a client and a server on loopback.
func Example_wiring() {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	addr := lis.Addr().String()
	creds := grpc.WithTransportCredentials(insecure.NewCredentials())
	runner := idempotency.NewRunner(nil)
	callerOf := grpcretry.SingleTenant

	retrying := grpcretry.NewClient(retry.WithTotalTimeout(5 * time.Second))
	conn, err := grpc.NewClient(addr, creds, grpc.WithDisableRetry(),
		grpc.WithChainUnaryInterceptor(retrying.Unary), grpc.WithChainStreamInterceptor(retrying.Stream))
	server := grpc.NewServer(grpc.ChainUnaryInterceptor(grpcretry.PushbackUnary, grpcretry.NewServerInterceptor(runner, callerOf).Unary))

	if err != nil {
		panic(err)
	}
	defer conn.Close()
	paymentspb.RegisterPaymentsServer(server, &payments{})
	go server.Serve(lis)
	defer server.Stop()
	reply, err := paymentspb.NewPaymentsClient(conn).Charge(context.Background(),
		&paymentspb.ChargeRequest{Account: "acct_1", AmountCents: 700})
	if err != nil {
		panic(err)
	}
	fmt.Println(reply.Id, reply.AmountCents)
	// Output: ch_1 700
}
