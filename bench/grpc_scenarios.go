package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/exactlyonce/retry/grpcretry"
	"github.com/exactlyonce/retry/grpcretry/paymentspb"
)

// GRPCSettings sizes the gRPC scenarios of a Run.
type GRPCSettings struct {
	// Outage: calls to a service that always answers UNAVAILABLE,
	// sequentially and from Callers callers.
	OutageCalls, Callers, CallerCalls int
	OutageTimeout                     time.Duration
	// Duplicates: the demo's faults (a share Drop of the calls answered
	// UNAVAILABLE after they ran, Reset before), Charges charges from
	// Concurrency callers.
	Charges, Concurrency int
	Drop, Reset          float64
	Seed                 uint64
	// Storm is the HTTP retry storm's shape, for gRPC calls; SlowStorm
	// the same against a service that takes its time (none when its Rate
	// is 0).
	Storm, SlowStorm StormConfig
	// ClosedLoop is callers in a closed loop to a service that cuts calls
	// now and then (none when Calls is 0).
	ClosedLoop ClosedLoopConfig
	// Overload is the finite-capacity server slowed down for a moment
	// (none when Rate is 0), Queueing the server that queues without
	// bound (likewise); their Policy does not apply.
	Overload, Queueing OverloadConfig
	// Cost runs the cost benchmarks.
	Cost bool
}

// GRPCLibResult is everything measured for one gRPC library.
type GRPCLibResult struct {
	Library              GRPCLibrary
	OutageSeq, OutageCon OutageResult
	Duplicates           DuplicatesResult
	Storm, SlowStorm     StormResult
	ClosedLoop           ClosedLoopResult
	Overload, Queueing   OverloadResult
	// Costs are indexed like GRPCCostCases.
	Costs []Cost
}

// DuplicatesResult counts what the service did under the demo's faults.
type DuplicatesResult struct {
	Charges, Executed, Duplicates, Attempts, Failures int
}

// GRPCResults is the gRPC part of a run.
type GRPCResults struct {
	Settings GRPCSettings
	Libs     []GRPCLibResult
	// FloorCosts are the key-by-hand floor's, indexed like GRPCCostCases.
	FloorCosts []Cost
}

// RunGRPC runs every gRPC scenario on every gRPC library, logging
// progress to log.
func RunGRPC(ctx context.Context, s GRPCSettings, log func(name string, took time.Duration)) GRPCResults {
	libs := GRPCLibraries()
	rs := make([]GRPCLibResult, len(libs))
	for i, l := range libs {
		rs[i].Library = l
	}
	var floor []Cost
	if s.Cost {
		t := time.Now()
		costs := MeasureGRPCCosts(libs)
		for i := range rs {
			rs[i].Costs = costs[i]
		}
		floor = costs[len(libs)]
		log("gRPC: cost of a unary call", time.Since(t))
	}
	step := func(name string, f func(r *GRPCLibResult)) {
		t := time.Now()
		var wg sync.WaitGroup
		for i := range rs {
			wg.Go(func() { f(&rs[i]) })
		}
		wg.Wait()
		log(name, time.Since(t))
	}
	step("gRPC: total outage", func(r *GRPCLibResult) {
		r.OutageSeq = GRPCOutage(ctx, r.Library, 1, s.OutageCalls, s.OutageTimeout)
		r.OutageCon = GRPCOutage(ctx, r.Library, s.Callers, s.CallerCalls, s.OutageTimeout)
	})
	step("gRPC: duplicates under the demo's faults", func(r *GRPCLibResult) {
		r.Duplicates = GRPCDuplicates(ctx, r.Library, s)
	})
	// One library at a time from here: the load and the time taken are
	// measured.
	one := func(name string, run bool, f func(r *GRPCLibResult)) {
		if !run {
			return
		}
		for i := range rs {
			t := time.Now()
			f(&rs[i])
			log("gRPC: "+name+", "+rs[i].Library.Name, time.Since(t))
		}
	}
	one("retry storm", true, func(r *GRPCLibResult) { r.Storm = GRPCStorm(ctx, r.Library, s.Storm) })
	one("retry storm, slow server", s.SlowStorm.Rate > 0, func(r *GRPCLibResult) {
		r.SlowStorm = GRPCStorm(ctx, r.Library, s.SlowStorm)
	})
	one("closed loop", s.ClosedLoop.Calls > 0, func(r *GRPCLibResult) {
		r.ClosedLoop = GRPCClosedLoop(ctx, r.Library, s.ClosedLoop)
	})
	one("overload", s.Overload.Rate > 0, func(r *GRPCLibResult) {
		r.Overload = GRPCOverload(ctx, r.Library, s.Overload)
	})
	one("overload, queueing server", s.Queueing.Rate > 0, func(r *GRPCLibResult) {
		r.Queueing = GRPCOverload(ctx, r.Library, s.Queueing)
	})
	return GRPCResults{Settings: s, Libs: rs, FloorCosts: floor}
}

