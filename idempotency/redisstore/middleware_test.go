package redisstore_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/redisstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Two service instances, each with its own client and Runner behind the
// Middleware, share one Redis: 200 requests on 20 keys spread over both run
// each key once, and every answer for a key is the same.
func TestTwoInstancesRunEachKeyOnce(t *testing.T) {
	t.Parallel()
	first, _ := newStore(t)
	var (
		mu   sync.Mutex
		runs = map[string]int{}
	)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		idempotency.MarkStarted(r.Context())
		key := r.Header.Get("Idempotency-Key")
		mu.Lock()
		runs[key]++
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "order %s", key)
	})
	var servers []*httptest.Server
	for range 2 {
		s, err := redisstore.New(newClient(t), redisstore.WithPrefix(first.Prefix()))
		require.NoError(t, err)
		srv := httptest.NewServer(idempotency.Middleware(idempotency.NewRunner(s), idempotency.SingleTenant)(handler))
		t.Cleanup(srv.Close)
		servers = append(servers, srv)
	}
	const requests, keys, workers = 200, 20, 16
	var (
		wg      sync.WaitGroup
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
		assert.Equal(t, 1, runs[key], "executions of %s", key)
		for _, a := range answers[key] {
			if !strings.HasPrefix(a, "409 ") {
				assert.Equal(t, "201 order "+key, a)
			}
		}
	}
}
