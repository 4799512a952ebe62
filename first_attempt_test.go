package retry_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/pushback"
)

// scriptedBase answers in memory with the statuses in script (the last one
// repeats), and records what it was sent. It implements nothing of the
// package's: a custom RoundTripper as a user has one.
type scriptedBase struct {
	mu     sync.Mutex
	script []int
	seen   []*http.Request
	bodies []string
}

func (s *scriptedBase) RoundTrip(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
		r.Body.Close()
	}
	s.bodies = append(s.bodies, string(body))
	code := s.script[min(len(s.seen), len(s.script)-1)]
	s.seen = append(s.seen, r)
	h := http.Header{}
	if k := r.Header["Idempotency-Key"]; len(k) > 0 {
		h["Idempotency-Key"] = k // a server that deduplicates keys, as our middleware
	}
	return &http.Response{StatusCode: code, Header: h, Body: io.NopCloser(strings.NewReader("body")), Request: r}, nil
}

func TestFirstAttemptSendsTheCallersRequestAndReports(t *testing.T) {
	base := &scriptedBase{script: []int{200}}
	budget := retry.NewBudget(0.1, 1, 20)
	client := &http.Client{Transport: retry.NewTransport(base, retry.WithBudget(budget))}
	var rep retry.Report
	req, _ := http.NewRequestWithContext(retry.NewContext(context.Background(), retry.WithReport(&rep)), "GET", "http://mem.test/", nil)
	resp, err := client.Do(req)
	require.NoError(t, err)
	assert.Equal(t, "body", readAll(t, resp))
	assert.Equal(t, retry.Report{Attempts: 1, StatusCode: 200}, rep)
	assert.Equal(t, uint64(1), budget.Stats().Successes, "a success on the fast path earns for the budget")
}

func TestFirstAttemptHandsAFailureToTheLoop(t *testing.T) {
	base := &scriptedBase{script: []int{503, 502, 200}}
	client := &http.Client{Transport: retry.NewTransport(base, retry.WithClock(newAutoClock()))}
	var rep retry.Report
	req, _ := http.NewRequestWithContext(retry.NewContext(context.Background(), retry.WithReport(&rep)), "GET", "http://mem.test/", nil)
	resp, err := client.Do(req)
	require.NoError(t, err)
	assert.Equal(t, 200, resp.StatusCode)
	readAll(t, resp)
	assert.Len(t, base.seen, 3, "the first attempt is not sent twice")
	assert.Equal(t, 3, rep.Attempts)
}

func TestFirstAttemptKeepsThePolicyForOtherRequests(t *testing.T) {
	base := &scriptedBase{script: []int{503}}
	client := &http.Client{Transport: retry.NewTransport(base, retry.WithClock(newAutoClock()))}
	resp, err := client.Post("http://mem.test/", "text/plain", strings.NewReader("x"))
	require.NoError(t, err)
	readAll(t, resp)
	require.Len(t, base.seen, retry.DefaultMaxAttempts)
	assert.NotEmpty(t, base.seen[0].Header.Get("Idempotency-Key"), "a POST still gets its key")

	base.seen = nil
	req, _ := http.NewRequestWithContext(retry.NewContext(context.Background(), retry.WithoutRetries()), "GET", "http://mem.test/", nil)
	resp, err = client.Do(req)
	require.NoError(t, err)
	readAll(t, resp)
	assert.Len(t, base.seen, 1, "a per-request policy is still honoured")
}

func TestFirstAttemptTakesACallersKeyedPost(t *testing.T) {
	base := &scriptedBase{script: []int{503, 201}}
	client := &http.Client{Transport: retry.NewTransport(base, retry.WithClock(newAutoClock()), retry.WithKeysHonoured("mem.test"))}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour) // a deadline: no timer of the Transport's
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://mem.test/", strings.NewReader("charge"))
	req.Header.Set("Idempotency-Key", `"caller-key"`)
	resp, err := client.Do(req)
	require.NoError(t, err)
	readAll(t, resp)
	assert.Equal(t, 201, resp.StatusCode)
	require.Len(t, base.seen, 2)
	assert.Same(t, req, base.seen[0], "the first attempt is the caller's request itself")
	assert.Equal(t, `"caller-key"`, base.seen[1].Header.Get("Idempotency-Key"))
}

