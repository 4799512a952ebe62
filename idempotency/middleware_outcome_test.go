package idempotency_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/idempotency"
)

func TestStaleLeaseIsTakenOverAndLateCompletionRejected(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	entered := make(chan int64, 2)
	release := make(chan struct{})
	h := e.handle(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ex := idempotency.FromContext(r.Context())
		entered <- ex.Attempt()
		if ex.Attempt() == 1 {
			<-release // the first holder stalls past its lease
		}
		idempotency.MarkStarted(r.Context())
		_, _ = io.WriteString(w, "attempt "+string(rune('0'+ex.Attempt())))
	}))

	firstDone := make(chan *httptest.ResponseRecorder)
	go func() { firstDone <- do(h, "x", withKey("k")) }()
	require.EqualValues(t, 1, <-entered)

	// Within the lease: in progress.
	e.clock.Add(testLease / 2)
	w := do(h, "x", withKey("k"))
	problem(t, w, http.StatusConflict)
	assert.Equal(t, "1", w.Header().Get("Retry-After"), "a short hint, not the 15 s left on the lease")

	// Past the lease: the retry takes over and completes.
	e.clock.Add(testLease)
	second := do(h, "x", withKey("k"))
	require.EqualValues(t, 2, <-entered)
	require.Equal(t, http.StatusOK, second.Code)
	require.Equal(t, "attempt 2", second.Body.String())

	// The original holder finishes late: fenced out, its result discarded.
	close(release)
	late := <-firstDone
	p := problem(t, late, http.StatusConflict)
	assert.Equal(t, "idempotency_lease_lost", p.Code)
	sameResponse(t, second, do(h, "x", withKey("k")))
	rec, err := e.store.Get(context.Background(), "", "k")
	require.NoError(t, err)
	assert.EqualValues(t, 2, rec.Attempt)
}

func TestKeyIsFreeAfterTTL(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var c counting
	h := e.handle(&c)
	first := do(h, "x", withKey("k"))
	e.clock.Add(testTTL - 1)
	sameResponse(t, first, do(h, "x", withKey("k")))
	e.clock.Add(1)
	again := do(h, "y", withKey("k")) // even with another body: the old record is gone
	require.Equal(t, "made:y", again.Body.String())
	require.Empty(t, again.Header().Get("Idempotent-Replayed"))
	assert.EqualValues(t, 2, c.runs.Load())
}

func TestPanickingHandlerStores500(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var runs atomic.Int64
	h := e.handle(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		_, _ = io.WriteString(w, "partial")
		panic("boom")
	}))
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader("x"))
	r.Header.Set("Idempotency-Key", "k")
	require.PanicsWithValue(t, "boom", func() { h.ServeHTTP(w, r) }, "the panic is re-raised")

	// Never stuck in progress: the retry gets the stored 500.
	replay := do(h, "x", withKey("k"))
	p := problem(t, replay, http.StatusInternalServerError)
	assert.Equal(t, "handler_panicked", p.Code)
	assert.Equal(t, "true", replay.Header().Get("Idempotent-Replayed"))
	assert.NotContains(t, replay.Body.String(), "partial")
	assert.EqualValues(t, 1, runs.Load())
}

func TestPanicAfterRejectionFreesKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var runs atomic.Int64
	h := e.handle(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) == 1 {
			w.WriteHeader(http.StatusBadRequest)
			panic(http.ErrAbortHandler)
		}
		w.WriteHeader(http.StatusCreated)
	}))
	require.Panics(t, func() { do(h, "x", withKey("k")) })
	assert.Zero(t, e.store.Len())
	require.Equal(t, http.StatusCreated, do(h, "x", withKey("k")).Code)
}

func TestResponseOverLimitStores500(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var runs atomic.Int64
	big := strings.Repeat("z", 100)
	h := e.handle(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		_, _ = io.WriteString(w, big)
	}), idempotency.WithMaxResponseBody(64))
	first := do(h, "x", withKey("k"))
	p := problem(t, first, http.StatusInternalServerError)
	assert.Equal(t, "response_too_large", p.Code)
	sameResponse(t, first, do(h, "x", withKey("k")))
	assert.EqualValues(t, 1, runs.Load(), "a completed operation never runs twice")
}

func TestLargeRejectionIsStreamedAndNotStored(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	big := strings.Repeat("e", 100)
	h := e.handle(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnprocessableEntity)
		_, _ = io.WriteString(w, big[:50])
		_, _ = io.WriteString(w, big[50:])
	}), idempotency.WithMaxResponseBody(64))
	w := do(h, "x", withKey("k"))
	require.Equal(t, http.StatusUnprocessableEntity, w.Code)
	require.Equal(t, big, w.Body.String())
	assert.Zero(t, e.store.Len())
}

