package retry_test

import (
	"context"
	"net/http"
	"strconv"
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

// A host that answers is not down because some requests fail. Sixty-four
// callers share a Transport and send 768 requests to a host that takes a
// millisecond for each: it answers 503 to every seventh request, always,
// and to every other request's first attempt. Failures that come at once
// from many requests, while other requests succeed a moment later, say
// something about those requests, not the host. The host used to be taken
// as down (64 first attempts failed in a row), and the run took seconds
// of waiting for probes instead of milliseconds.
func TestAHostThatAnswersIsNotDownBecauseSomeRequestsFail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			callers  = 64
			requests = 768
			service  = time.Millisecond
		)
		var (
			mu    sync.Mutex
			tries = map[int]int{}
		)
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			id, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
			if err != nil {
				return nil, err
			}
			mu.Lock()
			tries[id]++
			first := tries[id] == 1
			mu.Unlock()
			time.Sleep(service)
			code := 200
			if id%7 == 0 || first {
				code = 503
			}
			return respond(func(*http.Request) (int, string) { return code, "" })(r)
		})
		tr := retry.NewTransport(base, retry.WithBackoff(backoff.Constant(time.Millisecond)),
			retry.WithBudget(retry.NewBudget(0.1, 1e6, 1e6)))
		client := &http.Client{Transport: tr}
		start := time.Now()
		var (
			next      atomic.Int64
			wg        sync.WaitGroup
			succeeded atomic.Int64
			refused   atomic.Int64
		)
		for range callers {
			wg.Go(func() {
				for {
					id := int(next.Add(1))
					if id > requests {
						return
					}
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					resp, err := client.Do(mustRequest(ctx, "http://dep.test/"+strconv.Itoa(id)))
					cancel()
					require.NoError(t, err, "request %d", id)
					resp.Body.Close()
					switch resp.StatusCode {
					case 200:
						succeeded.Add(1)
					case 503:
						refused.Add(1)
					}
				}
			})
		}
		wg.Wait()
		took := time.Since(start)
		st := tr.Dependencies()[0]
		t.Logf("%d requests in %v: %d succeeded, %d refused; %+v", requests, took, succeeded.Load(), refused.Load(), st)
		assert.Equal(t, int64(requests-requests/7), succeeded.Load(), "every request the host serves succeeds")
		assert.Equal(t, int64(requests/7), refused.Load(), "the requests it refuses get its 503")
		assert.Zero(t, st.Outages, "the host was never down: %+v", st)
		assert.Less(t, took, 200*time.Millisecond, "the run takes what its requests take, not probe intervals")
	})
}
