package pgstore_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/pgstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// insertRow writes name into local_writes through the transaction in ctx,
// with the statement's own context sctx.
func insertRow(ctx, sctx context.Context, schema, name string) error {
	tx, ok := pgstore.TxFrom(ctx)
	if !ok {
		return errNoTx
	}
	_, err := tx.Exec(sctx, "INSERT INTO "+table(schema, "local_writes")+" (name) VALUES ($1)", name)
	return err
}

// failWith answers 500 after a failed statement, having tried to roll back as
// a handler would (the store refuses: it owns the transaction).
func failWith(w http.ResponseWriter, r *http.Request, err error) {
	if tx, ok := pgstore.TxFrom(r.Context()); ok {
		_ = tx.Rollback(r.Context())
	}
	http.Error(w, err.Error(), http.StatusInternalServerError)
}

// A client disconnecting between the two writes of a transfer, over a real
// connection, does not decide the outcome: the handler's context outlives
// the connection, both rows commit with the response, and the retry
// replays it. (It used to commit the debit with a stored 500.)
func TestClientDisconnectBetweenWrites(t *testing.T) {
	t.Parallel()
	s, schema, _ := newStore(t)
	entered := make(chan struct{}, 1)
	clientGone := make(chan struct{})
	transfer := idempotency.Middleware(idempotency.NewRunner(s), idempotency.SingleTenant)(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx := r.Context()
			idempotency.MarkStarted(ctx)
			if err := insertRow(ctx, ctx, schema, "debit"); err != nil {
				failWith(w, r, err)
				return
			}
			entered <- struct{}{}
			<-clientGone
			if err := insertRow(ctx, ctx, schema, "credit"); err != nil {
				failWith(w, r, err)
				return
			}
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, "transferred")
		}))
	var first sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		first.Do(func() { go func() { <-r.Context().Done(); close(clientGone) }() })
		transfer.ServeHTTP(w, r)
	}))
	defer srv.Close()
	client := srv.Client()
	defer client.CloseIdleConnections()
	send := func(ctx context.Context) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/transfers", strings.NewReader("100"))
		require.NoError(t, err)
		req.Header.Set("Idempotency-Key", "transfer-1")
		return client.Do(req)
	}
	ctx, cancel := context.WithCancel(context.Background())
	failed := make(chan error, 1)
	go func() {
		res, err := send(ctx)
		if err == nil {
			_ = res.Body.Close()
		}
		failed <- err
	}()
	<-entered
	cancel()
	require.Error(t, <-failed)

	// The first attempt finishes on its own; its record tells when.
	waitFor(t, func() bool {
		rec, err := s.Get(context.Background(), "", "transfer-1")
		return err == nil && rec.State == idempotency.StateCompleted
	})
	res, err := send(context.Background())
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	require.Equal(t, http.StatusCreated, res.StatusCode, "%s", body)
	assert.Equal(t, "transferred", string(body))
	assert.Equal(t, "true", res.Header.Get("Idempotent-Replayed"))
	assert.True(t, written(t, s.Pool(), schema, "debit"))
	assert.True(t, written(t, s.Pool(), schema, "credit"))
}

// problemCode decodes the code of a problem response.
func problemCode(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	var p struct{ Code string }
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &p), "%s", w.Body.String())
	return p.Code
}

// wantRolledBack checks the answer to an attempt whose transaction failed
// for a reason a retry may get past: a problem that says a retry is safe,
// nothing committed, the key free.
func wantRolledBack(t *testing.T, s *pgstore.Store, schema string, w *httptest.ResponseRecorder, key string, rows ...string) {
	t.Helper()
	wantRolledBackAs(t, s, schema, w, http.StatusServiceUnavailable, key, rows...)
}

// wantRolledBackAs is wantRolledBack with the status: 503 with Retry-After,
// or 500 without it for a failure every retry would meet again.
func wantRolledBackAs(t *testing.T, s *pgstore.Store, schema string, w *httptest.ResponseRecorder, status int, key string, rows ...string) {
	t.Helper()
	require.Equal(t, status, w.Code, "%s", w.Body.String())
	assert.Equal(t, "transaction_rolled_back", problemCode(t, w))
	if status == http.StatusServiceUnavailable {
		assert.Equal(t, "1", w.Header().Get("Retry-After"))
	} else {
		assert.Empty(t, w.Header().Get("Retry-After"))
	}
	for _, name := range rows {
		assert.False(t, written(t, s.Pool(), schema, name), "row %q committed", name)
	}
	_, err := s.Get(context.Background(), "", key)
	assert.ErrorIs(t, err, idempotency.ErrNotFound, "the key is still held")
}

