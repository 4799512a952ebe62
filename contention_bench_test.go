package retry_test

import (
	"bytes"
	"io"
	"net/http"
	"runtime/metrics"
	"testing"

	"github.com/exactlyonce/retry"
)

// mutexWait returns the total time goroutines have spent blocked on a
// sync.Mutex or sync.RWMutex in this process.
func mutexWait() float64 {
	s := []metrics.Sample{{Name: "/sync/mutex/wait/total:seconds"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64 {
		return 0
	}
	return s[0].Value.Float64()
}

// BenchmarkTransportContention is the cost per request of one Transport
// shared by every goroutine, all sending to one host (the per-host state:
// answer meter, gates, budget, latency quantiles), next to a plain client
// in the same run. Run it with -cpu 1,2,4,8,16: the client's cost per
// request must not grow with the goroutines. Besides time it reports what
// contention costs that time alone hides on an oversubscribed machine:
// allocations per request and the mutex wait per request (every
// goroutine's time blocked on a lock, in ns).
func BenchmarkTransportContention(b *testing.B) {
	payload := bytes.Repeat([]byte("x"), 1024)
	for _, method := range []string{"GET", "POST+key"} {
		for _, c := range []struct {
			name   string
			client func(base http.RoundTripper) *http.Client
		}{
			{"plain", func(base http.RoundTripper) *http.Client { return &http.Client{Transport: base} }},
			{"retry", func(base http.RoundTripper) *http.Client { return &http.Client{Transport: retry.NewTransport(base)} }},
		} {
			b.Run(method+"/"+c.name, func(b *testing.B) {
				client := c.client(&memTransport{status: 200})
				b.ReportAllocs()
				before := mutexWait()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						resp, err := client.Do(costRequest(method, "http://mem.test/charge", payload))
						if err != nil || resp.StatusCode != 200 {
							b.Error(err)
							return
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
				})
				b.StopTimer()
				b.ReportMetric((mutexWait()-before)*1e9/float64(b.N), "mutex-wait-ns/op")
			})
		}
	}
}
