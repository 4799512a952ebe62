package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"github.com/exactlyonce/retry/idempotency"
)

// chargeRequest is the body of POST /charges.
type chargeRequest struct {
	// Ref is the caller's reference for the charge (an order number), used
	// here only to count how often each charge was really performed.
	Ref         string `json:"ref"`
	AmountCents int64  `json:"amount_cents"`
}

// chargeResponse is the body of a successful charge.
type chargeResponse struct {
	ID          string `json:"id"`
	Ref         string `json:"ref"`
	AmountCents int64  `json:"amount_cents"`
}

// ledger records every charge the service performs, duplicates included.
type ledger struct {
	mu       sync.Mutex
	byRef    map[string]int
	executed int
}

func newLedger() *ledger {
	return &ledger{byRef: make(map[string]int)}
}

// charge performs one charge and returns its id.
func (l *ledger) charge(ref string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.executed++
	l.byRef[ref]++
	return fmt.Sprintf("ch_%06d", l.executed)
}

// totals returns how many charges were performed and for how many distinct
// references.
func (l *ledger) totals() (executed, distinct int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.executed, len(l.byRef)
}

// newService returns the payment API, POST /charges, behind the idempotency
// middleware with the given store. A request with an Idempotency-Key is
// performed at most once and its response replayed to every repeat; a
// request without one passes through (so the naive client can be compared
// against the same service). tel, if not nil, records what became of each
// keyed request on its server span and in the outcome counter.
func newService(l *ledger, store idempotency.Store, tel *telemetry) http.Handler {
	runner := idempotency.NewRunner(store, tel.runnerOptions()...)
	mw := idempotency.Middleware(runner, idempotency.SingleTenant, idempotency.WithRequiredMethods())
	mux := http.NewServeMux()
	mux.HandleFunc("POST /charges", func(w http.ResponseWriter, r *http.Request) {
		var req chargeRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Ref == "" || req.AmountCents <= 0 {
			http.Error(w, "a charge needs a ref and a positive amount_cents", http.StatusBadRequest)
			return
		}
		idempotency.MarkStarted(r.Context())
		resp := chargeResponse{ID: l.charge(req.Ref), Ref: req.Ref, AmountCents: req.AmountCents}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(resp)
	})
	return tel.handler(mw(mux))
}
