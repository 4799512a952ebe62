package bench

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"
)

// Settings sizes every scenario of a Run.
type Settings struct {
	Seed uint64

	// Total outage, defaults: every library at once, bounded by a window.
	DefaultsRequests       int
	DefaultsWindow         time.Duration
	DefaultsRequestTimeout time.Duration
	// Total outage, comparable policy.
	PolicyRequests       int
	PolicyRequestTimeout time.Duration
	// Concurrent callers, and requests per caller, of the concurrent runs.
	Callers, CallerRequests int

	NestedRequests, NestedCallers int
	NestedRequestTimeout          time.Duration

	ReuseRequests int
	// IgnoredKeysRequests is how many POSTs go to the server that ignores
	// keys (see IgnoredKeys).
	IgnoredKeysRequests int
	// The three storms: an outage, a flapping service, a brownout.
	Storm, Flap, Brownout StormConfig
	// SlowStorm is the outage storm against a service that takes its
	// time for each request it serves (none when its Rate is 0).
	SlowStorm StormConfig
	// TwoHosts is one client calling a dead service and a healthy one.
	TwoHosts TwoHostsConfig
	// ClosedLoop is callers in a closed loop to a server that cuts
	// connections now and then.
	ClosedLoop ClosedLoopConfig
	// Overload is a server of finite capacity slowed down for a moment
	// (the metastable-failure scenario), run with each policy.
	Overload OverloadConfig
	// Queueing is the same with a server that queues without bound
	// instead of refusing (none when its Rate is 0), run with the
	// defaults.
	Queueing OverloadConfig
	// StormPause separates the storms, so that one library's connections
	// have settled before the next starts.
	StormPause time.Duration
	// Cost runs the library-cost benchmarks.
	Cost bool
	// GRPC sizes the gRPC scenarios (none when OutageCalls is 0).
	GRPC GRPCSettings
	// OnlyGRPC runs the gRPC scenarios alone.
	OnlyGRPC bool
}

// DefaultSettings are the sizes of the published results.
func DefaultSettings() Settings {
	s := Settings{
		Seed:                   1,
		DefaultsRequests:       100,
		DefaultsWindow:         25 * time.Second,
		DefaultsRequestTimeout: 5 * time.Second,
		PolicyRequests:         100,
		PolicyRequestTimeout:   500 * time.Millisecond,
		Callers:                50,
		CallerRequests:         10,
		NestedRequests:         20,
		NestedCallers:          10,
		NestedRequestTimeout:   30 * time.Second,
		ReuseRequests:          10,
		IgnoredKeysRequests:    1000,
		Storm: StormConfig{
			Policy: Defaults, Rate: 200, Offer: 8 * time.Second, Outage: 3 * time.Second,
			Window: 10 * time.Second, Bucket: 250 * time.Millisecond,
			RequestTimeout: 5 * time.Second, MaxInFlight: 2000,
		},
		Flap: StormConfig{
			Kind: StormFlap, Policy: Defaults, Rate: 200, Offer: 6 * time.Second, Outage: 4 * time.Second,
			FlapPeriod: time.Second, Window: 8 * time.Second, Bucket: 250 * time.Millisecond,
			RequestTimeout: 5 * time.Second, MaxInFlight: 2000,
		},
		Brownout: StormConfig{
			Kind: StormBrownout, Policy: Defaults, Rate: 200, Offer: 6 * time.Second, Outage: 3 * time.Second,
			BrownoutRate: 0.3, Window: 8 * time.Second, Bucket: 250 * time.Millisecond,
			RequestTimeout: 5 * time.Second, MaxInFlight: 2000,
		},
		TwoHosts: TwoHostsConfig{
			Policy: Defaults, Rate: 100, Offer: 4 * time.Second, BlipRate: 0.05,
			RequestTimeout: 2 * time.Second,
		},
		ClosedLoop: ClosedLoopConfig{
			Callers: 16, Calls: 1000, ServiceTime: 2 * time.Millisecond, CutEvery: 200, CutLength: 20,
			RequestTimeout: 5 * time.Second, Runs: 5,
		},
		Overload: OverloadConfig{
			Workers: 4, ServiceTime: 10 * time.Millisecond, Queue: 100,
			Rate: 300, Offer: 10 * time.Second, TriggerAt: 4 * time.Second, Trigger: 2 * time.Second, Slowdown: 4,
			RequestTimeout: time.Second, AttemptTimeout: 250 * time.Millisecond,
			Bucket: 250 * time.Millisecond, MaxInFlight: 5000,
		},
		StormPause: 2 * time.Second,
		Cost:       true,
	}
	s.SlowStorm = slowStorm(s.Storm)
	s.Queueing = queueing(s.Overload)
	s.GRPC = DefaultGRPCSettings(s)
	return s
}

