package retry_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/protocol"
	"github.com/exactlyonce/retry/pushback"
)

// WithMaxRetryAfter(0) means any requested wait stops the loop, zero
// included.
func TestMaxRetryAfterZeroStopsOnRetryAfterZero(t *testing.T) {
	srv := newScriptServer(t, 503, 200)
	srv.headers[0] = http.Header{"Retry-After": {"0"}}
	client, _ := newClient(t, retry.WithClock(newAutoClock()), retry.WithMaxRetryAfter(0))
	var rep retry.Report
	req, _ := http.NewRequestWithContext(retry.NewContext(context.Background(), retry.WithReport(&rep)), "GET", srv.URL, nil)
	resp, err := client.Do(req)
	require.NoError(t, err)
	readAll(t, resp)
	assert.Equal(t, 503, resp.StatusCode)
	assert.Len(t, srv.requests(), 1)
	assert.ErrorIs(t, rep.Reason, retry.ErrRetryAfterTooLong)

	calls := 0
	err = retry.Do(context.Background(), func(context.Context) error {
		calls++
		return retry.RetryAfter(0, errFlaky)
	}, retry.WithMaxRetryAfter(0), retry.WithClock(newAutoClock()))
	assert.Equal(t, 1, calls)
	assert.ErrorIs(t, err, retry.ErrRetryAfterTooLong)
}

// A Retry-After over the cap has a reason of its own, told apart from the
// Retry-Pushback header, and passed on by pushback.Middleware.
func TestRetryAfterOverTheCapIsNotPushback(t *testing.T) {
	srv := newScriptServer(t, 503)
	srv.headers[0] = http.Header{"Retry-After": {"3600"}}
	client, _ := newClient(t, retry.WithClock(newAutoClock()))
	handler := pushback.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rep retry.Report
		out, _ := http.NewRequestWithContext(retry.NewContext(r.Context(), retry.WithReport(&rep)), "GET", srv.URL, nil)
		resp, err := client.Do(out)
		require.NoError(t, err)
		readAll(t, resp)
		assert.ErrorIs(t, rep.Reason, retry.ErrRetryAfterTooLong)
		assert.NotErrorIs(t, rep.Reason, retry.ErrPushback)
		w.WriteHeader(http.StatusBadGateway)
	}))
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	assert.Equal(t, "retry-after", rec.Header().Get(pushback.Header))
}

// The Transport counts its logical requests in its budget's statistics.
func TestTransportBudgetCountsRequests(t *testing.T) {
	srv := newScriptServer(t, 200)
	client, tr := newClient(t)
	for range 100 {
		resp, err := client.Get(srv.URL)
		require.NoError(t, err)
		readAll(t, resp)
	}
	st := tr.Budget().Stats()
	assert.Equal(t, uint64(100), st.Requests)
	assert.Equal(t, uint64(100), st.Successes)
}

// serverStatus stands for a server's answer with details of its own, as a
// gRPC status is.
type serverStatus struct{ reason string }

func (s *serverStatus) Error() string { return "unavailable: " + s.reason }

// A server's wait that would end past the deadline ends the loop at once,
// and the caller still has the server's answer: Do's and Run's *Error keeps
// it unchanged as Last (errors.As finds it, details and all), says
// ErrDeadline and matches context.DeadlineExceeded; Run also hands back
// that attempt's Verdict.
func TestAPushbackPastTheDeadlineKeepsTheServersAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		answer := &serverStatus{reason: "OVERLOADED"}
		check := func(t *testing.T, err error) {
			var e *retry.Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, 1, e.Attempts)
			assert.ErrorIs(t, err, retry.ErrDeadline)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			assert.Same(t, answer, e.Last, "the server's answer, unchanged")
			var got *serverStatus
			require.ErrorAs(t, err, &got)
			assert.Equal(t, "OVERLOADED", got.reason)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		start := time.Now()
		err := retry.Do(ctx, func(context.Context) error { return retry.RetryAfter(5*time.Second, answer) })
		assert.Zero(t, time.Since(start), "no wait")
		check(t, err)

		v, err := protocol.NewCaller().Run(ctx, &protocol.Call{Target: "t", Idempotent: true},
			func(context.Context, int, bool) protocol.Verdict {
				return protocol.Verdict{Err: answer, Retry: true, Failing: true, RetryAfter: 5 * time.Second,
					HasRetryAfter: true, Result: "trailers"}
			})
		assert.Zero(t, time.Since(start), "no wait")
		check(t, err)
		assert.Equal(t, "trailers", v.Result, "the last attempt's Verdict")
	})
}
