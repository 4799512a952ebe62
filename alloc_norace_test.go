//go:build !race

package retry_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/uuid"
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

// A GET with the defaults (no deadline: every attempt bounded by
// DefaultAttemptTimeout) over net/http's own Transport, which does not
// bound itself, costs four allocations more than through a plain
// http.Client: the attempt's request (with its context and the wrapper of
// its body in the same allocation), the context's Done channel, and what
// net/http's round trip allocates to follow a parent context that can end
// (context.WithCancelCause under a context with AfterFunc: the func it
// registers, and the stopCtx it keeps). The timer comes from a pool.
// (Both clients count the loopback server's allocations too: the same.)
func TestTransportAddsFourAllocationsToAGetOverNetHTTP(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	base := srv.Client().Transport.(*http.Transport)
	defer base.CloseIdleConnections()
	get := func(client *http.Client) float64 {
		return testing.AllocsPerRun(2000, func() {
			resp, err := client.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		})
	}
	plain := get(&http.Client{Transport: base})
	assert.Equal(t, plain+4, get(&http.Client{Transport: retry.NewTransport(base)}))
}

// Over a custom RoundTripper, a GET with the defaults costs one allocation
// more than through a plain http.Client (the attempt's request, with its
// own context), and a POST the Transport keys itself four: that, its key,
// and the copy of the header that carries it (a map: two).
func TestTransportCostOverACustomBase(t *testing.T) {
	base := &memTransport{status: 200}
	payload := bytes.Repeat([]byte("x"), 1024)
	for _, tc := range []struct {
		method string
		more   float64
	}{{"GET", 1}, {"POST", 4}, {"POST+type", 4}, {"POST+key", 1}} {
		cost := func(client *http.Client) float64 {
			return testing.AllocsPerRun(1000, func() {
				resp, err := client.Do(costRequest(tc.method, "http://mem.test/", payload))
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
			})
		}
		plain := cost(&http.Client{Transport: base})
		assert.Equal(t, plain+tc.more, cost(&http.Client{Transport: retry.NewTransport(base)}), tc.method)
	}
}

// Without a deadline of the caller's, the Transport bounds every attempt
// itself, and that costs fewer allocations over net/http than a plain
// http.Client whose caller bounds the request by hand with
// context.WithTimeout (a GET), or bounds it and keys it by hand (a POST,
// which the Transport keys itself).
func TestTransportBoundsAttemptsForLessThanBoundingByHand(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
	}))
	defer srv.Close()
	base := srv.Client().Transport.(*http.Transport)
	defer base.CloseIdleConnections()
	payload := bytes.Repeat([]byte("x"), 1024)
	for _, method := range []string{"GET", "POST"} {
		cost := func(client *http.Client, byHand bool) float64 {
			return testing.AllocsPerRun(1000, func() {
				var req *http.Request
				switch {
				case !byHand:
					req = costRequest(method, srv.URL, payload)
				case method == "GET":
					ctx, cancel := context.WithTimeout(context.Background(), retry.DefaultAttemptTimeout)
					defer cancel()
					req, _ = http.NewRequestWithContext(ctx, method, srv.URL, nil)
				default:
					ctx, cancel := context.WithTimeout(context.Background(), retry.DefaultAttemptTimeout)
					defer cancel()
					req, _ = http.NewRequestWithContext(ctx, method, srv.URL, bytes.NewReader(payload))
					req.Header.Set("Idempotency-Key", `"`+uuid.NewString()+`"`)
				}
				resp, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			})
		}
		byHand := cost(&http.Client{Transport: base}, true)
		ours := cost(&http.Client{Transport: retry.NewTransport(base)}, false)
		t.Logf("%s: ours %v allocations, plain bounded by hand %v", method, ours, byHand)
		assert.Less(t, ours, byHand, method)
	}
}
