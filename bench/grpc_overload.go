package bench

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/grpcretry/paymentspb"
)

// capacityInterceptor serves gRPC calls with pool's work: UNAVAILABLE at
// once when its queue is full (what an HTTP 503 maps to), the service's
// answer once the work is done, the call's own end if its caller left.
func capacityInterceptor(pool *capacityPool) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if !pool.serve(ctx) {
			return nil, errGRPCUnavailable
		}
		if err := ctx.Err(); err != nil {
			return nil, status.FromContextError(err).Err()
		}
		return h(ctx, req)
	}
}

// GRPCOverload runs the overload scenario over gRPC for lib: GetCharge
// (NO_SIDE_EFFECTS) calls to the finite-capacity server, each attempt
// bounded by cfg.AttemptTimeout where the library has its own option for
// it (GRPCLibrary.Bounded), else by the call's deadline only. cfg.Policy
// does not apply: each gRPC library runs with its policy of the table.
func GRPCOverload(ctx context.Context, lib GRPCLibrary, cfg OverloadConfig) OverloadResult {
	pool := newCapacityPool(cfg, cfg.buckets())
	start := time.Now()
	pool.start = start
	srv, err := startGRPCServer(nil, 0, 0, withInterceptor(capacityInterceptor(pool)))
	if err != nil {
		return OverloadResult{}
	}
	defer srv.stop()
	opts, told := lib.DialBounded(cfg.AttemptTimeout), func() []retry.DependencyStats { return nil }
	if lib.Told != nil {
		opts, told = lib.Told(cfg.AttemptTimeout)
	}
	cc, err := srv.dial(opts)
	if err != nil {
		return OverloadResult{}
	}
	defer cc.Close()
	client := paymentspb.NewPaymentsClient(cc)
	cc.Connect()

	offered, succeeded := cfg.offer(ctx, start, func(ctx context.Context, i int) bool {
		cctx, cancel := context.WithTimeout(ctx, cfg.RequestTimeout)
		defer cancel()
		_, err := client.GetCharge(cctx, &paymentspb.GetChargeRequest{Id: fmt.Sprint(i)})
		return err == nil
	})
	srv.stop() // waits for the work still queued: all of it is counted
	res := pool.result(offered, succeeded)
	res.Outages, res.Overloads = -1, -1
	if lib.Told != nil {
		res.Outages, res.Overloads = sumOutages(told())
	}
	return res
}
