package bench

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/exactlyonce/retry"
)

// OverloadConfig sets up the metastable-failure scenario (DESIGN.md
// section 8): a server with finite capacity, Workers that each take
// ServiceTime per request, and a queue in front of them of at most Queue
// requests (a request that finds it full gets 503 at once). Its work goes
// on after the caller gave up, as a real server's does. From TriggerAt,
// for Trigger, the service time is multiplied by Slowdown. Requests arrive
// open-loop, Rate a second for Offer, each with RequestTimeout in all and
// AttemptTimeout per attempt.
type OverloadConfig struct {
	Policy      Policy
	Workers     int
	ServiceTime time.Duration
	Queue       int
	Rate        int
	Offer       time.Duration
	TriggerAt   time.Duration
	Trigger     time.Duration
	Slowdown    int
	// RequestTimeout is each request's deadline; AttemptTimeout bounds
	// each of its attempts, for every library that retries (a client that
	// never retries sends its one attempt with the request's deadline).
	RequestTimeout, AttemptTimeout time.Duration
	// Bucket is the width of one point of the time series.
	Bucket time.Duration
	// MaxInFlight bounds the requests running at once; a request due
	// while it is reached is not sent (it counts as failed).
	MaxInFlight int
	// Unbounded makes the server one that queues without bound instead
	// (Queue does not apply): every request waits for a worker, in order
	// of arrival, and one that waited longer than MaxQueueWait for it is
	// answered 503 without work.
	Unbounded    bool
	MaxQueueWait time.Duration
}

// Capacity is the requests a second the server serves at its usual
// service time.
func (cfg OverloadConfig) Capacity() float64 {
	if cfg.ServiceTime <= 0 {
		return 0
	}
	return float64(cfg.Workers) / cfg.ServiceTime.Seconds()
}

// triggerEnd is when the slowdown ends, from the start.
func (cfg OverloadConfig) triggerEnd() time.Duration { return cfg.TriggerAt + cfg.Trigger }

// OverloadResult is what the overload scenario measured for one library,
// bucketed by the time a request was offered (Offered, Succeeded) or an
// attempt reached the server (Attempts).
type OverloadResult struct {
	Bucket                       time.Duration
	Offered, Succeeded, Attempts []int
	TriggerAt, TriggerEnd, Offer time.Duration
	// Served is the work the server finished; Wasted the part of it whose
	// caller had already gone.
	Served, Wasted int
	// Arrived counts every attempt that reached the server, those after
	// the series' last bucket included (retries of requests offered last).
	Arrived int
	// Outages is how many times the client took the server as down, and
	// Overloads as overloaded (ours alone tells; -1 for a client that
	// does not).
	Outages, Overloads int
}

// window sums the requests offered and succeeded in buckets [from, to).
func (r OverloadResult) window(from, to time.Duration) (offered, succeeded int) {
	for i := int(from / r.Bucket); i < len(r.Offered) && time.Duration(i)*r.Bucket < to; i++ {
		offered += r.Offered[i]
		succeeded += r.Succeeded[i]
	}
	return offered, succeeded
}

// share is succeeded/offered, 0 for nothing offered.
func share(offered, succeeded int) float64 {
	if offered == 0 {
		return 0
	}
	return float64(succeeded) / float64(offered)
}

// Before, During and After are the shares of requests offered before, during
// and after the trigger that succeeded.
func (r OverloadResult) Before() float64 { return share(r.window(0, r.TriggerAt)) }

// During is the share of requests offered during the trigger that succeeded.
func (r OverloadResult) During() float64 { return share(r.window(r.TriggerAt, r.TriggerEnd)) }

// After is the share of requests offered after the trigger that succeeded.
func (r OverloadResult) After() float64 { return share(r.window(r.TriggerEnd, r.Offer)) }

// Recovery is how long after the trigger's end the share of requests that
// succeed is back to 95% and stays there for every later bucket; false if
// it never is.
func (r OverloadResult) Recovery() (time.Duration, bool) {
	first := int(r.TriggerEnd / r.Bucket)
	last := int(r.Offer/r.Bucket) - 1
	recovered := -1
	for i := last; i >= first; i-- {
		if r.Offered[i] > 0 && share(r.Offered[i], r.Succeeded[i]) < 0.95 {
			break
		}
		recovered = i
	}
	if recovered < 0 {
		return 0, false
	}
	return max(0, time.Duration(recovered)*r.Bucket-r.TriggerEnd), true
}

// PeakRate is the largest rate of attempts reaching the server in one bucket.
func (r OverloadResult) PeakRate() float64 {
	var p int
	for _, a := range r.Attempts {
		p = max(p, a)
	}
	return float64(p) / r.Bucket.Seconds()
}