func TestFlushIsBufferedAndHijackUnsupported(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var hijackErr error
	h := e.handle(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		_, _ = io.WriteString(w, "part1,")
		require.NoError(t, rc.Flush())
		_, _, hijackErr = rc.Hijack()
		_, _ = io.WriteString(w, "part2")
	}))
	client := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader("x"))
	r.Header.Set("Idempotency-Key", "k")
	h.ServeHTTP(client, r)
	require.ErrorIs(t, hijackErr, http.ErrNotSupported)
	require.Equal(t, "part1,part2", client.Body.String())
	// The header was sent once, after the handler returned, with the full length.
	assert.Equal(t, "11", client.Header().Get("Content-Length"))
	assert.Equal(t, "text/plain; charset=utf-8", client.Header().Get("Content-Type"))
	sameResponse(t, client, do(h, "x", withKey("k")))
}

// failingStore fails every call.
type failingStore struct{ idempotency.Store }

var errStoreDown = errors.New("store down")

func (failingStore) Claim(context.Context, idempotency.ClaimRequest) (idempotency.Claim, error) {
	return idempotency.Claim{}, errStoreDown
}

func TestStoreFailureIs503(t *testing.T) {
	t.Parallel()
	var c counting
	h := idempotency.Middleware(idempotency.NewRunner(failingStore{}), idempotency.SingleTenant)(&c)
	w := do(h, "x", withKey("k"))
	problem(t, w, http.StatusServiceUnavailable)
	assert.Equal(t, "1", w.Header().Get("Retry-After"))
	assert.Zero(t, c.runs.Load())
}

// A store failure is logged (slog's default logger), not only answered
// with a problem code: an operator sees why keyed requests fail. Not
// parallel: it swaps the default logger.
func TestStoreFailureIsLogged(t *testing.T) {
	var logged bytes.Buffer
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(&logged, nil)))
	h := idempotency.Middleware(idempotency.NewRunner(failingStore{}), idempotency.SingleTenant)(&counting{})
	problem(t, do(h, "x", withKey("k")), http.StatusServiceUnavailable)
	assert.Contains(t, logged.String(), "idempotency: the store is unavailable")
	assert.Contains(t, logged.String(), errStoreDown.Error())
}

func TestCorruptStoredResponseIs500(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	// Another program wrote something this package cannot read.
	c, err := e.store.Claim(ctx, idempotency.ClaimRequest{Key: "k", Fingerprint: idempotency.Fingerprint("POST", "/orders", "", []byte("x")), Lease: testLease, TTL: testTTL})
	require.NoError(t, err)
	f := c.Record.Fence()
	require.NoError(t, e.store.Complete(ctx, f, []byte{1, 200, 1, 5, 'X'}))
	var h counting
	w := do(e.handle(&h), "x", withKey("k"))
	problem(t, w, http.StatusInternalServerError)
	assert.Empty(t, w.Header().Get("X"))
	assert.Zero(t, h.runs.Load())
}

func TestNoBodyStatusesAndManyHeaders(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var writeErr error
	h := e.handle(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := range 20 {
			w.Header().Set("X-H"+strconv.Itoa(i), strings.Repeat("v", i))
		}
		w.WriteHeader(http.StatusNoContent)
		_, writeErr = w.Write([]byte("not allowed"))
	}))
	first := do(h, "x", withKey("k"))
	require.ErrorIs(t, writeErr, http.ErrBodyNotAllowed)
	require.Equal(t, http.StatusNoContent, first.Code)
	require.Zero(t, first.Body.Len())
	require.Empty(t, first.Header().Get("Content-Length"))
	sameResponse(t, first, do(h, "x", withKey("k")))
}

// permanentStore fails every claim with a permanent error.
type permanentStore struct{ idempotency.Store }

func (permanentStore) Claim(context.Context, idempotency.ClaimRequest) (idempotency.Claim, error) {
	return idempotency.Claim{}, retry.Permanent(errStoreDown)
}

// A store error that every retry would meet again is a 500 without
// Retry-After, never an invitation to retry.
func TestPermanentStoreFailureIs500(t *testing.T) {
	t.Parallel()
	var c counting
	h := idempotency.Middleware(idempotency.NewRunner(permanentStore{}), idempotency.SingleTenant)(&c)
	w := do(h, "x", withKey("k"))
	p := problem(t, w, http.StatusInternalServerError)
	assert.Equal(t, "idempotency_store_failed", p.Code)
	assert.Empty(t, w.Header().Get("Retry-After"))
	assert.Zero(t, c.runs.Load())
	require.NoError(t, retry.Permanent(nil))
	err := retry.Permanent(errStoreDown)
	require.True(t, retry.IsPermanent(err))
	require.ErrorIs(t, err, errStoreDown)
	assert.Equal(t, errStoreDown.Error(), err.Error())
	// A Runner's own permanent failures are marked too.
	_, err = idempotency.NewRunner(nil).Do(context.Background(), idempotency.Request{}, nil)
	require.True(t, retry.IsPermanent(err))
}
