package idempotency_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	retry "github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/idempotency"
)

// roundTripper serves requests with a handler in memory, so that the test
// runs in a synctest bubble with fake time.
type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Three copies of one request sent at once, as a flaky network produces,
// through our own client against our own server with its default lease: the
// copies that find the first still running are told to come back soon, not
// after the whole lease (which the client would refuse to wait for), and all
// three end with the first copy's outcome.
func TestConcurrentDuplicatesThroughClientGetFirstOutcome(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var runs atomic.Int64
		release := make(chan struct{})
		h := idempotency.Middleware(idempotency.NewRunner(nil), idempotency.SingleTenant)(
			http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				runs.Add(1)
				<-release // still running when the other copies arrive
				w.WriteHeader(http.StatusCreated)
				_, _ = io.WriteString(w, "charged once")
			}))
		conflicts := make(chan string, 8)
		base := roundTripper(func(r *http.Request) (*http.Response, error) {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code == http.StatusConflict {
				conflicts <- w.Header().Get("Retry-After")
			}
			return w.Result(), nil
		})
		client := &http.Client{Transport: retry.NewTransport(base)}
		type answer struct {
			status int
			body   string
			err    error
		}
		answers := make(chan answer, 3)
		for range 3 {
			go func() {
				req, err := http.NewRequest(http.MethodPost, "http://payments.test/charges", strings.NewReader(`{"amount":100}`))
				if err != nil {
					answers <- answer{err: err}
					return
				}
				req.Header.Set("Idempotency-Key", `"charge-1"`)
				res, err := client.Do(req)
				if err != nil {
					answers <- answer{err: err}
					return
				}
				b, err := io.ReadAll(res.Body)
				_ = res.Body.Close()
				answers <- answer{res.StatusCode, string(b), err}
			}()
		}
		for range 2 {
			ra := <-conflicts
			assert.Equal(t, "1", ra, "Retry-After of a 409 while the first copy runs")
		}
		close(release)
		for range 3 {
			a := <-answers
			require.NoError(t, a.err)
			assert.Equal(t, http.StatusCreated, a.status, a.body)
			assert.Equal(t, "charged once", a.body)
		}
		assert.EqualValues(t, 1, runs.Load())
	})
}
