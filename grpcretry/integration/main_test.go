package integration_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/exactlyonce/retry/grpcretry"
	"github.com/exactlyonce/retry/grpcretry/paymentspb"
)

// dsnEnv names the environment variable holding the test database's
// connection string, as in pgstore's tests.
const dsnEnv = "EXACTLYONCE_PG_DSN"

func dsn() string {
	if s := os.Getenv(dsnEnv); s != "" {
		return s
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

func TestMain(m *testing.M) {
	// The PostgreSQL tests need the database: say so once, clearly, and
	// fail rather than skip.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	conn, err := pgx.Connect(ctx, dsn())
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "\ngrpcretry's integration tests need PostgreSQL at $%s or\n"+
			"postgres://postgres@127.0.0.1:5432/test (trust authentication, a database named test), and could not use it:\n\n    %v\n\n"+
			"Start it (on Debian: pg_ctlcluster VERSION main start)\n", dsnEnv, err)
		os.Exit(1)
	}
	_ = conn.Close(context.Background())
	goleak.VerifyTestMain(m)
}

// serve starts a real gRPC server on loopback TCP with srv's service behind
// the interceptors, and returns a client through retrying (none when nil).
func serve(t *testing.T, impl paymentspb.PaymentsServer, retrying *grpcretry.Client, register func(grpc.ServiceRegistrar) grpc.ServiceRegistrar,
	interceptors ...grpc.UnaryServerInterceptor) paymentspb.PaymentsClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := grpc.NewServer(grpc.ChainUnaryInterceptor(interceptors...))
	var reg grpc.ServiceRegistrar = s
	if register != nil {
		reg = register(s)
	}
	paymentspb.RegisterPaymentsServer(reg, impl)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Serve(lis)
	}()
	t.Cleanup(func() {
		s.Stop()
		<-done
	})
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if retrying != nil {
		opts = append(opts, grpc.WithChainUnaryInterceptor(retrying.Unary), grpc.WithChainStreamInterceptor(retrying.Stream))
	}
	cc, err := grpc.NewClient(lis.Addr().String(), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { cc.Close() })
	return paymentspb.NewPaymentsClient(cc)
}
