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
