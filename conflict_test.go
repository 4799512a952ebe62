package retry_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/backoff"
)

// conflictServer answers every request with 409 and body, and with the
// header h; it counts the requests.
func conflictServer(h http.Header, body string, n *atomic.Int64) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		n.Add(1)
		for k, v := range h {
			w.Header()[k] = v
		}
		w.WriteHeader(http.StatusConflict)
		io.WriteString(w, body)
	}
}

// Issue 39: a keyed POST that got a plain 409 (a GitHub merge conflict, a
// resource that exists already) was taken as "the first copy is still
// running" and sent again without end: 201 attempts in 10 s, 392 for ten
// concurrent POSTs over 2 s, the budget untouched. A 409 without a
// Retry-After is a final answer: one attempt, handed back with its body.
func TestAPlainConflictIsAFinalAnswer(t *testing.T) {
	for _, kind := range []string{"net/http", "custom"} {
		t.Run(kind, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var n atomic.Int64
				base := bases(t, conflictServer(nil, `{"message":"Merge conflict"}`, &n))[kind]
				tr := retry.NewTransport(base, retry.WithTotalTimeout(10*time.Second))
				client := &http.Client{Transport: tr}
				var rep retry.Report
				req, _ := http.NewRequestWithContext(retry.NewContext(context.Background(), retry.WithReport(&rep)),
					"POST", "http://api.test/repos/o/r/merges", strings.NewReader(`{"base":"main","head":"topic"}`))
				resp, err := client.Do(req)
				require.NoError(t, err)
				assert.Equal(t, http.StatusConflict, resp.StatusCode)
				assert.Equal(t, `{"message":"Merge conflict"}`, readAll(t, resp), "the body is handed back intact")
				assert.Equal(t, int64(1), n.Load(), "one attempt")
				assert.Equal(t, 1, rep.Attempts)

				var wg sync.WaitGroup
				for range 10 {
					wg.Go(func() {
						resp, err := client.Post("http://api.test/repos/o/r/merges", "application/json", strings.NewReader("{}"))
						if assert.NoError(t, err) {
							resp.Body.Close()
							assert.Equal(t, http.StatusConflict, resp.StatusCode)
						}
					})
				}
				wg.Wait()
				assert.Equal(t, int64(11), n.Load(), "ten concurrent POSTs: ten attempts")
				st := tr.Budget().Stats()
				assert.Zero(t, st.RetriesAllowed+st.RetriesDenied, "%+v", st)
			})
		})
	}
}

// Issue 39: while an earlier copy still runs (a 409 with Retry-After to a
// keyed request), each wait for it is the backoff of one more retry than
// the wait before: it used to be the first retry's every time, so a copy
// that kept running was asked after every 100 ms or so.
func TestWaitsForAnEarlierCopyGrow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int64
		base := bases(t, conflictServer(http.Header{"Retry-After": {"0"}}, "in progress", &n))["net/http"]
		var mu sync.Mutex
		var asked []int
		bo := backoff.Func(func(retry int, _ time.Duration, _ float64) time.Duration {
			mu.Lock()
			asked = append(asked, retry)
			mu.Unlock()
			return 100 * time.Millisecond << (retry - 1)
		})
		client := &http.Client{Transport: retry.NewTransport(base, retry.WithBackoff(bo),
			retry.WithTotalTimeout(10*time.Second))}
		resp, err := client.Post("http://api.test/charges", "text/plain", strings.NewReader("x"))
		require.NoError(t, err)
		assert.Equal(t, http.StatusConflict, resp.StatusCode)
		assert.Equal(t, "in progress", readAll(t, resp))
		// 0.1 + 0.2 + ... + 3.2 s = 6.3 s; the next wait, 6.4 s, ends past the deadline.
		assert.Equal(t, []int{1, 2, 3, 4, 5, 6, 7}, asked)
		assert.Equal(t, int64(7), n.Load())
	})
}

// The figure of issue 39 with the defaults: a copy that keeps running for
// longer than the request's 10 s costs a handful of attempts, not hundreds.
func TestAnEarlierCopyThatKeepsRunningCostsAFewAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int64
		base := bases(t, conflictServer(http.Header{"Retry-After": {"0"}}, "in progress", &n))["net/http"]
		tr := retry.NewTransport(base, retry.WithTotalTimeout(10*time.Second))
		client := &http.Client{Transport: tr}
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() {
				resp, err := client.Post("http://api.test/charges", "text/plain", strings.NewReader("x"))
				if assert.NoError(t, err) {
					resp.Body.Close()
					assert.Equal(t, http.StatusConflict, resp.StatusCode)
				}
			})
		}
		wg.Wait()
		t.Logf("10 requests, 10 s each: %d attempts", n.Load())
		assert.LessOrEqual(t, n.Load(), int64(10*20), "each request asked fewer than 20 times")
		st := tr.Budget().Stats()
		assert.Zero(t, st.RetriesAllowed+st.RetriesDenied, "waiting for an earlier copy costs no budget: %+v", st)
	})
}
