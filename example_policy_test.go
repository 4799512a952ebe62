package retry_test

import (
	"context"
	"errors"
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

// A transport of one's own keeps its settings; the retry Transport goes
// around it.
func ExampleNewTransport() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()

	base := &http.Transport{MaxIdleConnsPerHost: 64, ResponseHeaderTimeout: 10 * time.Second}
	client := &http.Client{Transport: retry.NewTransport(base, retry.WithMaxAttempts(3))}
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.Status)
	// Output: 200 OK
}

// One request can have a policy of its own: here a call that must never
// be repeated, next to requests that are retried as usual.
func ExampleNewContext() {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()

	client := retry.NewClient(retry.WithBackoff(backoff.Constant(time.Millisecond)))
	ctx := retry.NewContext(context.Background(), retry.WithoutRetries())
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL, strings.NewReader("send the email"))
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, "after", calls.Load(), "attempt")
	// Output: 503 after 1 attempt
}

// The key goes under the header, and in the form, the server expects.
func ExampleWithKeyHeader() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("X-Request-Id")
		fmt.Fprintf(w, "a token key of %d characters", len(key))
	}))
	defer srv.Close()

	client := retry.NewClient(retry.WithKeyHeader("X-Request-Id"), retry.WithTokenKeys())
	resp, err := client.Post(srv.URL, "text/plain", strings.NewReader("charge"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(string(body))
	// Output: a token key of 36 characters
}

// An operation can ask for a wait, as a server's Retry-After does.
func ExampleRetryAfter() {
	calls := 0
	err := retry.Do(context.Background(), func(context.Context) error {
		calls++
		if calls == 1 {
			return retry.RetryAfter(10*time.Millisecond, errors.New("rate limited"))
		}
		return nil
	})
	fmt.Println(err, calls)
	// Output: <nil> 2
}

// One budget shared by every caller of one dependency bounds their retries
// together: an outage costs that dependency about one attempt per request.
func ExampleWithBudget() {
	budget := retry.NewBudget(0.1, 0, 2) // two retries to spend, no floor
	op := func(context.Context) error { return errors.New("down") }
	opts := []retry.Option{retry.WithBudget(budget), retry.WithBackoff(backoff.Constant(0)),
		retry.WithoutRideThrough()}
	for range 3 {
		retry.Do(context.Background(), op, opts...)
	}
	st := budget.Stats()
	fmt.Printf("%d retries allowed, %d denied\n", st.RetriesAllowed, st.RetriesDenied)
	// Output: 2 retries allowed, 3 denied
}

// A report tells what a call did, also when it returned a response rather
// than an error.
func ExampleWithReport() {
	var report retry.Report
	calls := 0
	err := retry.Do(context.Background(), func(context.Context) error {
		calls++
		if calls < 3 {
			return errors.New("flaky")
		}
		return nil
	}, retry.WithReport(&report), retry.WithBackoff(backoff.Constant(0)))
	fmt.Println(err, report)
	// Output: <nil> 3 attempts, succeeded
}