// GRPCOutage calls a service that always answers UNAVAILABLE: callers
// callers make calls calls each, one after another, each with timeout; the
// result counts the attempts that reached the service per call.
func GRPCOutage(ctx context.Context, lib GRPCLibrary, callers, calls int, timeout time.Duration) OutageResult {
	srv, err := startGRPCServer(func(uint64, time.Duration, []byte, int) grpcFault { return grpcFaultBefore }, 0, 0)
	if err != nil {
		return OutageResult{}
	}
	defer srv.stop()
	cc, err := srv.dial(lib.Dial())
	if err != nil {
		return OutageResult{}
	}
	defer cc.Close()
	client := paymentspb.NewPaymentsClient(cc)
	var wg sync.WaitGroup
	var done atomic.Int64
	for c := range callers {
		wg.Go(func() {
			for i := range calls {
				cctx, cancel := context.WithTimeout(ctx, timeout)
				client.Charge(cctx, &paymentspb.ChargeRequest{Account: fmt.Sprintf("c%d-%d", c, i), AmountCents: 1})
				cancel()
				done.Add(1)
			}
		})
	}
	wg.Wait()
	return OutageResult{Requests: int(done.Load()), Attempts: int(srv.attempts.Load())}
}

// GRPCDuplicates sends the demo's charges through the demo's faults and
// counts what the service performed.
func GRPCDuplicates(ctx context.Context, lib GRPCLibrary, s GRPCSettings) DuplicatesResult {
	srv, err := startGRPCServer(faultPlanOf(s.Seed, s.Drop, s.Reset), 0, 0)
	if err != nil {
		return DuplicatesResult{}
	}
	defer srv.stop()
	cc, err := srv.dial(lib.Dial())
	if err != nil {
		return DuplicatesResult{}
	}
	defer cc.Close()
	client := paymentspb.NewPaymentsClient(cc)
	jobs := make(chan int)
	var failures atomic.Int64
	var wg sync.WaitGroup
	for range s.Concurrency {
		wg.Go(func() {
			for i := range jobs {
				cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				_, err := client.Charge(cctx, &paymentspb.ChargeRequest{Account: fmt.Sprintf("order-%06d", i), AmountCents: int64(100 + i%900)})
				cancel()
				if err != nil {
					failures.Add(1)
				}
			}
		})
	}
	for i := range s.Charges {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	executed, distinct := srv.svc.totals()
	return DuplicatesResult{Charges: s.Charges, Executed: executed, Duplicates: executed - distinct,
		Attempts: int(srv.attempts.Load()), Failures: int(failures.Load())}
}

// GRPCStorm offers cfg.Rate calls a second for cfg.Offer to a service that
// answers UNAVAILABLE for its first cfg.Outage (and takes cfg's service
// time for each call it serves), each call with cfg.RequestTimeout, and
// records the attempts over time.
func GRPCStorm(ctx context.Context, lib GRPCLibrary, cfg StormConfig) StormResult {
	var opts []grpcServerOption
	if cfg.ServiceTime > 0 || cfg.ServiceSpread > 0 {
		opts = append(opts, withServiceTime(cfg.serviceTime))
	}
	srv, err := startGRPCServer(func(_ uint64, since time.Duration, _ []byte, _ int) grpcFault {
		if since < cfg.Outage {
			return grpcFaultBefore
		}
		return grpcFaultNone
	}, int(cfg.Window/cfg.Bucket)+1, cfg.Bucket, opts...)
	if err != nil {
		return StormResult{}
	}
	defer srv.stop()
	cc, err := srv.dial(lib.Dial())
	if err != nil {
		return StormResult{}
	}
	defer cc.Close()
	client := paymentspb.NewPaymentsClient(cc)
	cc.Connect()

	ctx, cancel := context.WithTimeout(ctx, cfg.Window)
	defer cancel()
	srv.restart()
	start := srv.start
	res := StormResult{Bucket: cfg.Bucket}
	cfg.offer(ctx, start, &res, func(ctx context.Context, i int) bool {
		cctx, cancel := context.WithTimeout(ctx, cfg.RequestTimeout)
		defer cancel()
		_, err := client.GetCharge(cctx, &paymentspb.GetChargeRequest{Id: fmt.Sprint(i)})
		return err == nil
	})
	<-ctx.Done() // the window is recorded whole
	series := srv.series()
	res.Attempts = series[:len(series)-1]
	return res
}

// GRPCCostCase is one kind of unary call whose cost is measured.
type GRPCCostCase struct {
	Name     string
	Keyed    bool // Charge (not declared idempotent: ours sends a key); else GetCharge (NO_SIDE_EFFECTS)
	Deadline bool // the call has a 5 s deadline
}

// GRPCCostCases are the calls measured.
var GRPCCostCases = []GRPCCostCase{
	{"unary GetCharge (NO_SIDE_EFFECTS) with a 5 s deadline", false, true},
	{"unary GetCharge (NO_SIDE_EFFECTS) without a deadline", false, false},
	{"unary Charge (keyed by ours) with a 5 s deadline", true, true},
	{"unary Charge (keyed by ours) without a deadline", true, false},
}

// keyFloor is a bare client that sends a constant key with each call, as
// the least any client sending a key costs.
var keyFloor = GRPCLibrary{Name: "grpc-go, key added by hand", Dial: func() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
		cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return invoker(metadata.AppendToOutgoingContext(ctx, grpcretry.KeyMetadata, `"6f1c1a2e-93b5-4c43-9a51-2f0c8f3e9d11"`), method, req, reply, cc, opts...)
	})}
}}

