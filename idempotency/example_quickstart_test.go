package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/exactlyonce/retry/idempotency"
)

// authenticatedUser is the quick start's authentication: the caller a
// request comes from.
func authenticatedUser(r *http.Request) (string, error) {
	user, _, ok := r.BasicAuth()
	if !ok {
		return "", errors.New("no credentials")
	}
	return user, nil
}

// valid is the quick start's validation of a charge.
func valid(r *http.Request) bool { return r.ContentLength > 0 }

// charges counts the quick start's charges.
var charges int

// chargeCard is the quick start's effect.
func chargeCard(context.Context) { charges++ }

// The README's quick start: a handler behind the Middleware. A retry of
// the same charge is replayed, not charged again.
func Example_quickStart() {
	mux := http.NewServeMux()

	runner := idempotency.NewRunner(nil) // in-memory store; pgstore for many instances
	callerOf := func(r *http.Request) (string, error) { return authenticatedUser(r) }
	mux.Handle("POST /charges", idempotency.Middleware(runner, callerOf)(http.HandlerFunc(
		func(w http.ResponseWriter, r *http.Request) {
			if !valid(r) {
				http.Error(w, "bad charge", http.StatusBadRequest) // not stored: a fixed retry runs
				return
			}
			idempotency.MarkStarted(r.Context()) // from here on, the outcome is stored
			chargeCard(r.Context())
			w.WriteHeader(http.StatusCreated)
		})))

	for range 2 {
		r := httptest.NewRequest(http.MethodPost, "/charges", strings.NewReader(`{"amount":100}`))
		r.SetBasicAuth("alice", "secret")
		r.Header.Set("Idempotency-Key", `"charge-1"`)
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		fmt.Println(w.Code, "replayed:", w.Header().Get("Idempotent-Replayed") == "true")
	}
	fmt.Println("charges:", charges)
	// Output:
	// 201 replayed: false
	// 201 replayed: true
	// charges: 1
}

// The server guide's reconciler: the Middleware stores what it needs to
// serve a request again, and a Reconciler on every instance finishes
// what a crash left.
func Example_reconciler() {
	runner := idempotency.NewRunner(nil)
	callerOf := func(r *http.Request) (string, error) { return authenticatedUser(r) }

	mw := idempotency.Middleware(runner, callerOf, idempotency.WithResume("charges", "Content-Type"))
	reconciler := idempotency.StartReconciler(runner, idempotency.ReconcilerConfig{}) // every 10 s
	defer reconciler.Stop()

	_ = mw
}