// A statement of the handler's transaction that fails (here on a context
// that is already done, so it never reaches the server and the server's
// transaction stays healthy) fails the whole attempt: the earlier write does
// not commit, the handler's 500 is not stored, the key is free, and the
// retry runs cleanly.
func TestFailedStatementNeverCommitsPartially(t *testing.T) {
	t.Parallel()
	s, schema, _ := newStore(t)
	var attempts atomic.Int64
	h := idempotency.Middleware(idempotency.NewRunner(s), idempotency.SingleTenant)(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx := r.Context()
			idempotency.MarkStarted(ctx)
			sctx := ctx
			if attempts.Add(1) == 1 {
				done, cancel := context.WithCancel(ctx)
				cancel()
				sctx = done
			}
			if err := insertRow(ctx, ctx, schema, "debit"); err != nil {
				failWith(w, r, err)
				return
			}
			if err := insertRow(ctx, sctx, schema, "credit"); err != nil {
				failWith(w, r, err)
				return
			}
			w.WriteHeader(http.StatusCreated)
		}))
	wantRolledBack(t, s, schema, postAs(h, "k", ""), "k", "debit", "credit")
	require.Equal(t, http.StatusCreated, postAs(h, "k", "").Code)
	assert.True(t, written(t, s.Pool(), schema, "debit"))
	assert.True(t, written(t, s.Pool(), schema, "credit"))
	assert.Equal(t, "true", postAs(h, "k", "").Header().Get("Idempotent-Replayed"))
}

// A first statement that cannot even get a connection (a done context, as
// a dead database or an exhausted pool gives) is a failed transaction too:
// the handler's 500 is not stored as a completed record with no effect.
func TestFirstStatementWithoutConnectionIsNotStored(t *testing.T) {
	t.Parallel()
	s, schema, _ := newStore(t)
	var attempts atomic.Int64
	h := idempotency.Middleware(idempotency.NewRunner(s), idempotency.SingleTenant)(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx := r.Context()
			idempotency.MarkStarted(ctx)
			sctx := ctx
			if attempts.Add(1) == 1 {
				done, cancel := context.WithCancel(ctx)
				cancel()
				sctx = done
			}
			if err := insertRow(ctx, sctx, schema, "order"); err != nil {
				failWith(w, r, err)
				return
			}
			w.WriteHeader(http.StatusCreated)
		}))
	wantRolledBack(t, s, schema, postAs(h, "k", ""), "k", "order")
	require.Equal(t, http.StatusCreated, postAs(h, "k", "").Code)
	assert.True(t, written(t, s.Pool(), schema, "order"))
}

// A statement that fails inside a savepoint fails the transaction unless the
// savepoint is rolled back: a handler may recover from a failure that way,
// as PostgreSQL allows, and its other writes then commit. Left open, or
// released, the failed savepoint fails the whole transaction.
func TestSavepointFailures(t *testing.T) {
	t.Parallel()
	s, schema, _ := newStore(t)
	lw := table(schema, "local_writes")
	h := idempotency.Middleware(idempotency.NewRunner(s), idempotency.SingleTenant)(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx := r.Context()
			idempotency.MarkStarted(ctx)
			key := r.Header.Get("Idempotency-Key")
			tx, _ := pgstore.TxFrom(ctx)
			if _, err := tx.Exec(ctx, "INSERT INTO "+lw+" (name) VALUES ($1)", key+"-outer"); err != nil {
				failWith(w, r, err)
				return
			}
			sp, err := tx.Begin(ctx)
			if err != nil {
				failWith(w, r, err)
				return
			}
			sctx := ctx
			if strings.HasPrefix(key, "unsent") {
				done, cancel := context.WithCancel(ctx)
				cancel()
				sctx = done
			}
			// "dup" violates the primary key on the server; "unsent" never
			// reaches it.
			_, err = sp.Exec(sctx, "INSERT INTO "+lw+" (name) VALUES ($1), ($1)", key+"-inner")
			switch {
			case err == nil:
				t.Errorf("%s: the insert did not fail", key)
			case strings.HasSuffix(key, "-recover"):
				if err := sp.Rollback(ctx); err != nil {
					failWith(w, r, err)
					return
				}
			case strings.HasSuffix(key, "-release"):
				_ = sp.Commit(ctx)
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			default: // left open
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			w.WriteHeader(http.StatusCreated)
		}))
	// A duplicate key fails the same way on every retry: 500, no Retry-After.
	for _, key := range []string{"dup-open", "dup-release"} {
		wantRolledBackAs(t, s, schema, postAs(h, key, ""), http.StatusInternalServerError, key, key+"-outer")
	}
	for _, key := range []string{"unsent-open", "unsent-release"} {
		wantRolledBack(t, s, schema, postAs(h, key, ""), key, key+"-outer")
	}
	for _, key := range []string{"dup-recover", "unsent-recover"} {
		require.Equal(t, http.StatusCreated, postAs(h, key, "").Code, key)
		assert.True(t, written(t, s.Pool(), schema, key+"-outer"), key)
		assert.False(t, written(t, s.Pool(), schema, key+"-inner"), key)
	}
}
