package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// OutageConfig sets up the total-outage scenario: a server that always
// answers 503.
type OutageConfig struct {
	Policy Policy
	// Callers is the number of concurrent callers (1: sequential).
	Callers int
	// Requests is the most requests each caller sends, one after another.
	Requests int
	// Window bounds the whole run: no request starts after it, and one cut
	// short by it is not counted.
	Window time.Duration
	// RequestTimeout is each request's deadline.
	RequestTimeout time.Duration
}

// OutageResult counts the completed requests and their attempts.
type OutageResult struct {
	Requests int
	Attempts int
	// Cut is the number of requests still running when the window closed.
	Cut int
}

// PerRequest is the average number of attempts per completed request.
func (r OutageResult) PerRequest() float64 {
	if r.Requests == 0 {
		return 0
	}
	return float64(r.Attempts) / float64(r.Requests)
}

// Outage runs the total-outage scenario for lib.
func Outage(ctx context.Context, lib Library, cfg OutageConfig) OutageResult {
	srv := NewServer(Unavailable, false)
	defer srv.Close()
	tr := newTransport()
	defer tr.CloseIdleConnections()
	client := lib.New(cfg.Policy, tr)

	window, cancel := context.WithTimeout(ctx, cfg.Window)
	defer cancel()
	var (
		mu  sync.Mutex
		res OutageResult
		wg  sync.WaitGroup
	)
	for c := range cfg.Callers {
		wg.Go(func() {
			for i := range cfg.Requests {
				if window.Err() != nil {
					return
				}
				id := fmt.Sprintf("c%d-r%d", c, i)
				send(window, client, http.MethodGet, srv.URL, id, nil, cfg.RequestTimeout)
				mu.Lock()
				if window.Err() != nil {
					res.Cut++
				} else {
					res.Requests++
					res.Attempts += srv.AttemptsOf(id)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return res
}

// send makes one logical request with client and reads and closes the
// response; it returns the final status (0 on error), the time it took and
// the error.
func send(ctx context.Context, client Client, method, url, id string, body []byte, timeout time.Duration) (int, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := newRequest(ctx, method, url, id, body)
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	resp, err := client.Do(req)
	took := time.Since(start)
	if err != nil {
		return 0, took, err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	return resp.StatusCode, took, nil
}
