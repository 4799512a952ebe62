//go:build !race

package retry_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/protocol"
)

// A GET that brings its own deadline, through a Transport over a custom
// RoundTripper, costs no allocation more than through a plain http.Client:
// the round trip's state stays on the stack, and nothing is copied when
// nothing changes. (Allocation counts, not times: exact in any run. The
// race detector allocates on its own, hence the build tag.)
func TestTransportAddsNoAllocationToAGetWithADeadline(t *testing.T) {
	base := &memTransport{status: 200}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://mem.test/", nil)
	get := func(rt http.RoundTripper) float64 {
		return testing.AllocsPerRun(1000, func() {
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		})
	}
	assert.Equal(t, get(base), get(retry.NewTransport(base)))
}

// A Caller's call that brings its own deadline and needs no key costs the
// loop's mark on its context (so that a loop inside it makes one attempt)
// and the Call itself, and nothing more: the loop's state stays on the
// stack. The Call goes to the heap because protocol.Caller hands it to the
// loop, in package retry, through an interface (a protocol's Call, as
// grpcretry's, is usually part of a larger value there already). The
// attempt function is the protocol's, made once here.
func TestCallerCostsTwoAllocationsWithADeadline(t *testing.T) {
	cl := protocol.NewCaller()
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	attempt := func(context.Context, int, bool) protocol.Verdict { return protocol.Verdict{} }
	allocs := testing.AllocsPerRun(1000, func() {
		call := protocol.Call{Target: "svc", Method: "/svc/Get", Idempotent: true}
		if _, err := cl.Run(ctx, &call, attempt); err != nil {
			t.Fatal(err)
		}
	})
	assert.Equal(t, 2.0, allocs)
}
