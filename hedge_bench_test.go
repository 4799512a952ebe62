package retry_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/exactlyonce/retry"
)

// BenchmarkHedgingTailLatency measures p50 and p99 latency against a server
// whose every 100th answer takes 50 ms, with hedging off and on, side by side.
func BenchmarkHedgingTailLatency(b *testing.B) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%100 == 0 {
			select { // the slow 1%
			case <-time.After(50 * time.Millisecond):
			case <-r.Context().Done():
			}
		}
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	for _, mode := range []struct {
		name string
		opts []retry.Option
	}{
		{"hedging=off", nil},
		{"hedging=on", []retry.Option{retry.WithHedging(retry.Hedging{MinDelay: 2 * time.Millisecond})}},
	} {
		b.Run(mode.name, func(b *testing.B) {
			var lat []time.Duration
			for b.Loop() {
				tr := retry.NewTransport(nil, mode.opts...)
				client := &http.Client{Transport: tr}
				for range 1000 {
					start := time.Now()
					resp, err := client.Get(srv.URL)
					if err != nil {
						b.Fatal(err)
					}
					resp.Body.Close()
					lat = append(lat, time.Since(start))
				}
				tr.CloseIdleConnections()
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2])/1e6, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100])/1e6, "p99-ms")
			b.ReportMetric(float64(lat[len(lat)*999/1000])/1e6, "p99.9-ms")
		})
	}
}