func TestFirstAttemptGivesAPostItsKeyInACopy(t *testing.T) {
	for _, token := range []bool{false, true} {
		t.Run(map[bool]string{false: "quoted", true: "token"}[token], func(t *testing.T) {
			base := &scriptedBase{script: []int{503, 201}}
			opts := []retry.Option{retry.WithClock(newAutoClock())}
			want := `^"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"$`
			if token {
				opts = append(opts, retry.WithTokenKeys())
				want = `^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`
			}
			client := &http.Client{Transport: retry.NewTransport(base, opts...)}
			var rep retry.Report
			payload := strings.Repeat("0123456789abcdef", 64)
			req, _ := http.NewRequestWithContext(retry.NewContext(context.Background(), retry.WithReport(&rep)), "POST", "http://mem.test/", strings.NewReader(payload))
			req.Header.Set("Content-Type", "text/plain")
			resp, err := client.Do(req)
			require.NoError(t, err)
			readAll(t, resp)
			assert.Equal(t, 201, resp.StatusCode)
			assert.Equal(t, 2, rep.Attempts)
			require.Len(t, base.seen, 2)
			key := base.seen[0].Header.Get("Idempotency-Key")
			assert.Regexp(t, want, key)
			assert.Equal(t, key, base.seen[1].Header.Get("Idempotency-Key"), "the loop keeps the fast path's key")
			assert.Equal(t, key, rep.IdempotencyKey, "the report tells the key")
			assert.Equal(t, []string{payload, payload}, base.bodies, "the body arrives whole on both attempts")
			for _, sent := range base.seen {
				assert.NotSame(t, req, sent, "a copy is sent, never the caller's request")
				assert.Equal(t, "text/plain", sent.Header.Get("Content-Type"), "the caller's headers go along")
			}
			assert.Equal(t, http.Header{"Content-Type": {"text/plain"}}, req.Header, "the caller's header is not modified")
		})
	}
}

func TestFirstAttemptKeysDifferPerRequest(t *testing.T) {
	base := &scriptedBase{script: []int{200}}
	client := &http.Client{Transport: retry.NewTransport(base)}
	seen := map[string]bool{}
	for range 100 {
		var rep retry.Report
		req, _ := http.NewRequestWithContext(retry.NewContext(context.Background(), retry.WithReport(&rep)), "POST", "http://mem.test/", strings.NewReader("x"))
		resp, err := client.Do(req)
		require.NoError(t, err)
		readAll(t, resp)
		key := resp.Request.Header.Get("Idempotency-Key")
		require.Equal(t, key, rep.IdempotencyKey, "a first-attempt success reports its key too")
		seen[key] = true
	}
	assert.Len(t, seen, 100, "every logical request has a key of its own")
}

func TestFirstAttemptWithoutADeadlineGetsATimer(t *testing.T) {
	base := &scriptedBase{script: []int{200}}
	client := &http.Client{Transport: retry.NewTransport(base)}

	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://mem.test/", nil)
	resp, err := client.Do(req)
	require.NoError(t, err)
	readAll(t, resp)
	assert.Same(t, req, base.seen[0], "the deadline bounds the attempt: it goes as it is")

	req, _ = http.NewRequest("GET", "http://mem.test/", nil)
	resp, err = client.Do(req)
	require.NoError(t, err)
	readAll(t, resp)
	sent := base.seen[1]
	assert.NotSame(t, req, sent, "without a deadline the attempt goes in a copy with a context of its own")
	assert.NotNil(t, sent.Context().Done())
	assert.NoError(t, sent.Context().Err(), "its timer was stopped when the response came")
}

func TestFirstAttemptAttemptTimeoutHandsTheRetryToTheLoop(t *testing.T) {
	clk := newAutoClock()
	started := make(chan struct{}, 2)
	var calls atomic.Int32
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		started <- struct{}{}
		if calls.Add(1) == 1 {
			<-r.Context().Done() // the first attempt hangs until its timer ends it
			return nil, r.Context().Err()
		}
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("second")), Request: r}, nil
	})
	client := &http.Client{Transport: retry.NewTransport(base, retry.WithClock(clk), retry.WithKeysHonoured())}
	var rep retry.Report
	req, _ := http.NewRequestWithContext(retry.NewContext(context.Background(), retry.WithReport(&rep)), "POST", "http://mem.test/", strings.NewReader("charge"))
	type result struct {
		resp *http.Response
		err  error
	}
	done := make(chan result)
	go func() {
		resp, err := client.Do(req)
		done <- result{resp, err}
	}()
	<-started
	clk.Add(retry.DefaultAttemptTimeout)
	r := <-done
	require.NoError(t, r.err)
	assert.Equal(t, "second", readAll(t, r.resp))
	assert.Equal(t, 2, rep.Attempts)
	assert.Equal(t, r.resp.Request.Header.Get("Idempotency-Key"), rep.IdempotencyKey)
	assert.NotEmpty(t, rep.IdempotencyKey, "the loop keeps the key of the timed-out first attempt")
}

