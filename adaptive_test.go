package retry_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/backoff"
)

func TestAdaptiveTimeoutAbandonsAHangingAttemptNearTheLearnedTimeout(t *testing.T) {
	clk := newAutoClock()
	const warmup = 100
	var n atomic.Int32
	arrived := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch n.Add(1) {
		case warmup + 1: // hangs until abandoned
			close(arrived)
			<-r.Context().Done()
			return
		default:
			clk.Add(5 * time.Millisecond) // every other answer takes 5 ms
			w.Write([]byte("ok"))
		}
	}))
	defer srv.Close()
	warming := true
	abandoned := make(chan retry.Attempt, 1)
	client, _ := newClient(t, retry.WithClock(clk), retry.WithAdaptiveTimeout(retry.AdaptiveTimeout{Floor: time.Millisecond}),
		onAttempt(func(a retry.Attempt) {
			if !warming && a.Number == 1 {
				abandoned <- a
			}
		}))
	for range warmup {
		resp, err := client.Get(srv.URL)
		require.NoError(t, err)
		readAll(t, resp)
	}
	warming = false

	done := make(chan *http.Response)
	go func() {
		resp, err := client.Get(srv.URL)
		assert.NoError(t, err)
		done <- resp
	}()
	<-arrived
	var first retry.Attempt
	for stepping := true; stepping; { // move the clock in 1 ms steps until the attempt is abandoned
		select {
		case first = <-abandoned:
			stepping = false
		default:
			clk.Add(time.Millisecond)
		}
	}
	assert.Equal(t, "ok", readAll(t, <-done))
	var timeout *retry.AttemptTimeoutError
	assert.ErrorAs(t, first.Err, &timeout)
	assert.True(t, first.Retrying)
	// Learned: 3 x p99.9 of 5 ms latencies (bucket bound 5.12 ms) = 15.4 ms.
	assert.GreaterOrEqual(t, first.Elapsed, 15*time.Millisecond)
	assert.Less(t, first.Elapsed, 25*time.Millisecond, "abandoned near the learned timeout, not after a fixed 30 s")
}

func TestDefaultAttemptTimeoutBoundsACustomBase(t *testing.T) {
	clk := newAutoClock()
	started := make(chan struct{}, 4)
	hang := retry.NewTransport(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		started <- struct{}{}
		<-r.Context().Done()
		return nil, r.Context().Err()
	}), retry.WithClock(clk), retry.WithMaxAttempts(1))
	done := make(chan error)
	go func() {
		_, err := (&http.Client{Transport: hang}).Get("http://hangs.test/")
		done <- err
	}()
	<-started
	clk.Add(retry.DefaultAttemptTimeout)
	err := <-done
	var timeout *retry.AttemptTimeoutError
	assert.ErrorAs(t, err, &timeout)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestHedgedGetReturnsTheFasterAnswerAndCancelsTheSlowOne(t *testing.T) {
	var n atomic.Int32
	slowCancelled := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			<-r.Context().Done() // the first to arrive is slow: it ends only when cancelled
			close(slowCancelled)
			return
		}
		w.Write([]byte("fast"))
	}))
	defer srv.Close()
	budget := retry.NewBudget(0.1, 1, 20)
	client, _ := newClient(t, retry.WithClock(newAutoClock()), retry.WithHedging(retry.Hedging{}), retry.WithBudget(budget))
	var rep retry.Report
	req, _ := http.NewRequestWithContext(retry.NewContext(context.Background(), retry.WithReport(&rep)), "GET", srv.URL, nil)
	resp, err := client.Do(req)
	require.NoError(t, err)
	assert.Equal(t, "fast", readAll(t, resp))
	<-slowCancelled
	assert.Equal(t, int32(2), n.Load())
	assert.Equal(t, 2, rep.Attempts, "the hedge is an attempt")
	assert.Equal(t, uint64(1), budget.Stats().RetriesAllowed, "and is charged to the budget")
}

