package retry_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/exactlyonce/retry"
)

// memTransport answers every request in memory with a fixed status, after
// reading and closing the request body as a real transport would. It
// implements nothing of this package's: a custom RoundTripper as users have.
type memTransport struct {
	status int
	calls  atomic.Int64
}

func (m *memTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	m.calls.Add(1)
	if req.Body != nil {
		io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	return &http.Response{StatusCode: m.status, Body: http.NoBody, Header: http.Header{}, Request: req}, nil
}

// headerCopyFloor is the least a RoundTripper can do to add a header without
// modifying the caller's request: copy the request and its header map, add
// one constant value. It is the floor under any transport that sends a key.
type headerCopyFloor struct{ base http.RoundTripper }

func (f headerCopyFloor) RoundTrip(req *http.Request) (*http.Response, error) {
	r := *req
	r.Header = make(http.Header, len(req.Header)+1)
	for k, v := range req.Header {
		r.Header[k] = v
	}
	r.Header["Idempotency-Key"] = floorKey
	return f.base.RoundTrip(&r)
}

var floorKey = []string{`"6f1c1a2e-93b5-4c43-9a51-2f0c8f3e9d11"`}

// timerFloor is the least a RoundTripper can do to bound the wait for a
// response without modifying the caller's request: copy it with a
// cancellable context, arm a timer that cancels it, stop the timer when the
// headers arrive, and end the context when the body is closed. It is the
// floor under any transport that times an attempt.
type timerFloor struct{ base http.RoundTripper }

func (f timerFloor) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	t := time.AfterFunc(retry.DefaultAttemptTimeout, cancel)
	resp, err := f.base.RoundTrip(req.WithContext(ctx))
	t.Stop()
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = cancelBody{resp.Body, cancel}
	return resp, nil
}

type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// costClients are the clients a cost benchmark compares over one base: a
// plain http.Client (the baseline), the header-copy floor, the Transport
// with its defaults, with WithTotalTimeout (and, as its baseline, a plain
// client with the same Timeout), and with adaptive timeouts.
func costClients(base http.RoundTripper) []struct {
	name   string
	client *http.Client
} {
	return []struct {
		name   string
		client *http.Client
	}{
		{"plain", &http.Client{Transport: base}},
		{"floor", &http.Client{Transport: headerCopyFloor{base}}},
		{"timer-floor", &http.Client{Transport: timerFloor{base}}},
		{"retry", &http.Client{Transport: retry.NewTransport(base)}},
		{"plain-timeout", &http.Client{Transport: base, Timeout: 5 * time.Second}},
		{"retry-total", &http.Client{Transport: retry.NewTransport(base, retry.WithTotalTimeout(5*time.Second))}},
		{"retry-adaptive", &http.Client{Transport: retry.NewTransport(base, retry.WithAdaptiveTimeout(retry.AdaptiveTimeout{}))}},
	}
}

// costRequest makes one request of a cost benchmark: a GET, a 1 KiB POST,
// one with a Content-Type (as http.Client.Post sends it), or one that
// brings its own key.
func costRequest(method, url string, payload []byte) *http.Request {
	var body io.Reader
	if method != "GET" {
		body = bytes.NewReader(payload)
	}
	verb, _, _ := strings.Cut(method, "+")
	req, _ := http.NewRequest(verb, url, body)
	switch method {
	case "POST+type":
		req.Header = http.Header{"Content-Type": {"application/json"}}
	case "POST+key":
		req.Header = http.Header{"Idempotency-Key": {`"order-42"`}}
	}
	return req
}

// BenchmarkTransportCost is the library's cost per successful request next
// to a plain http.Client in the same run, over the bases users have:
// net/http's own *http.Transport on loopback ("net"), the same with a
// ResponseHeaderTimeout ("net-bounded"), and a custom in-memory
// RoundTripper that implements nothing of this package's ("mem"). The
// "floor" rows are a transport that only copies the request and adds a
// constant key header (what adding any header costs), the "timer-floor"
// rows one that only bounds the wait for the response with a timer (what
// bounding an attempt costs).
func BenchmarkTransportCost(b *testing.B) {
	payload := bytes.Repeat([]byte("x"), 1024)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
	}))
	defer srv.Close()
	netBase := srv.Client().Transport.(*http.Transport)
	defer netBase.CloseIdleConnections()
	bounded := netBase.Clone() // bounds its own waits: no timer of the Transport's
	bounded.ResponseHeaderTimeout = retry.DefaultAttemptTimeout
	defer bounded.CloseIdleConnections()
	for _, base := range []struct {
		name string
		rt   http.RoundTripper
		url  string
	}{
		{"net", netBase, srv.URL + "/charge"},
		{"net-bounded", bounded, srv.URL + "/charge"},
		{"mem", &memTransport{status: 200}, "http://mem.test/charge"},
	} {
		for _, method := range []string{"GET", "POST", "POST+type", "POST+key"} {
			for _, c := range costClients(base.rt) {
				b.Run(base.name+"/"+method+"/"+c.name, func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						resp, err := c.client.Do(costRequest(method, base.url, payload))
						if err != nil || resp.StatusCode != 200 {
							b.Fatal(err)
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
				})
			}
		}
	}
}

// BenchmarkOutageAttempts reports attempts per logical request during a total
// outage (a loopback server that always answers 503), with the Transport's
// defaults, 2,000 requests sequentially and from 50 concurrent callers, each
// with a 5 ms deadline (with ride-through on, a request in an outage ends at
// its deadline). It also reports how many requests ended at their deadline.
func BenchmarkOutageAttempts(b *testing.B) {
	var served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	for _, callers := range []int{1, 50} {
		name := "sequential"
		if callers > 1 {
			name = "concurrent50"
		}
		b.Run(name, func(b *testing.B) {
			var total, requests int64
			var atDeadline atomic.Int64
			for b.Loop() {
				tr := retry.NewTransport(nil)
				client := &http.Client{Transport: tr}
				before := served.Load()
				const n = 2000
				var wg sync.WaitGroup
				var next atomic.Int64
				for range callers {
					wg.Go(func() {
						for next.Add(1) <= n {
							ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
							req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
							resp, err := client.Do(req)
							cancel()
							switch {
							case errors.Is(err, retry.ErrDependencyDown):
								atDeadline.Add(1)
							case err != nil && !errors.Is(err, retry.ErrDeadline):
								b.Error(err)
								return
							case err == nil:
								resp.Body.Close()
							}
						}
					})
				}
				wg.Wait()
				tr.CloseIdleConnections()
				total += served.Load() - before
				requests += n
			}
			b.ReportMetric(float64(total)/float64(requests), "attempts/request")
			b.ReportMetric(float64(atDeadline.Load())/float64(requests), "waited-to-deadline/request")
		})
	}
}
