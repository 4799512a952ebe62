package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/backoff"
)

// Policy shared by both clients, so that only the key differs.
const (
	maxAttempts   = 5
	chargeTimeout = 10 * time.Second
	naiveWait     = 5 * time.Millisecond
)

// charger sends one logical charge and returns nil once the service
// confirmed it.
type charger interface {
	charge(ctx context.Context, c chargeRequest) error
	close()
}

// newOurs returns a charger using this module's client: every POST gets an
// Idempotency-Key that stays the same on all its attempts, and the retry
// budget, deadline and backoff are the library's (with shorter waits, to keep
// the demo quick). tel, if not nil, traces and measures it, and observes its
// retry budget.
func newOurs(url string, tel *telemetry) (charger, error) {
	netTr := http.DefaultTransport.(*http.Transport).Clone()
	opts := append([]retry.Option{
		retry.WithMaxAttempts(maxAttempts),
		retry.WithBackoff(backoff.FullJitter(5*time.Millisecond, 50*time.Millisecond)),
		retry.WithTotalTimeout(chargeTimeout),
	}, tel.retryOptions()...)
	tr := retry.NewTransport(tel.transport(netTr), opts...)
	if err := tel.observeBudget("payments", tr.Budget()); err != nil {
		return nil, err
	}
	return &httpCharger{url: url, client: &http.Client{Transport: tr}, network: netTr, attempts: 1}, nil
}

// newNaive returns a charger that re-POSTs on any error or 5xx, with no key:
// the retry loop most code starts with. The telemetry leaves it alone (its
// service is instrumented like ours).
func newNaive(url string, _ *telemetry) (charger, error) {
	netTr := http.DefaultTransport.(*http.Transport).Clone()
	return &httpCharger{
		url:      url,
		client:   &http.Client{Transport: netTr, Timeout: chargeTimeout},
		network:  netTr,
		attempts: maxAttempts,
	}, nil
}

// httpCharger POSTs charges with client, making up to attempts attempts
// itself (1 when the client retries on its own).
type httpCharger struct {
	url    string
	client *http.Client
	// network is the transport at the bottom of client's, whose
	// connections close closes.
	network  *http.Transport
	attempts int
}

func (h *httpCharger) charge(ctx context.Context, c chargeRequest) error {
	payload, err := json.Marshal(c)
	if err != nil {
		return err
	}
	var last error
	for a := 1; a <= h.attempts; a++ {
		if a > 1 && !pause(ctx, naiveWait) {
			return ctx.Err()
		}
		var retryable bool
		retryable, last = h.post(ctx, payload)
		if last == nil || !retryable {
			return last
		}
	}
	return last
}

// post makes one call; retryable reports an error or a 5xx.
func (h *httpCharger) post(ctx context.Context, payload []byte) (retryable bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url+"/charges", bytes.NewReader(payload))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.client.Do(req)
	if err != nil {
		return true, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
	if resp.StatusCode/100 == 2 {
		return false, nil
	}
	return resp.StatusCode >= 500, fmt.Errorf("status %s", resp.Status)
}

func (h *httpCharger) close() {
	h.network.CloseIdleConnections()
}
