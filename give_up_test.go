package retry_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry"
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
// Retry-Pushback header, and passed on by PushbackMiddleware.
func TestRetryAfterOverTheCapIsNotPushback(t *testing.T) {
	srv := newScriptServer(t, 503)
	srv.headers[0] = http.Header{"Retry-After": {"3600"}}
	client, _ := newClient(t, retry.WithClock(newAutoClock()))
	handler := retry.PushbackMiddleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
	assert.Equal(t, "retry-after", rec.Header().Get(retry.PushbackHeader))
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
