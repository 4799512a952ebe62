package bench

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
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
	// Sent is every attempt that reached the server, those after the last
	// bucket included; Served is the work the server finished; Wasted the
	// part of it whose caller had already gone.
	Sent, Served, Wasted int
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

// AttemptsPerRequest is the attempts that reached the server per request
// offered.
func (r OverloadResult) AttemptsPerRequest() float64 {
	var o int
	for i := range r.Offered {
		o += r.Offered[i]
	}
	if o == 0 {
		return 0
	}
	return float64(r.Sent) / float64(o)
}

// WastedShare is the share of the server's finished work nobody waited for.
func (r OverloadResult) WastedShare() float64 { return share(r.Served, r.Wasted) }

// capacityServer is a server of a few workers and a bounded queue whose
// work is not cut short when its caller leaves.
type capacityServer struct {
	cfg     OverloadConfig
	start   time.Time
	slots   chan struct{} // a token per request admitted (queued or served)
	workers chan struct{} // a token per busy worker
	// attempts counts arrivals per bucket, sent all of them.
	attempts             []atomic.Int64
	sent, served, wasted atomic.Int64
}

func newCapacityServer(cfg OverloadConfig, buckets int) *capacityServer {
	return &capacityServer{
		cfg:      cfg,
		slots:    make(chan struct{}, cfg.Workers+cfg.Queue),
		workers:  make(chan struct{}, cfg.Workers),
		attempts: make([]atomic.Int64, buckets),
	}
}

// serviceTime is how long a request that starts at since takes.
func (s *capacityServer) serviceTime(since time.Duration) time.Duration {
	if since >= s.cfg.TriggerAt && since < s.cfg.triggerEnd() {
		return s.cfg.ServiceTime * time.Duration(s.cfg.Slowdown)
	}
	return s.cfg.ServiceTime
}

// ServeHTTP admits the request to the queue, waits for a worker, and holds
// it for the service time, whether or not its caller is still there.
func (s *capacityServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.sent.Add(1)
	if i := int(time.Since(s.start) / s.cfg.Bucket); i >= 0 && i < len(s.attempts) {
		s.attempts[i].Add(1)
	}
	select {
	case s.slots <- struct{}{}:
	default:
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	defer func() { <-s.slots }()
	s.workers <- struct{}{}
	time.Sleep(s.serviceTime(time.Since(s.start)))
	<-s.workers
	s.served.Add(1)
	if r.Context().Err() != nil {
		s.wasted.Add(1)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// Overload runs the overload scenario for lib with the configured policy
// and attempt timeout: ours through WithAttemptTimeout, every
// other retrying library through a base transport that bounds each attempt
// (its documented way, an http.Client.Timeout, does the same per attempt).
func Overload(ctx context.Context, lib Library, cfg OverloadConfig) OverloadResult {
	buckets := int(cfg.Offer/cfg.Bucket) + 1
	srv := newCapacityServer(cfg, buckets)
	start := time.Now()
	srv.start = start
	ts := NewServer(srv.ServeHTTP, false)
	defer ts.Close()
	tr := newTransport()
	tr.MaxIdleConnsPerHost = 512
	defer tr.CloseIdleConnections()
	client := lib.NewBounded(cfg.Policy, tr, cfg.AttemptTimeout)

	offered := make([]atomic.Int64, buckets)
	succeeded := make([]atomic.Int64, buckets)
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
		offered[b].Add(1)
		if inFlight.Load() >= int64(cfg.MaxInFlight) {
			continue
		}
		inFlight.Add(1)
		wg.Go(func() {
			defer inFlight.Add(-1)
			code, _, err := send(ctx, client, http.MethodGet, ts.URL, "o"+strconv.Itoa(i), nil, cfg.RequestTimeout)
			if err == nil && code/100 == 2 {
				succeeded[b].Add(1)
			}
		})
	}
	wg.Wait()
	ts.Close() // waits for the work still queued: all of it is counted
	res := OverloadResult{
		Bucket: cfg.Bucket, TriggerAt: cfg.TriggerAt, TriggerEnd: cfg.triggerEnd(), Offer: cfg.Offer,
		Offered: make([]int, buckets-1), Succeeded: make([]int, buckets-1), Attempts: make([]int, buckets-1),
	}
	for i := range res.Offered {
		res.Offered[i] = int(offered[i].Load())
		res.Succeeded[i] = int(succeeded[i].Load())
		res.Attempts[i] = int(srv.attempts[i].Load())
	}
	res.Sent, res.Served, res.Wasted = int(srv.sent.Load()), int(srv.served.Load()), int(srv.wasted.Load())
	return res
}
