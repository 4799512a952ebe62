package bench

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// StormConfig sets up the retry storm: a service that answers 503 for
// Outage and then recovers, offered Rate requests per second for Offer.
type StormConfig struct {
	Policy Policy
	Rate   int
	Offer  time.Duration
	Outage time.Duration
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

// Storm runs the retry-storm scenario for lib.
func Storm(ctx context.Context, lib Library, cfg StormConfig) StormResult {
	buckets := make([]atomic.Int64, int(cfg.Window/cfg.Bucket)+1)
	var start time.Time
	begin := make(chan struct{}) // closed once start is set
	h := func(w http.ResponseWriter, _ *http.Request) {
		<-begin
		since := time.Since(start)
		if i := int(since / cfg.Bucket); i < len(buckets) {
			buckets[i].Add(1)
		}
		if since < cfg.Outage {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
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
	var (
		wg                  sync.WaitGroup
		inFlight, succeeded atomic.Int64
		res                 = StormResult{Bucket: cfg.Bucket}
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
			code, _, err := send(ctx, client, http.MethodGet, srv.URL, "s"+strconv.Itoa(i), nil, cfg.RequestTimeout)
			if err == nil && code/100 == 2 {
				succeeded.Add(1)
			}
		})
	}
	wg.Wait()
	<-ctx.Done() // the window is recorded whole
	res.Succeeded = int(succeeded.Load())
	res.Attempts = make([]int, len(buckets)-1)
	for i := range res.Attempts {
		res.Attempts[i] = int(buckets[i].Load())
	}
	return res
}
