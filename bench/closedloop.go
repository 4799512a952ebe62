package bench

import (
	"cmp"
	"context"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/exactlyonce/retry"
)

// ClosedLoopConfig sets up callers in a closed loop (each sends its next
// call when its last one returned, as worker pools and batch jobs do) to a
// server that takes ServiceTime per call and, now and then, cuts
// connections: after every CutEvery-th attempt it closes the connections
// of the next CutLength attempts without an answer.
type ClosedLoopConfig struct {
	Callers, Calls      int
	ServiceTime         time.Duration
	CutEvery, CutLength int
	RequestTimeout      time.Duration
	// Runs is how many times the scenario runs (at least once); the
	// result is the run of median length. A run's length hangs on the
	// backoff's jitter of a few unlucky calls: one run alone varies by a
	// third from one to the next.
	Runs int
}

// ClosedLoopResult is how long the calls took in all and how many succeeded.
type ClosedLoopResult struct {
	Took                       time.Duration
	Calls, Succeeded, Attempts int
	// Off is the same run with riding through off (ours only).
	Off *ClosedLoopResult
}

// cut reports whether the n-th attempt (from 1) falls in a cut.
func (cfg ClosedLoopConfig) cut(n int64) bool {
	if cfg.CutEvery <= 0 {
		return false
	}
	period := int64(cfg.CutEvery + cfg.CutLength)
	return (n-1)%period >= int64(cfg.CutEvery)
}

// ClosedLoop runs the closed-loop scenario for lib with its defaults,
// cfg.Runs times, and returns the run of median length; for ours, each run
// once more with riding through off.
func ClosedLoop(ctx context.Context, lib Library, cfg ClosedLoopConfig) ClosedLoopResult {
	on := func() ClosedLoopResult {
		return closedLoop(ctx, func(base http.RoundTripper) Client { return lib.New(Defaults, base) }, cfg)
	}
	if !isOursLib(lib) {
		return cfg.median(on, nil)
	}
	return cfg.median(on, func() ClosedLoopResult {
		return closedLoop(ctx, func(base http.RoundTripper) Client {
			return &http.Client{Transport: retry.NewTransport(base, retry.WithoutRideThrough())}
		}, cfg)
	})
}

// median runs on cfg.Runs times, and off (if not nil) as often, each
// right after on, and returns on's run of median length with off's in Off.
func (cfg ClosedLoopConfig) median(on, off func() ClosedLoopResult) ClosedLoopResult {
	var ons, offs []ClosedLoopResult
	for range max(cfg.Runs, 1) {
		ons = append(ons, on())
		if off != nil {
			offs = append(offs, off())
		}
	}
	res := medianRun(ons)
	if off != nil {
		o := medianRun(offs)
		res.Off = &o
	}
	return res
}

// medianRun returns the run of median length (the shorter of the two in
// the middle of an even number).
func medianRun(runs []ClosedLoopResult) ClosedLoopResult {
	slices.SortFunc(runs, func(a, b ClosedLoopResult) int { return cmp.Compare(a.Took, b.Took) })
	return runs[(len(runs)-1)/2]
}

// isOursLib reports whether l is this module's client.
func isOursLib(l Library) bool { return l.Bounded != nil }

func closedLoop(ctx context.Context, newClient func(http.RoundTripper) Client, cfg ClosedLoopConfig) ClosedLoopResult {
	var arrived atomic.Int64
	srv := NewServer(func(w http.ResponseWriter, _ *http.Request) {
		if cfg.cut(arrived.Add(1)) {
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				conn.Close()
			}
			return
		}
		time.Sleep(cfg.ServiceTime)
		w.WriteHeader(http.StatusOK)
	}, false)
	defer srv.Close()
	tr := newTransport()
	defer tr.CloseIdleConnections()
	client := newClient(tr)
	took, succeeded := cfg.drive(ctx, func(ctx context.Context, i int64) bool {
		code, _, err := send(ctx, client, http.MethodGet, srv.URL, "c"+strconv.FormatInt(i, 10), nil, cfg.RequestTimeout)
		return err == nil && code/100 == 2
	})
	return ClosedLoopResult{Took: took, Calls: cfg.Calls, Succeeded: succeeded, Attempts: int(srv.Attempts())}
}

// drive runs cfg.Callers callers in a closed loop until cfg.Calls calls
// were made; call makes call i (from 1) and reports whether it succeeded.
// It returns how long the calls took in all and how many succeeded.
func (cfg ClosedLoopConfig) drive(ctx context.Context, call func(ctx context.Context, i int64) bool) (time.Duration, int) {
	var (
		wg        sync.WaitGroup
		next      atomic.Int64
		succeeded atomic.Int64
	)
	start := time.Now()
	for range cfg.Callers {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(cfg.Calls) || ctx.Err() != nil {
					return
				}
				if call(ctx, i) {
					succeeded.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start), int(succeeded.Load())
}
