package mysqlstore_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/mysqlstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// orderHandler writes one order row per request in the completion
// transaction and counts its executions per key.
type orderHandler struct {
	prefix string
	mu     sync.Mutex
	runs   map[string]int
}

func (h *orderHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	key := r.Header.Get("Idempotency-Key")
	idempotency.MarkStarted(ctx)
	h.mu.Lock()
	h.runs[key]++
	h.mu.Unlock()
	if err := localWrite(ctx, h.prefix, key); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, "order %s", key)
}

// Two service instances, each with its own pool and Runner behind the
// Middleware, share one database: 200 requests on 20 keys spread over both
// run each key once, its order row committed with the response, and every
// answer for a key is the same.
func TestTwoInstancesRunEachKeyOnce(t *testing.T) {
	t.Parallel()
	_, prefix, _ := newStore(t)
	h := &orderHandler{prefix: prefix, runs: map[string]int{}}
	var servers []*httptest.Server
	var stores []*mysqlstore.Store
	for range 2 {
		s, err := mysqlstore.Open(testConfig(t), mysqlstore.WithTablePrefix(prefix))
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		srv := httptest.NewServer(idempotency.Middleware(idempotency.NewRunner(s), idempotency.SingleTenant)(h))
		t.Cleanup(srv.Close)
		servers, stores = append(servers, srv), append(stores, s)
	}
	const requests, keys, workers = 200, 20, 16
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		jobs    = make(chan int)
		answers = map[string][]string{}
	)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	for range workers {
		wg.Go(func() {
			for i := range jobs {
				key := fmt.Sprint("key-", i%keys)
				req, err := http.NewRequest(http.MethodPost, servers[(i/keys)%2].URL, strings.NewReader(`{"qty":1}`))
				if !assert.NoError(t, err) {
					continue
				}
				req.Header.Set("Idempotency-Key", key)
				res, err := client.Do(req)
				if !assert.NoError(t, err) {
					continue
				}
				b, _ := io.ReadAll(res.Body)
				_ = res.Body.Close()
				mu.Lock()
				answers[key] = append(answers[key], fmt.Sprint(res.StatusCode, " ", string(b)))
				mu.Unlock()
			}
		})
	}
	for i := range requests {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	for k := range keys {
		key := fmt.Sprint("key-", k)
		assert.Equal(t, 1, h.runs[key], "executions of %s", key)
		assert.True(t, written(t, stores[0], prefix, key))
		for _, a := range answers[key] {
			if !strings.HasPrefix(a, "409 ") {
				assert.Equal(t, "201 order "+key, a)
			}
		}
	}
	var rows int
	require.NoError(t, stores[0].DB().QueryRowContext(context.Background(), "SELECT COUNT(*) FROM `"+prefix+"local_writes`").Scan(&rows))
	assert.Equal(t, keys, rows)
}

// A handler whose statement failed and that answered 201 anyway: nothing
// it wrote commits, nothing is stored, the client gets 503, and its retry
// runs afresh.
func TestFailedStatementIsNeverCommitted(t *testing.T) {
	t.Parallel()
	s, prefix, _ := newStore(t)
	var fail atomic.Bool
	fail.Store(true)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		idempotency.MarkStarted(ctx)
		tx, _ := mysqlstore.TxFrom(ctx)
		_, _ = tx.ExecContext(ctx, "INSERT INTO `"+prefix+"local_writes` (name) VALUES ('order')")
		if fail.Load() {
			// A duplicate key; the handler does not look at the error.
			_, _ = tx.ExecContext(ctx, "INSERT INTO `"+prefix+"local_writes` (name) VALUES ('x'), ('x')")
		}
		w.WriteHeader(http.StatusCreated)
	})
	srv := httptest.NewServer(idempotency.Middleware(idempotency.NewRunner(s), idempotency.SingleTenant)(handler))
	defer srv.Close()
	post := func() int {
		req, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("{}"))
		require.NoError(t, err)
		req.Header.Set("Idempotency-Key", "k1")
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = res.Body.Close()
		return res.StatusCode
	}
	assert.Equal(t, http.StatusServiceUnavailable, post())
	assert.False(t, written(t, s, prefix, "order"), "the statement before the failure was committed")
	assert.False(t, written(t, s, prefix, "x"))
	fail.Store(false)
	assert.Equal(t, http.StatusCreated, post())
	assert.True(t, written(t, s, prefix, "order"))
}
