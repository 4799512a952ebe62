package retry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
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
	"github.com/exactlyonce/retry/backoff"
	"github.com/exactlyonce/retry/pushback"
)

// floorBound is the budget's promise under a total outage: the capacity, one
// floor burst, and the floor's rate over the time it was used.
func floorBound(capacity, floor float64, elapsed time.Duration) uint64 {
	return uint64(math.Floor(capacity)) + 1 + uint64(math.Floor(floor*elapsed.Seconds()))
}

func TestSharedBudgetBoundsRetriesDuringAnOutage(t *testing.T) {
	clk := newAutoClock()
	budget := retry.NewBudget(0.1, 1, 20)
	calls := 0
	const requests = 2000
	for range requests {
		err := retry.Do(context.Background(), func(context.Context) error { calls++; return errFlaky },
			retry.WithBudget(budget), retry.WithClock(clk), noRideThrough)
		require.Error(t, err)
	}
	st := budget.Stats()
	retries := uint64(calls - requests)
	assert.Equal(t, st.RetriesAllowed, retries, "every allowed retry was made, no other")
	assert.LessOrEqual(t, retries, floorBound(retry.DefaultBudgetCapacity, retry.DefaultBudgetFloor, clk.Elapsed()))
	assert.LessOrEqual(t, float64(calls)/requests, 1.10)
	assert.Positive(t, st.RetriesDenied)
}

func TestBudgetDenialIsReported(t *testing.T) {
	clk := newAutoClock()
	budget := retry.NewBudget(0.1, 0, 1)
	var hooked []retry.Attempt
	var rep retry.Report
	err := retry.Do(context.Background(), func(context.Context) error { return errFlaky },
		retry.WithBudget(budget), retry.WithClock(clk), noRideThrough, retry.WithReport(&rep),
		onAttempt(func(a retry.Attempt) { hooked = append(hooked, a) }))
	assert.ErrorIs(t, err, retry.ErrBudgetDenied)
	assert.ErrorIs(t, err, errFlaky)
	require.Len(t, hooked, 2, "one retry paid with the only token, then denied")
	assert.ErrorIs(t, hooked[1].Reason, retry.ErrBudgetDenied)
	assert.Equal(t, 2, rep.Attempts)
	assert.ErrorIs(t, rep.Reason, retry.ErrBudgetDenied)
}

func TestHealthyTrafficHasEveryTransientFailureRetried(t *testing.T) {
	clk := newAutoClock()
	budget := retry.NewBudget(0.1, 1, 20)
	rng := rand.New(rand.NewPCG(1, 2))
	failures := 0
	for range 10000 {
		err := retry.Do(context.Background(), func(context.Context) error {
			if rng.Float64() < 0.05 {
				failures++
				return errFlaky
			}
			return nil
		}, retry.WithBudget(budget), retry.WithClock(clk), retry.WithMaxAttempts(10))
		require.NoError(t, err)
	}
	st := budget.Stats()
	assert.Greater(t, failures, 400)
	assert.Equal(t, uint64(failures), st.RetriesAllowed, "every failure was retried")
	assert.Zero(t, st.RetriesDenied)
}

func TestConcurrentCallersKeepTheBound(t *testing.T) {
	clk := newAutoClock()
	budget := retry.NewBudget(0.1, 1, 20)
	var calls atomic.Int64
	var wg sync.WaitGroup
	const callers, each = 50, 40
	for range callers {
		wg.Go(func() {
			for range each {
				retry.Do(context.Background(), func(context.Context) error { calls.Add(1); return errFlaky },
					retry.WithBudget(budget), retry.WithClock(clk), noRideThrough)
			}
		})
	}
	wg.Wait()
	retries := uint64(calls.Load() - callers*each)
	assert.Equal(t, budget.Stats().RetriesAllowed, retries)
	assert.LessOrEqual(t, retries, floorBound(retry.DefaultBudgetCapacity, retry.DefaultBudgetFloor, clk.Elapsed()))
}

func TestTransportInsideDoMakesOneAttemptWithTheLoopsKey(t *testing.T) {
	srv := newScriptServer(t, 503, 503, 201)
	client, _ := newClient(t)
	outer := 0
	err := retry.Do(context.Background(), func(ctx context.Context) error {
		outer++
		req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL, strings.NewReader("charge"))
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode >= 500 {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}, retry.WithClock(newAutoClock()))
	require.NoError(t, err)
	reqs := srv.requests()
	assert.Equal(t, 3, outer)
	require.Len(t, reqs, 3, "the Transport made one attempt per outer attempt")
	assert.NotEmpty(t, reqs[0].key)
	assert.Equal(t, reqs[0].key, reqs[1].key, "the outer loop's attempts share the key")
	assert.Equal(t, reqs[0].key, reqs[2].key)
}

