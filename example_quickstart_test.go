package retry_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/exactlyonce/retry"
)

// The README's quick start: a client whose POSTs carry a key.
func Example_quickStart() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println("key sent:", r.Header.Get("Idempotency-Key") != "")
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	url, payload := srv.URL, []byte(`{"amount":100}`)

	client := retry.NewClient(retry.WithTotalTimeout(5 * time.Second))
	// GETs and PUTs retry on 502/503/504/429 and network failures; POSTs carry an
	// Idempotency-Key that stays the same on every attempt.
	resp, err := client.Post(url, "application/json", bytes.NewReader(payload))

	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode)
	// Output:
	// key sent: true
	// 201
}

// account is the quick start's account service.
type account struct{ calls int }

// Balance fails once, as a flaky service does.
func (a *account) Balance(context.Context) (int, error) {
	a.calls++
	if a.calls == 1 {
		return 0, fmt.Errorf("connection reset")
	}
	return 42, nil
}

// The README's quick start: any other operation, retried.
func Example_quickStartDo() {
	ctx := context.Background()
	account := &account{}

	balance, err := retry.DoValue(ctx, func(ctx context.Context) (int, error) {
		return account.Balance(ctx)
	}, retry.WithMaxAttempts(5), retry.WithTotalTimeout(2*time.Second))

	fmt.Println(balance, err)
	// Output: 42 <nil>
}
