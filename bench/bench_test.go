package bench

import (
	"testing"
)

// BenchmarkCost measures one successful request through each library with
// its defaults, in every CostCase: the library's own cost. Compare each with
// "plain http.Client" in the same case (go test -bench Cost -benchmem).
func BenchmarkCost(b *testing.B) {
	srv := costServer()
	defer srv.Close()
	for _, cc := range CostCases {
		for _, lib := range Libraries() {
			b.Run(cc.Name+"/"+lib.Name, CostBenchmark(lib, cc, srv.URL))
		}
	}
}