func TestPushbackHeaderIsNotRetried(t *testing.T) {
	srv := newScriptServer(t, 503, 200)
	srv.headers[0] = http.Header{pushback.Header: {"exhausted"}}
	client, _ := newClient(t, retry.WithClock(newAutoClock()))
	var rep retry.Report
	req, _ := http.NewRequestWithContext(retry.NewContext(context.Background(), retry.WithReport(&rep)), "GET", srv.URL, nil)
	resp, err := client.Do(req)
	require.NoError(t, err)
	readAll(t, resp)
	assert.Equal(t, 503, resp.StatusCode)
	assert.Len(t, srv.requests(), 1)
	assert.ErrorIs(t, rep.Reason, retry.ErrPushback)
}

func TestPushbackMiddlewareMarksA5xxAfterAGiveUp(t *testing.T) {
	down := newScriptServer(t, 503)
	client, _ := newClient(t, retry.WithClock(newAutoClock()))
	svc := httptest.NewServer(pushback.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), "GET", down.URL+r.URL.Path, nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		if r.URL.Path == "/ok" {
			w.WriteHeader(http.StatusOK)
			return
		}
		assert.Equal(t, "exhausted", pushback.Value(r.Context()))
		http.Error(w, "dependency down", http.StatusServiceUnavailable)
	})))
	defer svc.Close()
	resp, err := http.Get(svc.URL + "/fail")
	require.NoError(t, err)
	readAll(t, resp)
	assert.Equal(t, "exhausted", resp.Header.Get(pushback.Header))
	resp, err = http.Get(svc.URL + "/ok")
	require.NoError(t, err)
	readAll(t, resp)
	assert.Empty(t, resp.Header.Get(pushback.Header), "only a 5xx is marked")
}

// chain starts a service that always answers 503 and layers services in
// front of it, each calling the next through its own Transport inside
// pushback.Middleware. It returns the top URL, the innermost request count and
// a function that stops everything.
func chain(layers int, opts ...retry.Option) (string, *atomic.Int64, func()) {
	innermost := &atomic.Int64{}
	bottom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		innermost.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	closers := []func(){bottom.Close}
	next := bottom.URL
	for range layers {
		tr := retry.NewTransport(nil, append([]retry.Option{retry.WithBackoff(backoff.Constant(0))}, opts...)...)
		client := &http.Client{Transport: tr}
		target := next
		svc := httptest.NewServer(pushback.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			req, _ := http.NewRequestWithContext(r.Context(), "GET", target, nil)
			resp, err := client.Do(req)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			w.WriteHeader(resp.StatusCode)
		})))
		closers = append(closers, svc.Close, tr.CloseIdleConnections)
		next = svc.URL
	}
	return next, innermost, func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
}

func TestThreeChainedServicesDoNotMultiplyAttempts(t *testing.T) {
	top, innermost, stop := chain(2, noRideThrough) // the client below is the third layer
	defer stop()
	client, _ := newClient(t, retry.WithBackoff(backoff.Constant(0)), noRideThrough)
	const requests = 200
	for range requests {
		resp, err := client.Get(top)
		require.NoError(t, err)
		readAll(t, resp)
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	}
	perRequest := float64(innermost.Load()) / requests
	t.Logf("innermost attempts per top-level request: %.3f", perRequest)
	assert.LessOrEqual(t, perRequest, 1.2, "about one attempt per request, not 64")
}

// BenchmarkNestedOutage reports innermost attempts per top-level request
// through three layers of retrying clients, the innermost service always 503.
func BenchmarkNestedOutage(b *testing.B) {
	var total, requests int64
	for b.Loop() {
		top, innermost, stop := chain(2, noRideThrough)
		tr := retry.NewTransport(nil, noRideThrough)
		client := &http.Client{Transport: tr}
		for range 200 {
			resp, err := client.Get(top)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		tr.CloseIdleConnections()
		stop()
		total += innermost.Load()
		requests += 200
	}
	b.ReportMetric(float64(total)/float64(requests), "innermost-attempts/request")
}

func TestPushbackValueWithoutMiddleware(t *testing.T) {
	assert.Empty(t, pushback.Value(context.Background()))
	err := retry.Do(context.Background(), func(context.Context) error { return errors.New("x") },
		retry.WithMaxAttempts(1))
	assert.ErrorIs(t, err, retry.ErrAttemptsExhausted)
}