func TestPostWithoutKeyIsNeverHedged(t *testing.T) {
	clk := newAutoClock()
	var n atomic.Int32
	arrived, release := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			close(arrived)
			<-release
		}
		w.Write([]byte("done"))
	}))
	defer srv.Close()
	client, _ := newClient(t, retry.WithClock(clk), retry.WithHedging(retry.Hedging{}), retry.WithoutKeys())
	done := make(chan *http.Response)
	go func() {
		resp, err := client.Post(srv.URL, "text/plain", strings.NewReader("charge"))
		assert.NoError(t, err)
		done <- resp
	}()
	<-arrived
	close(release)
	assert.Equal(t, "done", readAll(t, <-done))
	assert.Equal(t, int32(1), n.Load())
	assert.Empty(t, clk.Waits(), "no hedge timer was even started")
}

func TestHedgesAndRetriesStayWithinTheBudgetDuringAnOutage(t *testing.T) {
	var served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		<-r.Context().Done() // a total outage: nothing ever answers
	}))
	defer srv.Close()
	budget := retry.NewBudget(0.1, 1, 20)
	client, tr := newClient(t, retry.WithBudget(budget), retry.WithAttemptTimeout(10*time.Millisecond),
		retry.WithHedging(retry.Hedging{MinDelay: 2 * time.Millisecond}), retry.WithBackoff(backoff.Constant(0)),
		noRideThrough)
	start := time.Now()
	const requests = 40
	for range requests {
		_, err := client.Get(srv.URL)
		require.Error(t, err)
	}
	elapsed := time.Since(start)
	tr.CloseIdleConnections()
	st := budget.Stats()
	assert.LessOrEqual(t, served.Load(), int64(requests)+int64(st.RetriesAllowed), "every extra send was paid for")
	assert.Greater(t, served.Load(), int64(requests), "hedges and retries were sent while the budget lasted")
	assert.LessOrEqual(t, st.RetriesAllowed, floorBound(retry.DefaultBudgetCapacity, retry.DefaultBudgetFloor, elapsed))
}

func TestRequestMarkedNoRetryIsSentOnce(t *testing.T) {
	srv := newScriptServer(t, 503, 200)
	client, _ := newClient(t, retry.WithClock(newAutoClock()))
	req, _ := http.NewRequestWithContext(retry.NewContext(context.Background(), retry.WithoutRetries()), "GET", srv.URL, nil)
	resp, err := client.Do(req)
	require.NoError(t, err)
	readAll(t, resp)
	assert.Equal(t, 503, resp.StatusCode)
	assert.Len(t, srv.requests(), 1)
}

func TestRequestMarkedIdempotentIsRetriedWithoutKey(t *testing.T) {
	srv := newScriptServer(t, 503, 200)
	client, _ := newClient(t, retry.WithClock(newAutoClock()), retry.WithoutKeys())
	req, _ := http.NewRequestWithContext(retry.NewContext(context.Background(), retry.WithIdempotent()), "POST", srv.URL, strings.NewReader("query"))
	resp, err := client.Do(req)
	require.NoError(t, err)
	readAll(t, resp)
	assert.Equal(t, 200, resp.StatusCode)
	reqs := srv.requests()
	require.Len(t, reqs, 2)
	assert.Empty(t, reqs[0].key)
	assert.Equal(t, "query", string(reqs[1].body))
}

func TestRequestOptionsOverrideTheTransportsPolicy(t *testing.T) {
	srv := newScriptServer(t, 503)
	client, _ := newClient(t, retry.WithClock(newAutoClock()))
	ctx := retry.NewContext(context.Background(), retry.WithMaxAttempts(2))
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
	resp, err := client.Do(req)
	require.NoError(t, err)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	assert.Len(t, srv.requests(), 2)

	resp, err = client.Get(srv.URL) // the Transport itself is unchanged
	require.NoError(t, err)
	readAll(t, resp)
	assert.Len(t, srv.requests(), 2+retry.DefaultMaxAttempts)
}
