package pgstore_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/pgstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// orderHandler writes one order row per request in the completion
// transaction and counts its executions per key.
type orderHandler struct {
	schema string
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
	tx, ok := pgstore.TxFrom(ctx)
	if !ok {
		http.Error(w, "no transaction", http.StatusInternalServerError)
		return
	}
	if _, err := tx.Exec(ctx, "INSERT INTO "+table(h.schema, "local_writes")+" (name) VALUES ($1)", key); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, "order %s", key)
}

// newInstance is one service instance: its own pool, store, Runner and
// http.Server, on the shared schema.
func newInstance(t *testing.T, schema string, h http.Handler) *httptest.Server {
	t.Helper()
	store, err := pgstore.New(newPool(t), pgstore.WithSchema(schema))
	require.NoError(t, err)
	mw := idempotency.Middleware(idempotency.NewRunner(store), idempotency.SingleTenant)
	srv := httptest.NewServer(mw(h))
	t.Cleanup(srv.Close)
	return srv
}

// Two instances share the database; 200 requests with 20 keys spread over
// both run each key exactly once, and every completed answer for a key is
// the same.
func TestTwoInstancesRunEachKeyOnce(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	schema := newSchema(t, pool)
	h := &orderHandler{schema: schema, runs: map[string]int{}}
	servers := []*httptest.Server{newInstance(t, schema, h), newInstance(t, schema, h)}
	client := newClient(t)

	const requests, keys, workers = 200, 20, 16
	type answer struct {
		status   int
		body     string
		replayed bool
	}
	var (
		mu      sync.Mutex
		answers = map[string][]answer{}
		jobs    = make(chan int)
		wg      sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for i := range jobs {
				key := fmt.Sprint("key-", i%keys)
				srv := servers[(i/keys)%2] // each key goes to both instances
				req, err := http.NewRequest(http.MethodPost, srv.URL+"/orders", strings.NewReader(`{"qty":1}`))
				if !assert.NoError(t, err) {
					continue
				}
				req.Header.Set("Idempotency-Key", key)
				res, err := client.Do(req)
				if !assert.NoError(t, err) {
					continue
				}
				b, err := io.ReadAll(res.Body)
				_ = res.Body.Close()
				assert.NoError(t, err)
				mu.Lock()
				answers[key] = append(answers[key], answer{res.StatusCode, string(b), res.Header.Get("Idempotent-Replayed") == "true"})
				mu.Unlock()
			}
		})
	}
	for i := range requests {
		jobs <- i
	}
	close(jobs)
	wg.Wait()

	replays := 0
	for k := range keys {
		key := fmt.Sprint("key-", k)
		assert.Equal(t, 1, h.runs[key], "executions of %s", key)
		for _, a := range answers[key] {
			switch a.status {
			case http.StatusCreated:
				assert.Equal(t, "order "+key, a.body)
				if a.replayed {
					replays++
				}
			case http.StatusConflict: // the first request was still running
			default:
				t.Errorf("%s: unexpected answer %d %s", key, a.status, a.body)
			}
		}
	}
	assert.Len(t, h.runs, keys)
	assert.Positive(t, replays, "repeats were answered from the store")
	assert.Equal(t, keys, countRows(t, pool, schema, "local_writes"))
	var completed int
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT count(*) FROM "+table(schema, "idempotency_keys")+
		" WHERE status = 2 AND attempt = 1").Scan(&completed))
	assert.Equal(t, keys, completed)
}
