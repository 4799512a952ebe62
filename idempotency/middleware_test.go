package idempotency_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/idempotency"
)

func TestMiddlewareRunsOnceAndReplays(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var c counting
	h := e.handle(&c)

	first := do(h, "one", withKey(`"k1"`))
	require.Equal(t, http.StatusCreated, first.Code)
	require.Equal(t, "made:one", first.Body.String())
	require.Empty(t, first.Header().Get("Idempotent-Replayed"))

	// The plain-token form names the same key.
	replay := do(h, "one", withKey("k1"))
	sameResponse(t, first, replay)
	assert.Equal(t, []string{"a", "b"}, replay.Header().Values("X-Multi"))
	assert.EqualValues(t, 1, c.runs.Load())
}

func TestConcurrentIdenticalRequestsRunOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const n = 100
	var runs atomic.Int64
	release := make(chan struct{})
	h := e.handle(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		<-release
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"order":42}`)
	}))

	results := make(chan *httptest.ResponseRecorder, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { results <- do(h, `{"item":1}`, withKey(`"same"`)) })
	}
	// Everyone but the owner is answered while the owner's handler blocks.
	var all []*httptest.ResponseRecorder
	for range n - 1 {
		w := <-results
		p := problem(t, w, http.StatusConflict)
		assert.Equal(t, "idempotency_key_in_progress", p.Code)
		// No execution has ended yet to learn from: the shortest hint, not
		// the 30 s left on the lease.
		assert.Equal(t, "1", w.Header().Get("Retry-After"))
		all = append(all, w)
	}
	close(release)
	wg.Wait()
	owner := <-results
	require.Equal(t, http.StatusCreated, owner.Code)
	require.EqualValues(t, 1, runs.Load())

	// After completion every repeat gets the same bytes.
	for range n {
		wg.Go(func() { results <- do(h, `{"item":1}`, withKey(`"same"`)) })
	}
	wg.Wait()
	for range n {
		sameResponse(t, owner, <-results)
	}
	require.EqualValues(t, 1, runs.Load())
	require.Len(t, all, n-1)
}

func TestFingerprintMismatchIs422(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var c counting
	h := e.handle(&c)
	require.Equal(t, http.StatusCreated, do(h, "one", withKey("k")).Code)

	for name, opts := range map[string][]reqOpt{
		"other body":   {withKey("k")},
		"other path":   {withKey("k"), withTarget("/refunds")},
		"other query":  {withKey("k"), withTarget("/orders?x=1")},
		"other method": {withKey("k"), withMethod(http.MethodPatch)},
	} {
		body := "one"
		if name == "other body" {
			body = "two"
		}
		p := problem(t, do(h, body, opts...), http.StatusUnprocessableEntity)
		assert.Equal(t, "idempotency_key_mismatch", p.Code, name)
	}
	assert.EqualValues(t, 1, c.runs.Load())
}

func TestQueryOrderDoesNotChangeFingerprint(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var c counting
	h := e.handle(&c)
	first := do(h, "x", withKey("k"), withTarget("/orders?b=2&a=1"))
	sameResponse(t, first, do(h, "x", withKey("k"), withTarget("/orders?a=1&b=2")))
	assert.EqualValues(t, 1, c.runs.Load())
}

func TestCallersAreIsolated(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var c counting
	h := e.handle(&c)
	a := do(h, "alice's", withKey("shared"), withTenant("alice"))
	require.Equal(t, "made:alice's", a.Body.String())
	// Same key, other caller, other body: no mismatch and no replay of alice's response.
	b := do(h, "bob's", withKey("shared"), withTenant("bob"))
	require.Equal(t, http.StatusCreated, b.Code)
	require.Equal(t, "made:bob's", b.Body.String())
	require.Empty(t, b.Header().Get("Idempotent-Replayed"))
	// Same key, other caller, same body: runs again.
	c2 := do(h, "alice's", withKey("shared"), withTenant("carol"))
	require.Empty(t, c2.Header().Get("Idempotent-Replayed"))
	assert.EqualValues(t, 3, c.runs.Load())
	sameResponse(t, a, do(h, "alice's", withKey("shared"), withTenant("alice")))
	sameResponse(t, b, do(h, "bob's", withKey("shared"), withTenant("bob")))
}

// validating answers 400 for the body "bad" before marking execution started,
// and otherwise marks it and answers with status (via ?status=).
func validating(runs *atomic.Int64, status int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		body, _ := io.ReadAll(r.Body)
		if string(body) == "bad" {
			http.Error(w, "invalid order", http.StatusBadRequest)
			return
		}
		idempotency.MarkStarted(r.Context())
		w.WriteHeader(status)
		_, _ = io.WriteString(w, "outcome:"+string(body))
	})
}

func TestRejectionIsNotStored(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var runs atomic.Int64
	h := e.handle(validating(&runs, http.StatusCreated))

	bad := do(h, "bad", withKey("k"))
	require.Equal(t, http.StatusBadRequest, bad.Code)
	require.Equal(t, "invalid order\n", bad.Body.String())
	require.Zero(t, e.store.Len(), "a rejection is not stored")
	// The same bad request runs again (nothing to replay)...
	require.Equal(t, http.StatusBadRequest, do(h, "bad", withKey("k")).Code)
	// ...and the corrected retry with the same key runs.
	good := do(h, "good", withKey("k"))
	require.Equal(t, http.StatusCreated, good.Code)
	require.Equal(t, "outcome:good", good.Body.String())
	sameResponse(t, good, do(h, "good", withKey("k")))
	assert.EqualValues(t, 3, runs.Load())
}

func TestErrorsAfterExecutionBeganAreStored(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusInternalServerError, http.StatusConflict, http.StatusNoContent} {
		e := newEnv(t)
		var runs atomic.Int64
		h := e.handle(validating(&runs, status))
		first := do(h, "x", withKey("k"))
		require.Equal(t, status, first.Code)
		sameResponse(t, first, do(h, "x", withKey("k")))
		assert.EqualValues(t, 1, runs.Load(), "status %d", status)
	}
}

func TestWithoutMarkOnly4xxAreRejections(t *testing.T) {
	t.Parallel()
	for status, stored := range map[int]bool{200: true, 201: true, 400: false, 404: false, 409: false, 500: true, 503: true} {
		e := newEnv(t)
		var runs atomic.Int64
		h := e.handle(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			runs.Add(1)
			w.WriteHeader(status)
		}))
		require.Equal(t, status, do(h, "x", withKey("k")).Code)
		second := do(h, "x", withKey("k"))
		require.Equal(t, status, second.Code)
		want := int64(2)
		if stored {
			want = 1
			require.Equal(t, "true", second.Header().Get("Idempotent-Replayed"))
		}
		assert.Equal(t, want, runs.Load(), "status %d", status)
	}
}

func TestBadKeysAre400(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var c counting
	h := e.handle(&c)
	for name, tc := range map[string]struct {
		opts []reqOpt
		code string
	}{
		"missing":          {nil, "idempotency_key_missing"},
		"missing on PATCH": {[]reqOpt{withMethod(http.MethodPatch)}, "idempotency_key_missing"},
		"empty":            {[]reqOpt{withKey("")}, "idempotency_key_invalid"},
		"empty quoted":     {[]reqOpt{withKey(`""`)}, "idempotency_key_invalid"},
		"256 bytes":        {[]reqOpt{withKey(strings.Repeat("k", 256))}, "idempotency_key_invalid"},
		"256 quoted":       {[]reqOpt{withKey(`"` + strings.Repeat("k", 256) + `"`)}, "idempotency_key_invalid"},
		"control char":     {[]reqOpt{withKey("ab\x01c")}, "idempotency_key_invalid"},
		"tab inside":       {[]reqOpt{withKey(`"a` + "\t" + `b"`)}, "idempotency_key_invalid"},
		"DEL":              {[]reqOpt{withKey("ab\x7f")}, "idempotency_key_invalid"},
		"non-ASCII":        {[]reqOpt{withKey("clé")}, "idempotency_key_invalid"},
		"two lines":        {[]reqOpt{withKey("a"), withKey("a")}, "idempotency_key_invalid"},
		"list":             {[]reqOpt{withKey(`"a", "b"`)}, "idempotency_key_invalid"},
		"unterminated":     {[]reqOpt{withKey(`"abc`)}, "idempotency_key_invalid"},
		"parameters":       {[]reqOpt{withKey(`"abc";x=1`)}, "idempotency_key_invalid"},
	} {
		p := problem(t, do(h, "x", tc.opts...), http.StatusBadRequest)
		assert.Equal(t, tc.code, p.Code, name)
	}
	assert.Zero(t, c.runs.Load(), "the handler never runs")
	assert.Zero(t, e.store.Len(), "nothing is stored")

	// The longest key is fine.
	require.Equal(t, http.StatusCreated, do(h, "x", withKey(strings.Repeat("k", 255))).Code)
}

