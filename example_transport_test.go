package retry_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/backoff"
)

func ExampleNewClient() {
	var calls atomic.Int32
	var lastKey atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lastKey.Store(r.Header.Get("Idempotency-Key"))
		// A server that deduplicates keys says so by echoing the key (the
		// idempotency middleware does): a POST to it is safe to send again.
		w.Header().Set("Idempotency-Key", r.Header.Get("Idempotency-Key"))
		if calls.Add(1) < 3 {
			w.WriteHeader(http.StatusServiceUnavailable) // a blip
			return
		}
		fmt.Fprintf(w, "charged once, key present: %t", r.Header.Get("Idempotency-Key") != "")
	}))
	defer srv.Close()

	client := retry.NewClient(retry.WithTotalTimeout(5*time.Second), retry.WithBackoff(backoff.Constant(time.Millisecond)))
	var report retry.Report
	ctx := retry.NewContext(context.Background(), retry.WithReport(&report))
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL, strings.NewReader(`{"amount":100}`))
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body))
	fmt.Println(report)
	fmt.Println("reported key is the one sent:", report.IdempotencyKey == lastKey.Load())
	// Output:
	// 200 charged once, key present: true
	// 3 attempts, succeeded
	// reported key is the one sent: true
}

func ExamplePushbackMiddleware() {
	// A dependency that is down.
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer down.Close()

	// A service that calls it with its own retrying client.
	client := retry.NewClient(retry.WithBackoff(backoff.Constant(time.Millisecond)))
	svc := httptest.NewServer(retry.PushbackMiddleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), "GET", down.URL, nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
		}
		http.Error(w, "dependency unavailable", http.StatusServiceUnavailable)
	})))
	defer svc.Close()

	// Its callers learn that retrying it now would only add load.
	resp, err := http.Get(svc.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, resp.Header.Get(retry.PushbackHeader))
	// Output: 503 exhausted
}