// queueing is ov against a server that queues without bound, and answers
// 503 without work to a request that waited over a second for a worker.
func queueing(ov OverloadConfig) OverloadConfig {
	ov.Policy, ov.Unbounded, ov.MaxQueueWait = Defaults, true, time.Second
	return ov
}

// slowStorm is st against a service that takes 10-20 ms for each request
// it serves.
func slowStorm(st StormConfig) StormConfig {
	st.ServiceTime, st.ServiceSpread = 10*time.Millisecond, 10*time.Millisecond
	return st
}

// DefaultGRPCSettings are the sizes of the published gRPC results: the
// HTTP outage, storm, closed-loop and overload scenarios' shapes, and the
// demo's faults.
func DefaultGRPCSettings(s Settings) GRPCSettings {
	return GRPCSettings{
		OutageCalls: s.PolicyRequests, Callers: s.Callers, CallerCalls: s.CallerRequests, OutageTimeout: s.PolicyRequestTimeout,
		Charges: 1000, Concurrency: 16, Drop: 0.03, Reset: 0.03, Seed: s.Seed,
		Storm: s.Storm, SlowStorm: s.SlowStorm, ClosedLoop: s.ClosedLoop, Overload: s.Overload, Queueing: s.Queueing, Cost: s.Cost,
	}
}

// QuickSettings are small sizes for a smoke run of the whole suite.
func QuickSettings() Settings {
	s := DefaultSettings()
	s.DefaultsRequests, s.DefaultsWindow, s.DefaultsRequestTimeout = 2, time.Second, 500*time.Millisecond
	s.PolicyRequests, s.Callers, s.CallerRequests = 3, 3, 2
	s.PolicyRequestTimeout = 300 * time.Millisecond
	s.NestedRequests, s.NestedCallers = 1, 1
	s.ReuseRequests = 2
	s.IgnoredKeysRequests = 40
	s.Storm.Rate, s.Storm.Offer, s.Storm.Outage, s.Storm.Window = 50, 200*time.Millisecond, 100*time.Millisecond, 250*time.Millisecond
	s.Storm.Bucket = 50 * time.Millisecond
	s.Storm.RequestTimeout = 200 * time.Millisecond
	for _, st := range []*StormConfig{&s.Flap, &s.Brownout} {
		st.Rate, st.Offer, st.Outage, st.Window, st.Bucket = s.Storm.Rate, s.Storm.Offer, s.Storm.Outage, s.Storm.Window, s.Storm.Bucket
		st.FlapPeriod, st.RequestTimeout = 50*time.Millisecond, s.Storm.RequestTimeout
	}
	s.TwoHosts.Rate, s.TwoHosts.Offer, s.TwoHosts.RequestTimeout = 50, 200*time.Millisecond, 200*time.Millisecond
	s.ClosedLoop.Calls, s.ClosedLoop.RequestTimeout, s.ClosedLoop.Runs = 200, time.Second, 1
	s.Overload.Rate, s.Overload.Offer, s.Overload.TriggerAt, s.Overload.Trigger = 100, time.Second, 250*time.Millisecond, 250*time.Millisecond
	s.Overload.RequestTimeout, s.Overload.AttemptTimeout, s.Overload.Bucket = 300*time.Millisecond, 100*time.Millisecond, 125*time.Millisecond
	s.SlowStorm = slowStorm(s.Storm)
	s.Queueing = queueing(s.Overload)
	s.Queueing.MaxQueueWait = s.Overload.RequestTimeout
	s.StormPause = time.Millisecond
	s.Cost = false
	s.GRPC = DefaultGRPCSettings(s)
	s.GRPC.Charges, s.GRPC.Concurrency = 100, 4
	return s
}

