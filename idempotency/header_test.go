package idempotency_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
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

// The response limit bounds what is stored, header included: a small body
// with a large header is over the limit like a large body.
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
	}), idempotency.WithMaxResponseBody(limit))
	p := problem(t, do(h, "x", withKey("k")), http.StatusInternalServerError)
	assert.Equal(t, idempotency.CodeResponseTooBig, p.Code)
	rec, err := e.store.Get(context.Background(), "", "k")
	require.NoError(t, err)
	assert.LessOrEqual(t, len(rec.Response), limit, "stored bytes")
	problem(t, do(h, "x", withKey("k")), http.StatusInternalServerError)
	assert.Equal(t, 1, runs)
}

// At the limit, counting everything stored, a response is stored; one byte
// more and it is not.
func TestResponseLimitIsExact(t *testing.T) {
	t.Parallel()
	// Measure the stored size of a response with an empty body first.
	sized := func(pad int) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("X-Pad", strings.Repeat("p", pad))
			_, _ = io.WriteString(w, "b")
		})
	}
	e := newEnv(t)
	require.Equal(t, http.StatusOK, do(e.handle(sized(0)), "x", withKey("probe")).Code)
	rec, err := e.store.Get(context.Background(), "", "probe")
	require.NoError(t, err)
	base := len(rec.Response)
	const limit = 500
	// Header bytes that bring the stored size to the limit: the value and,
	// past 127 bytes, one more byte of its length.
	pad := limit - base - 1
	require.GreaterOrEqual(t, pad, 128)

	at := do(e.handle(sized(pad), idempotency.WithMaxResponseBody(limit)), "x", withKey("at"))
	require.Equal(t, http.StatusOK, at.Code, at.Body.String())
	rec, err = e.store.Get(context.Background(), "", "at")
	require.NoError(t, err)
	assert.Len(t, rec.Response, limit)

	over := do(e.handle(sized(pad+1), idempotency.WithMaxResponseBody(limit)), "x", withKey("over"))
	assert.Equal(t, idempotency.CodeResponseTooBig, problem(t, over, http.StatusInternalServerError).Code)
}
