package bench

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"

	"github.com/exactlyonce/retry/grpcretry/paymentspb"
)

// GRPCClosedLoop runs the closed-loop scenario over gRPC for lib with its
// policy of the table, cfg.Runs times, and returns the run of median
// length; for ours, each run once more with riding through off. The
// server cuts calls, not connections: after every cfg.CutEvery-th attempt
// it answers the next cfg.CutLength UNAVAILABLE at once, as gRPC reports
// a connection lost under a call.
func GRPCClosedLoop(ctx context.Context, lib GRPCLibrary, cfg ClosedLoopConfig) ClosedLoopResult {
	on := func() ClosedLoopResult { return grpcClosedLoop(ctx, lib.Dial(), cfg) }
	if lib.RideThroughOff == nil {
		return cfg.median(on, nil)
	}
	return cfg.median(on, func() ClosedLoopResult { return grpcClosedLoop(ctx, lib.RideThroughOff(), cfg) })
}

func grpcClosedLoop(ctx context.Context, opts []grpc.DialOption, cfg ClosedLoopConfig) ClosedLoopResult {
	srv, err := startGRPCServer(func(n uint64, _ time.Duration, _ []byte, _ int) grpcFault {
		if cfg.cut(int64(n)) {
			return grpcFaultBefore
		}
		return grpcFaultNone
	}, 0, 0, withServiceTime(func(uint64) time.Duration { return cfg.ServiceTime }))
	if err != nil {
		return ClosedLoopResult{}
	}
	defer srv.stop()
	cc, err := srv.dial(opts)
	if err != nil {
		return ClosedLoopResult{}
	}
	defer cc.Close()
	client := paymentspb.NewPaymentsClient(cc)
	cc.Connect()
	took, succeeded := cfg.drive(ctx, func(ctx context.Context, i int64) bool {
		cctx, cancel := context.WithTimeout(ctx, cfg.RequestTimeout)
		defer cancel()
		_, err := client.GetCharge(cctx, &paymentspb.GetChargeRequest{Id: fmt.Sprint(i)})
		return err == nil
	})
	return ClosedLoopResult{Took: took, Calls: cfg.Calls, Succeeded: succeeded, Attempts: int(srv.attempts.Load())}
}
