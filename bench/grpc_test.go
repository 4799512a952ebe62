package bench

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The quick run's gRPC part: the harness counts, and our client keeps its
// promises (no duplicate under faults, at most ~1 attempt per call in an
// outage); no timing assertions.
func TestGRPCQuick(t *testing.T) {
	res := quickResults(t)
	require := assert.New(t)
	require.Len(res.GRPC.Libs, len(GRPCLibraries()))
	for _, r := range res.GRPC.Libs {
		d := r.Duplicates
		require.LessOrEqual(d.Executed-d.Duplicates, res.Settings.GRPC.Charges, r.Library.Name)
		if strings.HasPrefix(r.Library.Name, "exactlyonce") {
			require.Zero(d.Duplicates)
			require.Zero(d.Failures)
			require.Equal(res.Settings.GRPC.Charges, d.Executed)
		}
		require.Positive(r.OutageSeq.Requests)
		require.Positive(r.Storm.Requests)
	}
	var b strings.Builder
	require.NoError(WriteGRPCMarkdown(&b, res.GRPC))
	require.Contains(b.String(), "| total outage, attempts per call")
}

func BenchmarkGRPCCost(b *testing.B) {
	srv, err := startGRPCServer(nil, 0, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer srv.stop()
	for _, cc := range GRPCCostCases {
		for _, lib := range append(GRPCLibraries(), keyFloor) {
			b.Run(cc.Name+"/"+lib.Name, GRPCCostBenchmark(lib, cc, srv))
		}
	}
}