func TestFirstAttemptAttemptContextEndsWhenTheBodyIsClosed(t *testing.T) {
	clk := newAutoClock()
	base := &scriptedBase{script: []int{200}}
	client := &http.Client{Transport: retry.NewTransport(base, retry.WithClock(clk), retry.WithAttemptTimeout(time.Second))}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://mem.test/", nil)
	resp, err := client.Do(req)
	require.NoError(t, err)
	require.Len(t, base.seen, 1)
	attemptCtx := base.seen[0].Context()
	assert.NotSame(t, req, base.seen[0], "an attempt timeout needs a context of the attempt's own")

	clk.Add(2 * time.Second)
	assert.NoError(t, attemptCtx.Err(), "the timeout bounds the wait for the response, not the reading of its body")
	assert.Equal(t, "body", readAll(t, resp))
	assert.ErrorIs(t, attemptCtx.Err(), context.Canceled, "closing the body releases the attempt's context")
}

func TestFirstAttemptAttemptThatFailedIsReleasedByTheLoop(t *testing.T) {
	base := &scriptedBase{script: []int{503, 200}}
	client := &http.Client{Transport: retry.NewTransport(base, retry.WithClock(newAutoClock()), retry.WithAttemptTimeout(time.Second))}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://mem.test/", nil)
	resp, err := client.Do(req)
	require.NoError(t, err)
	require.Len(t, base.seen, 2)
	assert.ErrorIs(t, base.seen[0].Context().Err(), context.Canceled, "the retried attempt's context ended with it")
	assert.NoError(t, base.seen[1].Context().Err())
	readAll(t, resp)
	assert.ErrorIs(t, base.seen[1].Context().Err(), context.Canceled)
}

func TestFirstAttemptLearnsLatencyForAdaptiveTimeouts(t *testing.T) {
	clk := newAutoClock()
	const warmup = 100
	var n atomic.Int32
	hung := make(chan *http.Request, 1)
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if n.Add(1) == warmup+1 {
			hung <- r
			<-r.Context().Done() // hangs until abandoned
			return nil, r.Context().Err()
		}
		clk.Add(5 * time.Millisecond) // every other answer takes 5 ms
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
	})
	client := &http.Client{Transport: retry.NewTransport(base, retry.WithClock(clk),
		retry.WithAdaptiveTimeout(retry.AdaptiveTimeout{Floor: time.Millisecond}))}
	for range warmup {
		resp, err := client.Get("http://mem.test/")
		require.NoError(t, err)
		readAll(t, resp)
	}

	var rep retry.Report
	req, _ := http.NewRequestWithContext(retry.NewContext(context.Background(), retry.WithReport(&rep)), "GET", "http://mem.test/", nil)
	done := make(chan error, 1)
	go func() {
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	r := <-hung
	// Learned from the first attempts: 3 x p99.9 of 5 ms (bucket bound 5.12 ms) = 15.4 ms.
	clk.Add(16 * time.Millisecond)
	select {
	case <-r.Context().Done():
	case <-time.After(10 * time.Second): // a guard against a hang, not a measurement
		t.Fatal("the attempt was not abandoned at the timeout learned from fast-path attempts")
	}
	require.NoError(t, <-done)
	assert.Equal(t, 2, rep.Attempts)
}

func TestFirstAttemptInsidePushbackMiddlewareStillReportsAGiveUp(t *testing.T) {
	for _, tc := range []struct {
		name     string
		script   []int
		fast     bool
		pushback string
	}{
		{"success", []int{200}, true, ""},
		{"give-up", []int{503}, false, "exhausted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := &scriptedBase{script: tc.script}
			client := &http.Client{Transport: retry.NewTransport(base, retry.WithClock(newAutoClock()), retry.WithMaxAttempts(2))}
			handler := pushback.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				ctx, cancel := context.WithTimeout(r.Context(), time.Hour) // a deadline: no timer of the Transport's
				defer cancel()
				out, _ := http.NewRequestWithContext(ctx, "GET", "http://dependency.test/", nil)
				resp, err := client.Do(out)
				require.NoError(t, err)
				readAll(t, resp)
				if tc.fast {
					assert.Same(t, out, base.seen[0], "the first attempt went as it is")
				}
				w.WriteHeader(resp.StatusCode)
			}))
			rec := httptest.NewRecorder()
			handler.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
			assert.Equal(t, tc.script[0], rec.Code)
			assert.Equal(t, tc.pushback, rec.Header().Get(pushback.Header))
		})
	}
}