// Every answer to a keyed request echoes its key as the request sent it,
// which tells a client (retry.Transport) that this server deduplicates
// keys; an answer that is not the key's (a missing or malformed key, a safe
// method passed through) does not.
func TestEveryKeyedAnswerEchoesTheKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var c counting
	h := e.handle(&c)
	echo := func(w *httptest.ResponseRecorder) []string { return w.Header()["Idempotency-Key"] }

	assert.Equal(t, []string{`"e1"`}, echo(do(h, "one", withKey(`"e1"`))), "executed")
	replay := do(h, "one", withKey("e1"))
	assert.Equal(t, "true", replay.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, []string{"e1"}, echo(replay), "replayed: this request's form of the key")
	mismatch := do(h, "another", withKey(`"e1"`))
	problem(t, mismatch, http.StatusUnprocessableEntity)
	assert.Equal(t, []string{`"e1"`}, echo(mismatch), "the key used with another request")

	started, release := make(chan struct{}), make(chan struct{})
	slow := e.handle(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		idempotency.MarkStarted(r.Context())
		close(started)
		<-release
		w.WriteHeader(http.StatusCreated)
	}))
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- do(slow, "slow", withKey(`"e2"`)) }()
	<-started
	inProgress := do(slow, "slow", withKey(`"e2"`))
	problem(t, inProgress, http.StatusConflict)
	assert.Equal(t, []string{`"e2"`}, echo(inProgress), "in progress")
	assert.NotEmpty(t, inProgress.Header().Get("Retry-After"))
	close(release)
	assert.Equal(t, []string{`"e2"`}, echo(<-done))

	missing := do(h, "x")
	problem(t, missing, http.StatusBadRequest)
	assert.Empty(t, echo(missing), "no key")
	assert.Empty(t, echo(do(h, "x", withKey(`"a", "b"`), withKey("c"))), "two key lines")
	assert.Empty(t, echo(do(h, "", withMethod(http.MethodGet), withKey("g"))), "a GET passes through")
}

