package bench

import (
	"context"
	"math"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// StormKind is the shape of a storm's bad period.
type StormKind int

const (
	// StormOutage: the service answers 503 for the whole bad period.
	StormOutage StormKind = iota
	// StormFlap: the service is down for half of every FlapPeriod and up
	// for the other half, for the bad period.
	StormFlap
	// StormBrownout: BrownoutRate of the attempts, at random, get a 503
	// during the bad period.
	StormBrownout
)

// StormConfig sets up a storm: a service that fails for its first Outage
// (the bad period) as Kind says, then recovers, offered Rate requests per
// second for Offer.
type StormConfig struct {
	Kind   StormKind
	Policy Policy
	Rate   int
	Offer  time.Duration
	// Outage is the bad period, from the start.
	Outage time.Duration
	// FlapPeriod is a flap's down and up time (StormFlap).
	FlapPeriod time.Duration
	// BrownoutRate is the share of attempts that fail (StormBrownout).
	BrownoutRate float64
	// ServiceTime is how long the service takes for each attempt it
	// serves (not for those it refuses in the bad period), plus a part of
	// ServiceSpread by a fixed pseudo-random sequence: with 10 ms and
	// 10 ms, 10-20 ms. Zero answers at once.
	ServiceTime, ServiceSpread time.Duration
	// Window is how long attempts are recorded, from the start (at least
	// Offer); requests still running at its end are cancelled.
	Window time.Duration
	// Bucket is the width of one point of the time series.
	Bucket time.Duration
	// RequestTimeout is each request's deadline.
	RequestTimeout time.Duration
	// MaxInFlight bounds the requests running at once; a request due
	// while it is reached is not sent (counted in Skipped).
	MaxInFlight int
}

// StormResult is the time series of attempts and the totals.
type StormResult struct {
	Bucket time.Duration
	// Attempts[i] counts the attempts that reached the service during
	// bucket i.
	Attempts []int
	// Requests were sent, Succeeded got a 2xx, Skipped were not sent.
	Requests, Succeeded, Skipped int
	// After holds how long each request offered after the bad period
	// took, in the order they ended.
	After []time.Duration
}

// AfterQuantile returns the q-quantile (0 < q <= 1) of the time taken by
// requests offered after the bad period, 0 for none.
func (r StormResult) AfterQuantile(q float64) time.Duration {
	if len(r.After) == 0 {
		return 0
	}
	s := slices.Clone(r.After)
	slices.Sort(s)
	return s[min(len(s)-1, int(math.Ceil(q*float64(len(s))))-1)]
}

// PerSecond returns the attempts of bucket i as a rate.
func (r StormResult) PerSecond(i int) float64 {
	return float64(r.Attempts[i]) / r.Bucket.Seconds()
}

// Total is the number of attempts in the window.
func (r StormResult) Total() int {
	n := 0
	for _, a := range r.Attempts {
		n += a
	}
	return n
}

// Peak is the largest rate of attempts in one bucket.
func (r StormResult) Peak() float64 {
	var p float64
	for i := range r.Attempts {
		p = max(p, r.PerSecond(i))
	}
	return p
}

// OutageAttempts is the number of attempts during the outage.
func (r StormResult) OutageAttempts(outage time.Duration) int {
	n := 0
	for i, a := range r.Attempts {
		if time.Duration(i+1)*r.Bucket <= outage {
			n += a
		}
	}
	return n
}

// fails reports whether the attempt that arrives since after the start, the
// n-th, gets a 503.
func (cfg StormConfig) fails(since time.Duration, n uint64) bool {
	if since >= cfg.Outage {
		return false
	}
	switch cfg.Kind {
	case StormFlap:
		return since%cfg.FlapPeriod < cfg.FlapPeriod/2
	case StormBrownout:
		return float64(splitmix(n)%1_000_000) < cfg.BrownoutRate*1_000_000
	}
	return true
}

// serviceTime is how long the service takes for the n-th attempt, when it
// serves it.
func (cfg StormConfig) serviceTime(n uint64) time.Duration {
	if cfg.ServiceSpread <= 0 {
		return cfg.ServiceTime
	}
	return cfg.ServiceTime + time.Duration(splitmix(^n)%uint64(cfg.ServiceSpread+1))
}

// splitmix is a fixed pseudo-random sequence: the same attempts fail in
// every library's run.
func splitmix(n uint64) uint64 {
	z := n*0x9e3779b97f4a7c15 + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// offer makes cfg.Rate calls a second for cfg.Offer from start, each on a
// goroutine of its own, never more than cfg.MaxInFlight at once (a call
// due while they run is skipped), and waits for them; call makes call i
// and reports whether it succeeded. It counts them in res, and keeps how
// long each call offered after the bad period took.
func (cfg StormConfig) offer(ctx context.Context, start time.Time, res *StormResult, call func(ctx context.Context, i int) bool) {
	var (
		wg                  sync.WaitGroup
		inFlight, succeeded atomic.Int64
		mu                  sync.Mutex
	)
	total := int(cfg.Offer.Seconds() * float64(cfg.Rate))
	for i := range total {
		due := start.Add(time.Duration(i) * time.Second / time.Duration(cfg.Rate))
		if d := time.Until(due); d > 0 && !sleepCtx(ctx, d) {
			break
		}
		if inFlight.Load() >= int64(cfg.MaxInFlight) {
			res.Skipped++
			continue
		}
		res.Requests++
		inFlight.Add(1)
		wg.Go(func() {
			defer inFlight.Add(-1)
			began := time.Now()
			if call(ctx, i) {
				succeeded.Add(1)
			}
			if due.Sub(start) >= cfg.Outage {
				took := time.Since(began)
				mu.Lock()
				res.After = append(res.After, took)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res.Succeeded = int(succeeded.Load())
}

// Storm runs a storm scenario for lib.
func Storm(ctx context.Context, lib Library, cfg StormConfig) StormResult {
	buckets := make([]atomic.Int64, int(cfg.Window/cfg.Bucket)+1)
	var start time.Time
	var arrived atomic.Uint64
	begin := make(chan struct{}) // closed once start is set
	h := func(w http.ResponseWriter, _ *http.Request) {
		<-begin
		since := time.Since(start)
		if i := int(since / cfg.Bucket); i < len(buckets) {
			buckets[i].Add(1)
		}
		n := arrived.Add(1)
		if cfg.fails(since, n) {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		if d := cfg.serviceTime(n); d > 0 {
			time.Sleep(d)
		}
		w.WriteHeader(http.StatusOK)
	}
	srv := NewServer(h, false)
	defer srv.Close()
	tr := newTransport()
	tr.MaxIdleConnsPerHost = 256
	defer tr.CloseIdleConnections()
	client := lib.New(cfg.Policy, tr)

	ctx, cancel := context.WithTimeout(ctx, cfg.Window)
	defer cancel()
	start = time.Now()
	close(begin)
	res := StormResult{Bucket: cfg.Bucket}
	cfg.offer(ctx, start, &res, func(ctx context.Context, i int) bool {
		code, _, err := send(ctx, client, http.MethodGet, srv.URL, "s"+strconv.Itoa(i), nil, cfg.RequestTimeout)
		return err == nil && code/100 == 2
	})
	<-ctx.Done() // the window is recorded whole
	res.Attempts = make([]int, len(buckets)-1)
	for i := range res.Attempts {
		res.Attempts[i] = int(buckets[i].Load())
	}
	return res
}
