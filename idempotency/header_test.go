package idempotency_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/idempotency"
)

// lateHeaders changes its header after the header was written: explicitly
// (WriteHeader) or implicitly (the first Write), through the map it held
// and through a fresh Header call.
func lateHeaders(explicit bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Early", "early")
		h.Set("Content-Type", "text/plain")
		if explicit {
			w.WriteHeader(http.StatusCreated)
		}
		_, _ = io.WriteString(w, "body")
		h.Set("X-Late", "late")
		h["X-Early"][0] = "changed in place"
		h.Set("Content-Type", "application/json")
		w.Header().Set("X-Later", "later")
		_, _ = io.WriteString(w, "!")
	})
}

// Header changes after the header was written are neither sent nor stored,
// as with plain net/http.
func TestHeadersAfterWriteHeaderAreIgnored(t *testing.T) {
	t.Parallel()
	for _, explicit := range []bool{true, false} {
		e := newEnv(t)
		plain := httptest.NewServer(lateHeaders(explicit))
		wrapped := httptest.NewServer(e.handle(lateHeaders(explicit)))
		get := func(url, key string) *http.Response {
			req, err := http.NewRequest(http.MethodPost, url, strings.NewReader("x"))
			require.NoError(t, err)
			req.Header.Set("Idempotency-Key", key)
			res, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			_, _ = io.Copy(io.Discard, res.Body)
			_ = res.Body.Close()
			return res
		}
		want := get(plain.URL, "k")
		for _, res := range []*http.Response{get(wrapped.URL, "k"), get(wrapped.URL, "k")} { // first, replay
			assert.Equal(t, want.StatusCode, res.StatusCode)
			for _, name := range []string{"X-Early", "X-Late", "X-Later", "Content-Type"} {
				assert.Equal(t, want.Header.Values(name), res.Header.Values(name), "%s (explicit WriteHeader: %v)", name, explicit)
			}
		}
		plain.Close()
		wrapped.Close()
	}
}

// The header's room bounds what is stored too: a small body with a large
// header is over the limit like a large body.
func TestResponseLimitCoversHeader(t *testing.T) {
	t.Parallel()
	const limit = 1 << 10
	e := newEnv(t)
	var runs int
	h := e.handle(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs++
		for i := range 64 {
			w.Header().Set(fmt.Sprint("X-H", i), strings.Repeat("v", 16<<10))
		}
		_, _ = io.WriteString(w, "small body")
	}), idempotency.WithMaxResponseHeader(limit))
	p := problem(t, do(h, "x", withKey("k")), http.StatusInternalServerError)
	assert.Equal(t, "response_too_large", p.Code)
	rec, err := e.store.Get(context.Background(), "", "k")
	require.NoError(t, err)
	assert.LessOrEqual(t, len(rec.Response), limit, "stored bytes")
	problem(t, do(h, "x", withKey("k")), http.StatusInternalServerError)
	assert.Equal(t, 1, runs)
}

// At each limit a response is stored; one byte more and it is not: a body
// of the body limit, and a status, header and framing of the header's room.
func TestResponseLimitIsExact(t *testing.T) {
	t.Parallel()
	sized := func(pad, body int) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("X-Pad", strings.Repeat("p", pad))
			_, _ = io.WriteString(w, strings.Repeat("b", body))
		})
	}
	e := newEnv(t)
	// Measure the stored size of a response with a one-byte pad first.
	require.Equal(t, http.StatusOK, do(e.handle(sized(1, 1)), "x", withKey("probe")).Code)
	rec, err := e.store.Get(context.Background(), "", "probe")
	require.NoError(t, err)
	base := len(rec.Response) - 1 // all but the body
	const limit = 500
	// Header bytes that bring the rest to the limit: the value and, past
	// 127 bytes, one more byte of its length.
	pad := limit - base
	require.GreaterOrEqual(t, pad, 128)
	stored := func(key string, h http.Handler) (int, int) {
		w := do(h, "x", withKey(key))
		rec, err := e.store.Get(context.Background(), "", key)
		require.NoError(t, err)
		return w.Code, len(rec.Response)
	}

	code, n := stored("head-at", e.handle(sized(pad, 1), idempotency.WithMaxResponseHeader(limit)))
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, limit+1, n, "the header's room, and the body")
	code, _ = stored("head-over", e.handle(sized(pad+1, 1), idempotency.WithMaxResponseHeader(limit)))
	assert.Equal(t, http.StatusInternalServerError, code)

	code, n = stored("body-at", e.handle(sized(1, limit), idempotency.WithMaxResponseBody(limit)))
	assert.Equal(t, http.StatusOK, code)
	assert.Greater(t, n, limit, "the body, and the rest")
	code, _ = stored("body-over", e.handle(sized(1, limit+1), idempotency.WithMaxResponseBody(limit)))
	assert.Equal(t, http.StatusInternalServerError, code)
}

// With the default limits, a handler's 1 MiB body with ordinary headers is
// stored and replayed as it was: the header has an allowance of its own.
// (The limit used to count the header within the 1 MiB, so this answered
// 500 response_too_large, and the handler's real answer was lost.)
func TestDefaultLimitStoresAOneMiBBody(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	body := strings.Repeat("b", 1<<20)
	var runs atomic.Int64
	h := e.handle(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Location", "/orders/1")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, body)
	}))
	first := do(h, "x", withKey("k"))
	require.Equal(t, http.StatusCreated, first.Code, "the handler's answer, not a problem")
	require.Equal(t, len(body), first.Body.Len())
	assert.Equal(t, "/orders/1", first.Header().Get("Location"))
	sameResponse(t, first, do(h, "x", withKey("k")))
	assert.EqualValues(t, 1, runs.Load())
}

// The header's allowance bounds what a record holds however large the
// header: with the defaults, a 1 MiB header is over it like a large body.
func TestDefaultLimitBoundsTheHeader(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	h := e.handle(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := range 64 {
			w.Header().Set(fmt.Sprint("X-H", i), strings.Repeat("v", 16<<10))
		}
		_, _ = io.WriteString(w, "small body")
	}))
	p := problem(t, do(h, "x", withKey("k")), http.StatusInternalServerError)
	assert.Equal(t, "response_too_large", p.Code)
	rec, err := e.store.Get(context.Background(), "", "k")
	require.NoError(t, err)
	assert.Less(t, len(rec.Response), 1<<10, "the small problem is stored instead")
}
