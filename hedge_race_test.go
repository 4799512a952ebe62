package retry_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry"
)

// The losing send of a hedged attempt may still run in the base after
// RoundTrip returned, and the caller may reuse its request by then: the
// loser must share nothing with it. (Under -race this test fails if it does.)
func TestHedgedLoserSharesNothingWithTheCaller(t *testing.T) {
	var calls atomic.Int32
	loserDone := make(chan struct{})
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		first := calls.Add(1) == 1
		if !first {
			return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("fast")), Request: r}, nil
		}
		defer close(loserDone)
		defer func() { // a logging base: reads the request after its inner call
			for k, v := range r.Header {
				_, _ = k, len(v)
			}
			_ = r.URL.String()
		}()
		<-r.Context().Done() // slow: cancelled once the hedge won
		return nil, r.Context().Err()
	})
	tr := retry.NewTransport(base, retry.WithClock(newAutoClock()), retry.WithHedging(retry.Hedging{}))
	req, _ := http.NewRequest("GET", "http://mem.test/a", nil)
	req.Header.Set("X-Trace", "1")
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	assert.Equal(t, "fast", readAll(t, resp))
	for i := range 200 { // the caller reuses its request
		req.Header.Set("X-Trace", strconv.Itoa(i))
		req.URL.Path = "/" + strconv.Itoa(i)
	}
	<-loserDone
}

// trackedBody is a request body without GetBody whose collection a test
// can watch.
type trackedBody struct{ r io.Reader }

func (b *trackedBody) Read(p []byte) (int, error) { return b.r.Read(p) }
func (b *trackedBody) Close() error               { return nil }

// A key kept by the caller (from the Report, to repeat the request later)
// costs its own bytes only: the request, its body and the recording of it
// are collected.
func TestAKeptKeyKeepsNothingElseAlive(t *testing.T) {
	for _, script := range [][]int{{201}, {503, 201}} {
		t.Run(strconv.Itoa(len(script))+" attempts", func(t *testing.T) {
			var calls atomic.Int32
			base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				io.Copy(io.Discard, r.Body)
				r.Body.Close()
				code := script[min(int(calls.Add(1))-1, len(script)-1)]
				return &http.Response{StatusCode: code, Header: http.Header{}, Body: http.NoBody}, nil
			})
			tr := retry.NewTransport(base, retry.WithClock(newAutoClock()))
			key, collected := postAndKeepKey(t, tr)
			runtime.GC()
			runtime.GC()
			assert.True(t, collected(), "the request body was collected while its key is kept")
			assert.Regexp(t, `^"[0-9a-f-]{36}"$`, key)
			runtime.KeepAlive(key)
		})
	}
}

// postAndKeepKey makes a POST with a 1 MiB body and returns its key and a
// way to tell whether the body was collected.
func postAndKeepKey(t *testing.T, tr *retry.Transport) (string, func() bool) {
	body := &trackedBody{r: bytes.NewReader(make([]byte, 1<<20))}
	w := weak.Make(body)
	var rep retry.Report
	ctx, cancel := context.WithTimeout(retry.NewContext(context.Background(), retry.WithReport(&rep)), time.Hour)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://mem.test/", body)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	return rep.IdempotencyKey, func() bool { return w.Value() == nil }
}
