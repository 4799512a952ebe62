package retry_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry"
)

// scriptedBase answers in memory with the statuses in script (the last one
// repeats) and promises to bound its own attempts, so the Transport may send
// a safe request's first attempt straight to it.
type scriptedBase struct {
	mu     sync.Mutex
	script []int
	seen   []*http.Request
}

func (s *scriptedBase) BoundsAttempts() bool { return true }

func (s *scriptedBase) RoundTrip(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	code := s.script[min(len(s.seen), len(s.script)-1)]
	s.seen = append(s.seen, r)
	return &http.Response{StatusCode: code, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("body")), Request: r}, nil
}

func TestFastPathSendsTheCallersRequestAndReports(t *testing.T) {
	base := &scriptedBase{script: []int{200}}
	budget := retry.DefaultBudget()
	client := &http.Client{Transport: retry.NewTransport(base, retry.WithBudget(budget))}
	var rep retry.Report
	req, _ := http.NewRequestWithContext(retry.WithReport(context.Background(), &rep), "GET", "http://mem.test/", nil)
	resp, err := client.Do(req)
	require.NoError(t, err)
	assert.Equal(t, "body", readAll(t, resp))
	assert.Equal(t, retry.Report{Attempts: 1, StatusCode: 200}, rep)
	assert.Equal(t, uint64(1), budget.Stats().Successes, "a success on the fast path earns for the budget")
}

func TestFastPathHandsAFailureToTheLoop(t *testing.T) {
	base := &scriptedBase{script: []int{503, 502, 200}}
	client := &http.Client{Transport: retry.NewTransport(base, retry.WithClock(newAutoClock()))}
	var rep retry.Report
	req, _ := http.NewRequestWithContext(retry.WithReport(context.Background(), &rep), "GET", "http://mem.test/", nil)
	resp, err := client.Do(req)
	require.NoError(t, err)
	assert.Equal(t, 200, resp.StatusCode)
	readAll(t, resp)
	assert.Len(t, base.seen, 3, "the first attempt is not sent twice")
	assert.Equal(t, 3, rep.Attempts)
}

func TestFastPathKeepsThePolicyForOtherRequests(t *testing.T) {
	base := &scriptedBase{script: []int{503}}
	client := &http.Client{Transport: retry.NewTransport(base, retry.WithClock(newAutoClock()))}
	resp, err := client.Post("http://mem.test/", "text/plain", strings.NewReader("x"))
	require.NoError(t, err)
	readAll(t, resp)
	require.Len(t, base.seen, retry.DefaultMaxAttempts)
	assert.NotEmpty(t, base.seen[0].Header.Get("Idempotency-Key"), "a POST still gets its key")

	base.seen = nil
	req, _ := http.NewRequestWithContext(retry.NoRetry(context.Background()), "GET", "http://mem.test/", nil)
	resp, err = client.Do(req)
	require.NoError(t, err)
	readAll(t, resp)
	assert.Len(t, base.seen, 1, "a per-request policy is still honoured")
}

func TestFastPathTakesACallersKeyedPost(t *testing.T) {
	base := &scriptedBase{script: []int{503, 201}}
	client := &http.Client{Transport: retry.NewTransport(base, retry.WithClock(newAutoClock()))}
	req, _ := http.NewRequest("POST", "http://mem.test/", strings.NewReader("charge"))
	req.Header.Set("Idempotency-Key", `"caller-key"`)
	resp, err := client.Do(req)
	require.NoError(t, err)
	readAll(t, resp)
	assert.Equal(t, 201, resp.StatusCode)
	require.Len(t, base.seen, 2)
	assert.Same(t, req, base.seen[0], "the first attempt is the caller's request itself")
	assert.Equal(t, `"caller-key"`, base.seen[1].Header.Get("Idempotency-Key"))
}