// LibResult is everything measured for one library.
type LibResult struct {
	Library Library

	// Outage attempts per request; the defaults are zero for a library
	// without defaults.
	DefaultsSeq, DefaultsConc, PolicySeq, PolicyConc OutageResult
	// Nested layers; NestedDefaults only when Library.QuickDefaults.
	NestedPolicy, NestedDefaults NestedResult

	// Costs are indexed like CostCases.
	Costs []Cost

	RASeconds, RADate, RALong RetryAfterResult
	Replay                    ReplayResult
	Reuse                     ReuseResult
	IgnoredKeys               IgnoredKeysResult
	Storm, Flap, Brownout     StormResult
	SlowStorm                 StormResult
	TwoHosts                  TwoHostsResult
	// ClosedLoop is the closed-loop scenario with defaults.
	ClosedLoop ClosedLoopResult
	// OverloadDefaults and OverloadPolicy are the overload scenario with
	// each policy; Queueing is it against the server that queues without
	// bound, with the defaults.
	OverloadDefaults, OverloadPolicy, Queueing OverloadResult
}

// Results is a whole run.
type Results struct {
	Settings Settings
	Libs     []LibResult
	GRPC     GRPCResults
	Took     time.Duration
}

// Run runs every scenario on every library and logs progress to log.
func Run(ctx context.Context, s Settings, log io.Writer) Results {
	start := time.Now()
	if s.OnlyGRPC {
		return Results{Settings: s, GRPC: runGRPCLogged(ctx, s.GRPC, log), Took: time.Since(start)}
	}
	libs := Libraries()
	rs := make([]LibResult, len(libs))
	for i, l := range libs {
		rs[i].Library = l
	}
	step := func(name string, f func(r *LibResult)) {
		t := time.Now()
		parallel(rs, f)
		fmt.Fprintf(log, "%-40s %v\n", name, time.Since(t).Round(time.Millisecond))
	}
	// Cost first, while nothing else runs.
	if s.Cost {
		t := time.Now()
		costs := MeasureCosts(libs, CostCases)
		for i := range rs {
			rs[i].Costs = costs[i]
		}
		fmt.Fprintf(log, "%-40s %v\n", "library cost", time.Since(t).Round(time.Millisecond))
	}
	step("total outage, defaults", func(r *LibResult) {
		if !r.Library.HasDefaults {
			return
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			r.DefaultsSeq = Outage(ctx, r.Library, OutageConfig{Policy: Defaults, Callers: 1,
				Requests: s.DefaultsRequests, Window: s.DefaultsWindow, RequestTimeout: s.DefaultsRequestTimeout})
		})
		r.DefaultsConc = Outage(ctx, r.Library, OutageConfig{Policy: Defaults, Callers: s.Callers,
			Requests: s.CallerRequests, Window: s.DefaultsWindow, RequestTimeout: s.DefaultsRequestTimeout})
		wg.Wait()
	})
	step("total outage, 4-attempt policy", func(r *LibResult) {
		r.PolicySeq = Outage(ctx, r.Library, OutageConfig{Policy: Comparable, Callers: 1,
			Requests: s.PolicyRequests, Window: time.Minute, RequestTimeout: s.PolicyRequestTimeout})
		r.PolicyConc = Outage(ctx, r.Library, OutageConfig{Policy: Comparable, Callers: s.Callers,
			Requests: s.CallerRequests, Window: time.Minute, RequestTimeout: s.PolicyRequestTimeout})
	})
	step("three nested layers", func(r *LibResult) {
		cfg := NestedConfig{Policy: Comparable, Requests: s.NestedRequests, Callers: s.NestedCallers, RequestTimeout: s.NestedRequestTimeout}
		r.NestedPolicy = Nested(ctx, r.Library, cfg)
		if r.Library.QuickDefaults {
			cfg.Policy = Defaults
			r.NestedDefaults = Nested(ctx, r.Library, cfg)
		}
	})
	step("Retry-After, body replay, keys, reuse", func(r *LibResult) {
		r.IgnoredKeys = IgnoredKeys(ctx, r.Library, s.IgnoredKeysRequests)
		if !r.Library.Retries {
			return
		}
		// Each has its own server: they run at once.
		var wg sync.WaitGroup
		wg.Go(func() { r.RASeconds = RetryAfter(ctx, r.Library, RetryAfterSeconds, 10*time.Second) })
		wg.Go(func() { r.RADate = RetryAfter(ctx, r.Library, RetryAfterDate, 10*time.Second) })
		wg.Go(func() { r.RALong = LongRetryAfter(ctx, r.Library) })
		wg.Go(func() { r.Replay = BodyReplay(ctx, r.Library, s.Seed) })
		r.Reuse = ConnReuse(ctx, r.Library, s.ReuseRequests)
		wg.Wait()
	})
	for i := range rs {
		for _, st := range []struct {
			name string
			cfg  StormConfig
			res  *StormResult
		}{{"retry storm", s.Storm, &rs[i].Storm}, {"retry storm, slow server", s.SlowStorm, &rs[i].SlowStorm},
			{"flapping", s.Flap, &rs[i].Flap}, {"brownout", s.Brownout, &rs[i].Brownout}} {
			if st.cfg.Rate == 0 {
				continue
			}
			if !sleepCtx(ctx, s.StormPause) {
				break
			}
			t := time.Now()
			*st.res = Storm(ctx, rs[i].Library, st.cfg)
			fmt.Fprintf(log, "%-40s %v\n", st.name+", "+rs[i].Library.Name, time.Since(t).Round(time.Millisecond))
		}
		if !sleepCtx(ctx, s.StormPause) {
			break
		}
		t := time.Now()
		rs[i].TwoHosts = TwoHosts(ctx, rs[i].Library, s.TwoHosts)
		fmt.Fprintf(log, "%-40s %v\n", "two hosts, "+rs[i].Library.Name, time.Since(t).Round(time.Millisecond))
		if !sleepCtx(ctx, s.StormPause) {
			break
		}
		t = time.Now()
		rs[i].ClosedLoop = ClosedLoop(ctx, rs[i].Library, s.ClosedLoop)
		fmt.Fprintf(log, "%-40s %v\n", "closed loop, "+rs[i].Library.Name, time.Since(t).Round(time.Millisecond))
		for _, ov := range []struct {
			policy Policy
			res    *OverloadResult
		}{{Defaults, &rs[i].OverloadDefaults}, {Comparable, &rs[i].OverloadPolicy}} {
			if !sleepCtx(ctx, s.StormPause) {
				break
			}
			t := time.Now()
			cfg := s.Overload
			cfg.Policy = ov.policy
			*ov.res = Overload(ctx, rs[i].Library, cfg)
			fmt.Fprintf(log, "%-40s %v\n", "overload, "+ov.policy.String()+", "+rs[i].Library.Name, time.Since(t).Round(time.Millisecond))
		}
		if s.Queueing.Rate > 0 && sleepCtx(ctx, s.StormPause) {
			t := time.Now()
			rs[i].Queueing = Overload(ctx, rs[i].Library, s.Queueing)
			fmt.Fprintf(log, "%-40s %v\n", "overload, queueing server, "+rs[i].Library.Name, time.Since(t).Round(time.Millisecond))
		}
	}
	var grpcResults GRPCResults
	if s.GRPC.OutageCalls > 0 && sleepCtx(ctx, s.StormPause) {
		grpcResults = runGRPCLogged(ctx, s.GRPC, log)
	}
	return Results{Settings: s, Libs: rs, GRPC: grpcResults, Took: time.Since(start)}
}

// runGRPCLogged runs the gRPC scenarios, logging progress to log.
func runGRPCLogged(ctx context.Context, s GRPCSettings, log io.Writer) GRPCResults {
	return RunGRPC(ctx, s, func(name string, took time.Duration) {
		fmt.Fprintf(log, "%-40s %v\n", name, took.Round(time.Millisecond))
	})
}

// parallel calls f on every result at once and waits.
func parallel(rs []LibResult, f func(r *LibResult)) {
	var wg sync.WaitGroup
	for i := range rs {
		wg.Go(func() { f(&rs[i]) })
	}
	wg.Wait()
}
