package idempotency_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/exactlyonce/retry/idempotency"
)

// A webhook receiver keyed by the event id in the body: the sender's
// retry of an event it thinks was lost is answered from the store.
func ExampleWithKeyFromJSON() {
	runner := idempotency.NewRunner(nil)
	receive := idempotency.Middleware(runner, idempotency.SingleTenant, idempotency.WithKeyFromJSON("/id"))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			fmt.Println("handling", string(body))
			w.WriteHeader(http.StatusNoContent)
		}))
	for range 2 { // the event, then the sender's retry
		r := httptest.NewRequest(http.MethodPost, "/webhooks/stripe",
			strings.NewReader(`{"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","type":"invoice.paid"}`))
		w := httptest.NewRecorder()
		receive.ServeHTTP(w, r)
		fmt.Println(w.Code, "replayed:", w.Header().Get("Idempotent-Replayed") == "true")
	}
	// Output:
	// handling {"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","type":"invoice.paid"}
	// 204 replayed: false
	// 204 replayed: true
}

// A webhook receiver keyed by the event id in a header, as GitHub sends
// it.
func ExampleWithKeyHeader_webhook() {
	runner := idempotency.NewRunner(nil)
	receive := idempotency.Middleware(runner, idempotency.SingleTenant, idempotency.WithKeyHeader("X-GitHub-Delivery"))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Println("handling", r.Header.Get("X-GitHub-Event"))
			w.WriteHeader(http.StatusAccepted)
		}))
	for range 2 { // GitHub's redelivery of the same delivery
		r := httptest.NewRequest(http.MethodPost, "/webhooks/github", strings.NewReader(`{"action":"opened"}`))
		r.Header.Set("X-GitHub-Event", "pull_request")
		r.Header.Set("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
		w := httptest.NewRecorder()
		receive.ServeHTTP(w, r)
		fmt.Println(w.Code, "replayed:", w.Header().Get("Idempotent-Replayed") == "true")
	}
	// Output:
	// handling pull_request
	// 202 replayed: false
	// 202 replayed: true
}
