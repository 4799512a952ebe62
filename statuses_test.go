package retry_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	retry "github.com/exactlyonce/retry"
)

// get sends a GET for srv through client, with ctx, and returns the
// response, read and closed.
func get(t *testing.T, ctx context.Context, client *http.Client, url string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := client.Do(req)
	require.NoError(t, err)
	readAll(t, resp)
	return resp
}

// The user chooses which statuses are retried: a 408 of a service that
// times requests out is retried when listed, a 429 left out is not.
func TestRetryStatusesChooseWhatIsRetried(t *testing.T) {
	srv := newScriptServer(t, 408, 200)
	client, _ := newClient(t, retry.WithClock(newAutoClock()), retry.WithRetryStatuses(408, 502, 503, 504))
	assert.Equal(t, 200, get(t, context.Background(), client, srv.URL).StatusCode)
	assert.Len(t, srv.requests(), 2)

	srv = newScriptServer(t, 429, 200)
	resp := get(t, context.Background(), client, srv.URL)
	assert.Equal(t, 429, resp.StatusCode)
	assert.Len(t, srv.requests(), 1)
	rep, ok := retry.ReportOf(resp)
	require.True(t, ok)
	assert.ErrorIs(t, rep.Reason, retry.ErrStatusNotRetried)
}

// Per request: a request's context retries a 500 that its Transport does
// not.
func TestRetryStatusesPerRequest(t *testing.T) {
	srv := newScriptServer(t, 500, 200)
	client, _ := newClient(t, retry.WithClock(newAutoClock()))
	ctx := retry.NewContext(context.Background(), retry.WithRetryStatuses(500, 502, 503, 504, 429))
	assert.Equal(t, 200, get(t, ctx, client, srv.URL).StatusCode)
	assert.Len(t, srv.requests(), 2)
}

// A 500 that is not retried says why, and it is not "permanent": the
// status is not one the policy retries.
func TestA500NotRetriedSaysWhy(t *testing.T) {
	srv := newScriptServer(t, 500, 200)
	client, _ := newClient(t, retry.WithClock(newAutoClock()))
	resp := get(t, context.Background(), client, srv.URL)
	assert.Equal(t, 500, resp.StatusCode)
	rep, ok := retry.ReportOf(resp)
	require.True(t, ok)
	assert.Equal(t, 1, rep.Attempts)
	assert.ErrorIs(t, rep.Reason, retry.ErrStatusNotRetried)
	assert.NotErrorIs(t, rep.Reason, retry.ErrPermanent)
}

// A server's hint overrules the statuses: x-should-retry: true retries a
// 500, Stripe-Should-Retry: false ends the retries of a 503 at once.
func TestServerHintsOverruleTheStatuses(t *testing.T) {
	srv := newScriptServer(t, 500, 200)
	srv.headers[0] = http.Header{"X-Should-Retry": {"true"}}
	client, _ := newClient(t, retry.WithClock(newAutoClock()))
	assert.Equal(t, 200, get(t, context.Background(), client, srv.URL).StatusCode)
	assert.Len(t, srv.requests(), 2)

	srv = newScriptServer(t, 503, 200)
	srv.headers[0] = http.Header{"Stripe-Should-Retry": {"false"}}
	resp := get(t, context.Background(), client, srv.URL)
	assert.Equal(t, 503, resp.StatusCode)
	assert.Len(t, srv.requests(), 1)
	rep, ok := retry.ReportOf(resp)
	require.True(t, ok)
	assert.ErrorIs(t, rep.Reason, retry.ErrPushback)
}

// A response handed back after the retries ran out tells why, from the
// response alone: no Report threaded in through the context.
func TestReportOfAResponseHandedBack(t *testing.T) {
	srv := newScriptServer(t, 503)
	client, _ := newClient(t, retry.WithClock(newAutoClock()))
	resp := get(t, context.Background(), client, srv.URL)
	assert.Equal(t, 503, resp.StatusCode)
	rep, ok := retry.ReportOf(resp)
	require.True(t, ok)
	assert.Equal(t, retry.DefaultMaxAttempts, rep.Attempts)
	assert.ErrorIs(t, rep.Reason, retry.ErrAttemptsExhausted)
	assert.Equal(t, 503, rep.StatusCode)

	ok200 := newScriptServer(t, 200)
	_, ok = retry.ReportOf(get(t, context.Background(), client, ok200.URL))
	assert.False(t, ok, "a success has no give-up report")
}