func TestKeyHeaderIsConfigurable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var c counting
	h := e.handle(&c, idempotency.WithKeyHeader("x-request-key"))
	first := do(h, "x", withHeader("X-Request-Key", `"abc"`))
	require.Equal(t, http.StatusCreated, first.Code)
	sameResponse(t, first, do(h, "x", withHeader("X-Request-Key", "abc")))
	problem(t, do(h, "x", withKey("abc")), http.StatusBadRequest)
	assert.EqualValues(t, 1, c.runs.Load())
}

func TestMethods(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var c counting
	h := e.handle(&c)
	// Safe methods pass through, key or not.
	for range 2 {
		require.Equal(t, http.StatusCreated, do(h, "", withMethod(http.MethodGet), withKey("g")).Code)
	}
	// PUT without a key passes through; with one it is deduplicated.
	require.Equal(t, http.StatusCreated, do(h, "x", withMethod(http.MethodPut)).Code)
	require.Equal(t, http.StatusCreated, do(h, "x", withMethod(http.MethodPut), withKey("p")).Code)
	require.Equal(t, "true", do(h, "x", withMethod(http.MethodPut), withKey("p")).Header().Get("Idempotent-Replayed"))
	assert.EqualValues(t, 4, c.runs.Load())

	// Required methods are configurable.
	h = e.handle(&c, idempotency.WithRequiredMethods(http.MethodPut))
	problem(t, do(h, "x", withMethod(http.MethodPut)), http.StatusBadRequest)
	require.Equal(t, http.StatusCreated, do(h, "x").Code, "POST no longer needs a key")
}

func TestBodyOverLimitIs413(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var c counting
	h := e.handle(&c, idempotency.WithMaxRequestBody(8))
	p := problem(t, do(h, "123456789", withKey("k")), http.StatusRequestEntityTooLarge)
	assert.Equal(t, "request_body_too_large", p.Code)
	problem(t, do(h, "123456789", withKey("k"), withoutLength()), http.StatusRequestEntityTooLarge)
	assert.Zero(t, c.runs.Load())
	assert.Zero(t, e.store.Len())
	// At the limit it runs, and the handler reads the whole body.
	require.Equal(t, "made:12345678", do(h, "12345678", withKey("k"), withoutLength()).Body.String())
}

func TestCallerErrorIs401(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var c counting
	h := idempotency.Middleware(e.runner, func(*http.Request) (string, error) {
		return "", io.ErrUnexpectedEOF
	})(&c)
	problem(t, do(h, "x", withKey("k")), http.StatusUnauthorized)
	assert.Zero(t, c.runs.Load())
}

func TestHandlerSeesExecution(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var got *idempotency.Execution
	h := e.handle(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = idempotency.FromContext(r.Context())
	}))
	require.Equal(t, http.StatusOK, do(h, "x", withKey(`"k1"`), withTenant("alice")).Code)
	require.NotNil(t, got)
	assert.Equal(t, "alice", got.Caller())
	assert.Equal(t, "k1", got.Key())
	assert.EqualValues(t, 1, got.Attempt())
	assert.False(t, got.Resumed())
}
