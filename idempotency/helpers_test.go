package idempotency_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/idempotency"
)

const (
	testLease = 30 * time.Second
	testTTL   = 24 * time.Hour
)

// env is a Runner on a MemoryStore, both on one mock clock.
type env struct {
	clock  *clock.Mock
	store  *idempotency.MemoryStore
	runner *idempotency.Runner
}

func newEnv(t *testing.T) *env {
	t.Helper()
	mock := clock.NewMock()
	mock.Set(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	store := idempotency.NewMemoryStore(mock)
	return &env{
		clock: mock,
		store: store,
		runner: idempotency.NewRunner(store,
			idempotency.WithClock(mock), idempotency.WithLease(testLease), idempotency.WithTTL(testTTL)),
	}
}

// tenantHeader names the request header the tests' CallerFunc reads.
const tenantHeader = "X-Tenant"

func byTenant(r *http.Request) (string, error) {
	return r.Header.Get(tenantHeader), nil
}

// handle wraps h in the env's Middleware.
func (e *env) handle(h http.Handler, opts ...idempotency.Option) http.Handler {
	return idempotency.Middleware(e.runner, byTenant, opts...)(h)
}

// counting is a handler that counts its runs and answers 201 with
// "made:<body>".
type counting struct{ runs atomic.Int64 }

func (c *counting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.runs.Add(1)
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Add("X-Multi", "a")
	w.Header().Add("X-Multi", "b")
	w.WriteHeader(http.StatusCreated)
	_, _ = io.WriteString(w, "made:"+string(body))
}

type reqOpt func(*http.Request)

func withKey(v string) reqOpt    { return func(r *http.Request) { r.Header.Add("Idempotency-Key", v) } }
func withTenant(v string) reqOpt { return func(r *http.Request) { r.Header.Set(tenantHeader, v) } }
func withMethod(m string) reqOpt { return func(r *http.Request) { r.Method = m } }
func withTarget(u string) reqOpt {
	return func(r *http.Request) { r.URL, _ = r.URL.Parse(u); r.RequestURI = u }
}
func withoutLength() reqOpt         { return func(r *http.Request) { r.ContentLength = -1 } }
func withHeader(k, v string) reqOpt { return func(r *http.Request) { r.Header.Add(k, v) } }

// do sends a POST /orders with body through h.
func do(h http.Handler, body string, opts ...reqOpt) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(body))
	for _, o := range opts {
		o(r)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// problemDoc is an RFC 9457 problem detail as the Middleware writes it
// (docs/protocol.md).
type problemDoc struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	Code   string `json:"code"`
}

// problem decodes a problem response, checking its media type and status.
func problem(t *testing.T, w *httptest.ResponseRecorder, status int) problemDoc {
	t.Helper()
	require.Equal(t, status, w.Code, "body: %s", w.Body.String())
	require.Equal(t, "application/problem+json", w.Header().Get("Content-Type"))
	var p problemDoc
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &p))
	require.Equal(t, status, p.Status)
	require.NotEmpty(t, p.Title)
	require.NotEmpty(t, p.Code)
	return p
}

// sameResponse checks that replay carries first's status, header and body
// byte for byte, plus Idempotent-Replayed.
func sameResponse(t *testing.T, first, replay *httptest.ResponseRecorder) {
	t.Helper()
	require.Equal(t, first.Code, replay.Code)
	require.Equal(t, first.Body.Bytes(), replay.Body.Bytes())
	require.Equal(t, "true", replay.Header().Get("Idempotent-Replayed"))
	want, got := first.Header().Clone(), replay.Header().Clone()
	want.Set("Idempotent-Replayed", "true")
	for _, h := range []http.Header{want, got} { // each echoes its own request's key
		h.Del("Idempotency-Key")
		h.Del("X-Request-Key")
	}
	require.Equal(t, want, got)
}
