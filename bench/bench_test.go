package bench

import (
	"net/http"
	"testing"
)

// BenchmarkCost measures one successful request through each library with its
// defaults, over an in-memory RoundTripper: the library's own cost. Compare
// each with "plain http.Client" (go test -bench Cost -benchmem).
func BenchmarkCost(b *testing.B) {
	for _, lib := range Libraries() {
		for _, m := range []string{http.MethodGet, http.MethodPost} {
			b.Run(lib.Name+"/"+m, CostBenchmark(lib, m))
		}
	}
}
