package bench

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// TwoHostsConfig sets up one client calling two services at once: one down
// (503 throughout), the other healthy but for BlipRate of its attempts, at
// random, answered 503. Each is offered Rate requests per second for Offer.
type TwoHostsConfig struct {
	Policy         Policy
	Rate           int
	Offer          time.Duration
	BlipRate       float64
	RequestTimeout time.Duration
}

// TwoHostsResult counts each service's requests, successes and attempts.
type TwoHostsResult struct {
	Down, Healthy HostResult
}

// HostResult is what one service of the two saw.
type HostResult struct {
	Requests, Succeeded, Attempts int
}

// TwoHosts runs the two-host scenario for lib: whether one host's outage
// (and what it does to a budget the client shares) costs the healthy host's
// requests, and how much load the dead host gets meanwhile.
func TwoHosts(ctx context.Context, lib Library, cfg TwoHostsConfig) TwoHostsResult {
	var blips atomic.Uint64
	down := NewServer(Unavailable, false)
	defer down.Close()
	healthy := NewServer(func(w http.ResponseWriter, _ *http.Request) {
		if float64(splitmix(blips.Add(1))%1_000_000) < cfg.BlipRate*1_000_000 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}, false)
	defer healthy.Close()
	tr := newTransport()
	tr.MaxIdleConnsPerHost = 256
	defer tr.CloseIdleConnections()
	client := lib.New(cfg.Policy, tr)

	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		res   TwoHostsResult
		start = time.Now()
	)
	total := int(cfg.Offer.Seconds() * float64(cfg.Rate))
	for i := range total {
		if d := time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(cfg.Rate))); d > 0 && !sleepCtx(ctx, d) {
			break
		}
		for _, h := range []struct {
			srv *Server
			res *HostResult
		}{{down, &res.Down}, {healthy, &res.Healthy}} {
			wg.Go(func() {
				code, _, err := send(ctx, client, http.MethodGet, h.srv.URL, "t"+strconv.Itoa(i), nil, cfg.RequestTimeout)
				mu.Lock()
				defer mu.Unlock()
				h.res.Requests++
				if err == nil && code/100 == 2 {
					h.res.Succeeded++
				}
			})
		}
	}
	wg.Wait()
	res.Down.Attempts, res.Healthy.Attempts = int(down.Attempts()), int(healthy.Attempts())
	return res
}
