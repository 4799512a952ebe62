package main

import (
	"context"
	"encoding/json"
	"errors"
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

// ledger is the payment provider behind the service: it records every
// charge it performs, duplicates included. Like a real provider it
// deduplicates by idempotency key: a charge sent again with the key of an
// earlier one gets that charge's id and is not performed again. A charge
// without a key is always performed.
type ledger struct {
	mu       sync.Mutex
	byRef    map[string]int
	byKey    map[string]string
	executed int
	// deduplicated counts the charges recognised by their key.
	deduplicated int
}

func newLedger() *ledger {
	return &ledger{byRef: make(map[string]int), byKey: make(map[string]string)}
}

// charge performs one charge, unless key ("" for none) is that of an
// earlier charge, and returns the charge's id.
func (l *ledger) charge(ref, key string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if id, ok := l.byKey[key]; ok && key != "" {
		l.deduplicated++
		return id
	}
	l.executed++
	l.byRef[ref]++
	id := fmt.Sprintf("ch_%06d", l.executed)
	if key != "" {
		l.byKey[key] = id
	}
	return id
}

// totals returns how many charges were performed and for how many distinct
// references.
func (l *ledger) totals() (executed, distinct int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.executed, len(l.byRef)
}

// deduplications returns how many charges the ledger recognised by their
// key instead of performing them again.
func (l *ledger) deduplications() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deduplicated
}

// callerOf is the service's caller function (idempotency.Middleware): one
// tenant.
var callerOf = idempotency.SingleTenant

// errKilled is what a handler of a killed instance meets when the run ends
// (see deployment.alive).
var errKilled = errors.New("the service instance was killed")

// chargeHandler is POST /charges on inst. A keyed request charges in a
// Step: the ledger gets the step's downstream key, so an execution resumed
// after a crash (by a client's retry or a Reconciler) never charges twice;
// Step also marks the execution started, which the Middleware stores the
// response for and the Reconciler looks for. A request without a key (the
// naive client's, which the Middleware lets through) charges with no key.
// Between charging and answering, the handler passes inst's checkpoints,
// where a handler of a killed instance stops (see deployment.alive).
func (d *deployment) chargeHandler(inst *instance) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req chargeRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Ref == "" || req.AmountCents <= 0 {
			http.Error(w, "a charge needs a ref and a positive amount_cents", http.StatusBadRequest)
			return
		}
		if !d.alive(inst) {
			http.Error(w, errKilled.Error(), http.StatusServiceUnavailable)
			return
		}
		id, err := d.charge(r.Context(), inst, req.Ref)
		if err == nil && !d.alive(inst) {
			err = errKilled
		}
		if err != nil {
			// Behind the Middleware this answer is stored unless the
			// execution lost its lease (ErrLeaseLost, as a killed
			// instance's has by the time it gets here): then a newer
			// execution's outcome is kept.
			http.Error(w, "the charge could not be completed: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(chargeResponse{ID: id, Ref: req.Ref, AmountCents: req.AmountCents})
	}
}

// charge charges ref with the ledger on behalf of a handler of inst, in a
// Step when the request has a key, and returns the charge's id.
func (d *deployment) charge(ctx context.Context, inst *instance, ref string) (string, error) {
	e := idempotency.FromContext(ctx)
	if e == nil {
		id := d.ledger.charge(ref, "")
		d.charged(inst)
		return id, nil
	}
	id, err := e.Step(ctx, "charge", func(_ context.Context, key string) ([]byte, error) {
		id := d.ledger.charge(ref, key)
		d.charged(inst)
		if !d.alive(inst) {
			return nil, errKilled
		}
		return []byte(id), nil
	})
	return string(id), err
}
