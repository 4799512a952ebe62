package idempotency_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/exactlyonce/retry/idempotency"
)

// benchBody is a 1 KiB JSON order.
var benchBody = []byte(`{"pad":"` + strings.Repeat("p", 1024-len(`{"pad":""}`)) + `"}`)

// orderHandler is a typical small JSON handler: decode the body, answer 201.
var orderHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	var order map[string]string
	if err := json.NewDecoder(r.Body).Decode(&order); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	idempotency.MarkStarted(r.Context())
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", "/orders/42")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]any{"id": 42, "status": "created", "size": len(order["pad"])})
})

func benchMiddleware(b *testing.B) http.Handler {
	return idempotency.Middleware(idempotency.NewRunner(idempotency.NewMemoryStore(nil)), idempotency.SingleTenant)(orderHandler)
}

// BenchmarkHTTP compares, over loopback HTTP, a POST of 1 KiB to the bare
// handler, its first execution behind the Middleware (a new key each time)
// and a replay (one key). The interleaved sub-benchmark sends one request of
// each kind per iteration, in rotating order, and reports the time ratios,
// which stay meaningful on a machine whose load changes between
// sub-benchmarks.
func BenchmarkHTTP(b *testing.B) {
	bare := httptest.NewServer(orderHandler)
	defer bare.Close()
	wrapped := httptest.NewServer(benchMiddleware(b))
	defer wrapped.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer client.CloseIdleConnections()

	post := func(b *testing.B, url, key string) {
		req, _ := http.NewRequest(http.MethodPost, url+"/orders", bytes.NewReader(benchBody))
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
	var run atomic.Int64 // keeps first-execution keys unique across runs
	firstKey := func() func(int) string {
		prefix := `"` + strconv.FormatInt(run.Add(1), 10) + "-"
		return func(i int) string { return prefix + strconv.Itoa(i) + `"` }
	}
	loop := func(b *testing.B, url string, key func(i int) string) {
		b.ReportAllocs()
		b.SetBytes(int64(len(benchBody)))
		for i := 0; b.Loop(); i++ {
			k := ""
			if key != nil {
				k = key(i)
			}
			post(b, url, k)
		}
	}
	b.Run("bare", func(b *testing.B) { loop(b, bare.URL, nil) })
	b.Run("first", func(b *testing.B) { loop(b, wrapped.URL, firstKey()) })
	b.Run("replay", func(b *testing.B) { loop(b, wrapped.URL, func(int) string { return `"replayed"` }) })
	b.Run("interleaved", func(b *testing.B) {
		key := firstKey()
		var spent [3]time.Duration // bare, first, replay
		n := 0
		for i := 0; b.Loop(); i++ {
			for j := range 3 {
				kind := (i + j) % 3
				start := time.Now()
				switch kind {
				case 0:
					post(b, bare.URL, "")
				case 1:
					post(b, wrapped.URL, key(i))
				case 2:
					post(b, wrapped.URL, `"replayed"`)
				}
				spent[kind] += time.Since(start)
			}
			n++
		}
		b.ReportMetric(float64(spent[0].Nanoseconds())/float64(n), "bare-ns/req")
		b.ReportMetric(float64(spent[1].Nanoseconds())/float64(n), "first-ns/req")
		b.ReportMetric(float64(spent[2].Nanoseconds())/float64(n), "replay-ns/req")
		b.ReportMetric(float64(spent[1])/float64(spent[0]), "first/bare")
		b.ReportMetric(float64(spent[2])/float64(spent[0]), "replay/bare")
		b.ReportMetric(0, "ns/op")
	})
}

// BenchmarkInProcess is BenchmarkHTTP without the network, to count the
// allocations the Middleware adds per request.
func BenchmarkInProcess(b *testing.B) {
	wrapped := benchMiddleware(b)
	run := func(b *testing.B, h http.Handler, key func(i int) string) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			r := httptest.NewRequest(http.MethodPost, "/orders", bytes.NewReader(benchBody))
			if key != nil {
				r.Header.Set("Idempotency-Key", key(i))
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusCreated {
				b.Fatalf("status %d: %s", w.Code, w.Body)
			}
		}
	}
	b.Run("bare", func(b *testing.B) { run(b, orderHandler, nil) })
	var runs atomic.Int64
	b.Run("first", func(b *testing.B) {
		prefix := strconv.FormatInt(runs.Add(1), 10) + "-"
		run(b, wrapped, func(i int) string { return prefix + strconv.Itoa(i) })
	})
	b.Run("replay", func(b *testing.B) { run(b, wrapped, func(int) string { return "replayed" }) })
	b.Run("interleaved", func(b *testing.B) {
		prefix := strconv.FormatInt(runs.Add(1), 10) + "-"
		var spent [3]time.Duration // bare, first, replay
		n := 0
		for i := 0; b.Loop(); i++ {
			for j := range 3 {
				kind := (i + j) % 3
				r := httptest.NewRequest(http.MethodPost, "/orders", bytes.NewReader(benchBody))
				h := http.Handler(orderHandler)
				switch kind {
				case 1:
					r.Header.Set("Idempotency-Key", prefix+strconv.Itoa(i))
					h = wrapped
				case 2:
					r.Header.Set("Idempotency-Key", "replayed")
					h = wrapped
				}
				w := httptest.NewRecorder()
				start := time.Now()
				h.ServeHTTP(w, r)
				spent[kind] += time.Since(start)
				if w.Code != http.StatusCreated {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
			}
			n++
		}
		b.ReportMetric(float64(spent[0].Nanoseconds())/float64(n), "bare-ns/req")
		b.ReportMetric(float64(spent[1].Nanoseconds())/float64(n), "first-ns/req")
		b.ReportMetric(float64(spent[2].Nanoseconds())/float64(n), "replay-ns/req")
		b.ReportMetric(float64(spent[1])/float64(spent[0]), "first/bare")
		b.ReportMetric(float64(spent[2])/float64(spent[0]), "replay/bare")
		b.ReportMetric(0, "ns/op")
	})
}
