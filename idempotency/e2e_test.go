package idempotency_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOverLoopback runs the Middleware behind a real net/http server.
func TestOverLoopback(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var c counting
	srv := httptest.NewServer(e.handle(&c))
	defer srv.Close()
	client := srv.Client()
	defer client.CloseIdleConnections()

	post := func(key, body string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/orders?b=1&a=2", strings.NewReader(body))
		require.NoError(t, err)
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, string(b)
	}

	first, body := post(`"e2e-1"`, "hello")
	require.Equal(t, http.StatusCreated, first.StatusCode)
	assert.Equal(t, "made:hello", body)
	assert.EqualValues(t, len(body), first.ContentLength)
	assert.Empty(t, first.Header.Get("Idempotent-Replayed"))

	replay, rbody := post("e2e-1", "hello")
	assert.Equal(t, http.StatusCreated, replay.StatusCode)
	assert.Equal(t, body, rbody)
	assert.Equal(t, "true", replay.Header.Get("Idempotent-Replayed"))
	assert.Equal(t, first.Header.Values("X-Multi"), replay.Header.Values("X-Multi"))
	assert.Equal(t, first.Header.Get("Content-Type"), replay.Header.Get("Content-Type"))
	assert.EqualValues(t, 1, c.runs.Load())

	mismatch, _ := post("e2e-1", "other")
	assert.Equal(t, http.StatusUnprocessableEntity, mismatch.StatusCode)
	assert.Equal(t, "application/problem+json", mismatch.Header.Get("Content-Type"))
	missing, _ := post("", "x")
	assert.Equal(t, http.StatusBadRequest, missing.StatusCode)
	assert.EqualValues(t, 1, c.runs.Load())
}
