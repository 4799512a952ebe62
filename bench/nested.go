package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"
)

// NestedConfig sets up three services chained in front of a dependency that
// always answers 503: the caller calls service 1, which calls service 2,
// which calls the innermost; each call goes through the library under test.
type NestedConfig struct {
	Policy Policy
	// Requests is the number of top-level requests, sent by Callers
	// concurrent callers.
	Requests, Callers int
	// RequestTimeout is each top-level request's deadline.
	RequestTimeout time.Duration
}

// NestedResult counts the innermost attempts.
type NestedResult struct {
	Requests  int
	Innermost int
}

// PerRequest is the number of innermost attempts per top-level request.
func (r NestedResult) PerRequest() float64 {
	if r.Requests == 0 {
		return 0
	}
	return float64(r.Innermost) / float64(r.Requests)
}

// Nested runs the nested-layers scenario for lib.
func Nested(ctx context.Context, lib Library, cfg NestedConfig) NestedResult {
	inner := NewServer(Unavailable, false)
	defer inner.Close()
	next := inner.URL
	for range 2 {
		svc, closeSvc := newRelay(lib, cfg.Policy, next)
		defer closeSvc()
		next = svc.URL
	}
	tr := newTransport()
	defer tr.CloseIdleConnections()
	client := lib.New(cfg.Policy, tr)

	jobs := make(chan int)
	var wg sync.WaitGroup
	for range cfg.Callers {
		wg.Go(func() {
			for i := range jobs {
				send(ctx, client, http.MethodGet, next, fmt.Sprint("top-", i), nil, cfg.RequestTimeout)
			}
		})
	}
	sent := 0
feed:
	for i := range cfg.Requests {
		select {
		case jobs <- i:
			sent++
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	return NestedResult{Requests: sent, Innermost: int(inner.Attempts())}
}

// newRelay starts a service that answers each request by calling next with
// the library under test, using the request's context, and passing on a
// failure as 503. The library's own server middleware wraps it.
func newRelay(lib Library, p Policy, next string) (*httptest.Server, func()) {
	tr := newTransport()
	client := lib.New(p, tr)
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, next, nil)
		if err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		resp, err := client.Do(req)
		if err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if resp.StatusCode >= 500 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(resp.StatusCode)
	})
	if lib.Middleware != nil {
		h = lib.Middleware(h)
	}
	srv := httptest.NewServer(h)
	return srv, func() {
		srv.Close()
		tr.CloseIdleConnections()
	}
}
