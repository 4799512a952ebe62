package retry_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry"
)

// sdkLoop plays an SDK that retries on its own over client: it makes
// attempts requests (method, with the headers head gives attempt n of
// them), each after the one before failed, and returns how many reached
// the server in each.
func sdkLoop(t *testing.T, client *http.Client, srv *httptest.Server, hits *atomic.Int32, method string,
	attempts int, head func(n int, h http.Header)) []int {
	t.Helper()
	var per []int
	for n := 1; n <= attempts; n++ {
		before := hits.Load()
		var body *strings.Reader
		if method == http.MethodPost {
			body = strings.NewReader("{}")
		}
		var req *http.Request
		var err error
		if body != nil {
			req, err = http.NewRequestWithContext(context.Background(), method, srv.URL, body)
		} else {
			req, err = http.NewRequestWithContext(context.Background(), method, srv.URL, nil)
		}
		require.NoError(t, err)
		head(n, req.Header)
		resp, err := client.Do(req)
		if err == nil {
			readAll(t, resp)
		}
		per = append(per, int(hits.Load()-before))
	}
	return per
}

// alwaysFailing counts the requests it answers with 503.
func alwaysFailing(t *testing.T) (*httptest.Server, *atomic.Int32) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// An SDK's retries above the Transport multiplied ours: 3 AWS attempts of
// 4 each, 12 in all, for a call that always fails. Now the Transport yields:
// one attempt for each of the SDK's but its last, which gets what is left
// of ours, so in all max(M, ours) and one backoff of ours.
func TestAnAWSSDKsRetriesDoNotMultiplyOurs(t *testing.T) {
	for _, tc := range []struct {
		name        string
		sdkAttempts int
		ours        int
		want        []int
	}{
		{"standard retryer, 3", 3, 4, []int{1, 1, 2}},
		{"dynamodb, 4", 4, 4, []int{1, 1, 1, 1}},
		{"more than ours", 6, 4, []int{1, 1, 1, 1, 1, 1}},
		{"retries off", 1, 4, []int{4}},
		{"ours fewer", 3, 2, []int{1, 1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, hits := alwaysFailing(t)
			clk := newAutoClock()
			client, _ := newClient(t, retry.WithClock(clk), noRideThrough, retry.WithMaxAttempts(tc.ours))
			per := sdkLoop(t, client, srv, hits, http.MethodGet, tc.sdkAttempts, func(n int, h http.Header) {
				h.Set("amz-sdk-request", fmt.Sprintf("attempt=%d; max=%d", n, tc.sdkAttempts))
			})
			assert.Equal(t, tc.want, per)
			assert.LessOrEqual(t, sum(per), max(tc.sdkAttempts, tc.ours))
			assert.LessOrEqual(t, len(clk.Waits()), max(tc.ours-tc.sdkAttempts, 1), "at most what is left of our backoffs")
		})
	}
}

func TestSDKsThatSayTheyRetryGetOneAttemptEach(t *testing.T) {
	for _, tc := range []struct {
		name string
		head func(n int, h http.Header)
	}{
		{"stainless", func(n int, h http.Header) { h.Set("X-Stainless-Retry-Count", fmt.Sprint(n-1)) }},
		{"stripe", func(_ int, h http.Header) { h.Set("X-Stripe-Client-User-Agent", `{"lang":"go"}`) }},
		{"amz without max", func(n int, h http.Header) { h.Set("Amz-Sdk-Request", fmt.Sprintf("attempt=%d", n)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, hits := alwaysFailing(t)
			clk := newAutoClock()
			client, _ := newClient(t, retry.WithClock(clk), noRideThrough)
			per := sdkLoop(t, client, srv, hits, http.MethodGet, 3, tc.head)
			assert.Equal(t, []int{1, 1, 1}, per)
			assert.Empty(t, clk.Waits())
		})
	}
}

func TestWithoutYieldingIgnoresTheSDKsHeaders(t *testing.T) {
	srv, hits := alwaysFailing(t)
	client, _ := newClient(t, retry.WithClock(newAutoClock()), noRideThrough, retry.WithoutYielding())
	per := sdkLoop(t, client, srv, hits, http.MethodGet, 1, func(_ int, h http.Header) {
		h.Set("X-Stripe-Client-User-Agent", `{"lang":"go"}`)
	})
	assert.Equal(t, []int{4}, per)
}

// A key the caller sends again (a job's next round, a repeat after a
// crash) is not taken for an SDK's retry: each time, the request gets the
// Transport's retries (the chaos suites repeat their keys round after
// round and count on them).
func TestARepeatedKeyGetsOurRetriesEachTime(t *testing.T) {
	srv, hits := alwaysFailing(t)
	client, _ := newClient(t, retry.WithClock(newAutoClock()), noRideThrough, retry.WithKeysHonoured(),
		retry.WithoutYielding())
	per := sdkLoop(t, client, srv, hits, http.MethodPost, 3, func(_ int, h http.Header) {
		h.Set("Idempotency-Key", "k-1")
	})
	assert.Equal(t, []int{4, 4, 4}, per)
}