// PeakRateFrom is the largest rate of attempts reaching the server over
// width (a whole number of buckets), from the bucket of from on.
func (r OverloadResult) PeakRateFrom(from, width time.Duration) float64 {
	n := max(int(width/r.Bucket), 1)
	var p int
	for i := int(from / r.Bucket); i+n <= len(r.Attempts); i++ {
		sum := 0
		for _, a := range r.Attempts[i : i+n] {
			sum += a
		}
		p = max(p, sum)
	}
	return float64(p) / (time.Duration(n) * r.Bucket).Seconds()
}

// AttemptsPerRequest is the attempts that reached the server (all of
// them, Arrived) per request offered.
func (r OverloadResult) AttemptsPerRequest() float64 {
	var o int
	for i := range r.Offered {
		o += r.Offered[i]
	}
	if o == 0 {
		return 0
	}
	return float64(r.Arrived) / float64(o)
}

// WastedShare is the share of the server's finished work nobody waited for.
func (r OverloadResult) WastedShare() float64 { return share(r.Served, r.Wasted) }

// capacityHandler answers HTTP requests with pool's work: 503 at once
// when its queue is full, 200 once the work is done.
func capacityHandler(pool *capacityPool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !pool.serve(r.Context()) {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		if r.Context().Err() == nil {
			w.WriteHeader(http.StatusOK)
		}
	}
}

// buckets is the number of buckets the run's series has, one more than
// the offer's (for arrivals after it).
func (cfg OverloadConfig) buckets() int { return int(cfg.Offer/cfg.Bucket) + 1 }

// offer makes cfg.Rate requests a second for cfg.Offer from start,
// open-loop, each on a goroutine of its own (a request due while
// cfg.MaxInFlight run is not sent: it fails), and waits for them; call
// makes request i and reports whether it succeeded. It returns the
// requests offered and succeeded per bucket of the time they were due.
func (cfg OverloadConfig) offer(ctx context.Context, start time.Time, call func(ctx context.Context, i int) bool) (offered, succeeded []int) {
	n := cfg.buckets()
	offers := make([]atomic.Int64, n)
	successes := make([]atomic.Int64, n)
	var (
		wg       sync.WaitGroup
		inFlight atomic.Int64
	)
	total := int(cfg.Offer.Seconds() * float64(cfg.Rate))
	for i := range total {
		due := time.Duration(i) * time.Second / time.Duration(cfg.Rate)
		if d := time.Until(start.Add(due)); d > 0 && !sleepCtx(ctx, d) {
			break
		}
		b := int(due / cfg.Bucket)
		offers[b].Add(1)
		if inFlight.Load() >= int64(cfg.MaxInFlight) {
			continue
		}
		inFlight.Add(1)
		wg.Go(func() {
			defer inFlight.Add(-1)
			if call(ctx, i) {
				successes[b].Add(1)
			}
		})
	}
	wg.Wait()
	offered, succeeded = make([]int, n-1), make([]int, n-1)
	for i := range offered {
		offered[i], succeeded[i] = int(offers[i].Load()), int(successes[i].Load())
	}
	return offered, succeeded
}

// Overload runs the overload scenario for lib with the configured policy
// and attempt timeout: ours through WithAttemptTimeout, every
// other retrying library through a base transport that bounds each attempt
// (its documented way, an http.Client.Timeout, does the same per attempt).
func Overload(ctx context.Context, lib Library, cfg OverloadConfig) OverloadResult {
	pool := newCapacityPool(cfg, cfg.buckets())
	start := time.Now()
	pool.start = start
	ts := NewServer(capacityHandler(pool), false)
	defer ts.Close()
	tr := newTransport()
	tr.MaxIdleConnsPerHost = 512
	defer tr.CloseIdleConnections()
	client := lib.NewBounded(cfg.Policy, tr, cfg.AttemptTimeout)

	offered, succeeded := cfg.offer(ctx, start, func(ctx context.Context, i int) bool {
		code, _, err := send(ctx, client, http.MethodGet, ts.URL, "o"+strconv.Itoa(i), nil, cfg.RequestTimeout)
		return err == nil && code/100 == 2
	})
	ts.Close() // waits for the work still queued: all of it is counted
	res := pool.result(offered, succeeded)
	res.Outages, res.Overloads = outagesOf(client)
	return res
}

// dependencies is what a client that tells what it knows of its hosts has.
type dependencies interface {
	Dependencies() []retry.DependencyStats
}

// outagesOf is how many times client took a host as down, and as
// overloaded; -1 if it does not tell.
func outagesOf(client any) (outages, overloads int) {
	if hc, ok := client.(*http.Client); ok {
		client = hc.Transport
	}
	d, ok := client.(dependencies)
	if !ok {
		return -1, -1
	}
	return sumOutages(d.Dependencies())
}

// sumOutages adds up the outages and overloads of every host.
func sumOutages(stats []retry.DependencyStats) (outages, overloads int) {
	for _, st := range stats {
		outages += int(st.Outages)
		overloads += int(st.Overloads)
	}
	return outages, overloads
}
