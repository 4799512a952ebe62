package bench

import (
	"strings"
	"testing"
	"time"

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
	require.Contains(b.String(), "| closed loop, ")
	require.Contains(b.String(), "| finite-capacity server slowed")
	require.Contains(b.String(), "| retry storm, service taking")
}

// The gRPC storm against a slow service, the closed loop and the
// finite-capacity server count what they should, for every library; no
// timing assertions.
func TestGRPCScenarioCounts(t *testing.T) {
	res := quickResults(t)
	s := res.Settings.GRPC
	offered := int(s.Overload.Offer.Seconds() * float64(s.Overload.Rate))
	for _, r := range res.GRPC.Libs {
		name := "gRPC " + r.Library.Name
		checkStormCounts(t, name, s.Storm, r.Storm)
		checkStormCounts(t, name+", slow server", s.SlowStorm, r.SlowStorm)
		checkClosedLoopCounts(t, name, s.ClosedLoop, r.Library.RideThroughOff != nil, r.ClosedLoop)
		checkOverloadCounts(t, name, offered, r.Library.Retries, r.Overload)
		checkOverloadCounts(t, name+", queueing server", offered, r.Library.Retries, r.Queueing)
	}
}

// Per-attempt timeouts are set like for like where a library has them:
// ours and go-grpc-middleware; grpc-go's retryPolicy cannot, and the bare
// client has only the deadline. Riding through can be turned off for ours
// alone.
func TestGRPCAttemptTimeoutsLikeForLike(t *testing.T) {
	for _, l := range GRPCLibraries() {
		ours := strings.HasPrefix(l.Name, "exactlyonce")
		want := ours || strings.HasPrefix(l.Name, "go-grpc-middleware")
		if (l.Bounded != nil) != want {
			t.Errorf("%s: has an attempt timeout of its own: %v, want %v", l.Name, l.Bounded != nil, want)
		}
		if (l.RideThroughOff != nil) != ours {
			t.Errorf("%s: riding through can be turned off: %v", l.Name, l.RideThroughOff != nil)
		}
		if len(l.DialBounded(time.Second)) < len(l.Dial()) {
			t.Errorf("%s: bounded dial options lost the library's own", l.Name)
		}
	}
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
