package pushback_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/backoff"
	"github.com/exactlyonce/retry/pushback"
)

func ExampleMiddleware() {
	// A dependency that is down.
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer down.Close()

	// A service that calls it with its own retrying client.
	client := retry.NewClient(retry.WithBackoff(backoff.Constant(time.Millisecond)))
	svc := httptest.NewServer(pushback.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
	fmt.Println(resp.StatusCode, resp.Header.Get(pushback.Header))
	// Output: 503 exhausted
}

// An interceptor of another protocol (module grpcretry's) gives each call a
// context from NewContext and reads Value once the handler returns.
func ExampleValue() {
	ctx := pushback.NewContext(context.Background())
	err := retry.Do(ctx, func(context.Context) error { return errors.New("down") },
		retry.WithBackoff(backoff.Constant(time.Millisecond)))
	fmt.Println(err != nil, pushback.Value(ctx))
	// Output: true exhausted
}