// GRPCCostBenchmark measures one successful unary call through lib, in cc,
// to the service at addr (server included: loopback, one process).
func GRPCCostBenchmark(lib GRPCLibrary, cc GRPCCostCase, srv *grpcServer) func(b *testing.B) {
	return func(b *testing.B) {
		conn, err := srv.dial(lib.Dial())
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		client := paymentspb.NewPaymentsClient(conn)
		ctx := context.Background()
		if cc.Deadline {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, time.Hour) // each call's deadline is far; what counts is having one
			defer cancel()
		}
		charge := &paymentspb.ChargeRequest{Account: "acct", AmountCents: 100}
		get := &paymentspb.GetChargeRequest{Id: "ch_1"}
		call := func() error {
			if cc.Keyed {
				_, err := client.Charge(ctx, charge)
				return err
			}
			_, err := client.GetCharge(ctx, get)
			return err
		}
		if err := call(); err != nil { // connect first
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if err := call(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// grpcCostRounds is how many times MeasureGRPCCosts runs every benchmark:
// more than the HTTP cost's, for loopback gRPC calls vary more on a busy
// machine.
const grpcCostRounds = 7

// MeasureGRPCCosts runs GRPCCostBenchmark for every library (and the
// key-by-hand floor, last) and case, grpcCostRounds times over,
// interleaved, and keeps each one's fastest run.
func MeasureGRPCCosts(libs []GRPCLibrary) [][]Cost {
	srv, err := startGRPCServer(nil, 0, 0)
	if err != nil {
		return nil
	}
	defer srv.stop()
	all := append(append([]GRPCLibrary(nil), libs...), keyFloor)
	out := make([][]Cost, len(all))
	for i := range out {
		out[i] = make([]Cost, len(GRPCCostCases))
	}
	for range grpcCostRounds {
		for j, cc := range GRPCCostCases {
			for i, lib := range all {
				r := testing.Benchmark(GRPCCostBenchmark(lib, cc, srv))
				c := Cost{NsPerOp: float64(r.NsPerOp()), AllocsPerOp: r.AllocsPerOp()}
				if out[i][j].NsPerOp == 0 || c.NsPerOp < out[i][j].NsPerOp {
					out[i][j] = c
				}
			}
		}
	}
	return out
}
