package pgstore_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/pgstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// postAs sends a keyed POST through h and returns the response.
func postAs(h http.Handler, key, caller string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader("x"))
	r.Header.Set("Idempotency-Key", key)
	r.Header.Set("X-Caller", caller)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func byCallerHeader(r *http.Request) (string, error) { return r.Header.Get("X-Caller"), nil }

var created = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.WriteHeader(http.StatusCreated)
	_, _ = fmt.Fprint(w, "made")
})

// A caller longer than a btree index entry works, as with MemoryStore: it
// used to fail every time, answered as a retryable 503.
func TestLongCallerThroughMiddleware(t *testing.T) {
	t.Parallel()
	s, _, _ := newStore(t)
	h := idempotency.Middleware(idempotency.NewRunner(s), byCallerHeader)(created)
	caller := "tenant-" + randomHex(3<<10)
	first := postAs(h, "k", caller)
	require.Equal(t, http.StatusCreated, first.Code, first.Body.String())
	replay := postAs(h, "k", caller)
	require.Equal(t, http.StatusCreated, replay.Code)
	assert.Equal(t, "true", replay.Header().Get("Idempotent-Replayed"))
	// The core API takes a key of any length too.
	res, err := idempotency.NewRunner(s).Do(context.Background(),
		idempotency.Request{Caller: caller, Key: randomHex(3 << 10), Fingerprint: "fp"},
		func(context.Context, *idempotency.Execution) ([]byte, error) { return []byte("ok"), nil })
	require.NoError(t, err)
	assert.Equal(t, "ok", string(res.Response))
}

// A store error that will recur on every retry (here a table dropped
// after the store was made) is a 500 without Retry-After: a 503 would
// invite retries that can never succeed.
func TestPermanentStoreErrorIsNotRetryable(t *testing.T) {
	t.Parallel()
	s, schema, _ := newStore(t)
	_, err := s.Pool().Exec(context.Background(), "DROP TABLE "+pgx.Identifier{schema, "idempotency_keys"}.Sanitize()+" CASCADE")
	require.NoError(t, err)
	_, err = s.Claim(context.Background(), claimReq("k"))
	require.True(t, retry.IsPermanent(err))
	w := postAs(idempotency.Middleware(idempotency.NewRunner(s), byCallerHeader)(created), "k", "alice")
	require.Equal(t, http.StatusInternalServerError, w.Code, w.Body.String())
	assert.Empty(t, w.Header().Get("Retry-After"))
	assert.Contains(t, w.Body.String(), "idempotency_store_failed")
}

// A store that cannot be reached is a 503 with Retry-After: a retry may work.
func TestUnreachableStoreIsRetryable(t *testing.T) {
	t.Parallel()
	cfg, err := pgxpool.ParseConfig("postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=5")
	require.NoError(t, err)
	s, err := pgstore.New(newPoolFrom(t, cfg))
	require.NoError(t, err)
	_, err = s.Claim(context.Background(), claimReq("k"))
	require.Error(t, err)
	require.False(t, retry.IsPermanent(err))
	w := postAs(idempotency.Middleware(idempotency.NewRunner(s), byCallerHeader)(created), "k", "alice")
	require.Equal(t, http.StatusServiceUnavailable, w.Code, w.Body.String())
	assert.Equal(t, "1", w.Header().Get("Retry-After"))
}
