package retry

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLatencyBucketsCoverEveryLatency(t *testing.T) {
	prev := time.Duration(0)
	for i := range latencyBuckets - 1 {
		up := latencyUpper(i)
		require.Greater(t, up, prev, "bucket %d", i)
		prev = up
	}
	for _, d := range []time.Duration{-time.Second, 0, time.Microsecond, 3 * time.Microsecond, 5 * time.Millisecond,
		time.Second, time.Hour, 1 << 62} {
		i := latencyIndex(d)
		require.GreaterOrEqual(t, i, 0)
		require.Less(t, i, latencyBuckets)
		if d > 0 && d < time.Hour {
			assert.Less(t, d, latencyUpper(i), "%v is below its bucket's upper bound", d)
			assert.LessOrEqual(t, float64(latencyUpper(i)), float64(d)*1.26+float64(time.Microsecond), "%v: bucket within 25%%", d)
		}
	}
}

func TestLatencyQuantiles(t *testing.T) {
	e := newLatencyEstimate(0.999, 0.5)
	rng := rand.New(rand.NewPCG(3, 4))
	for range 5000 {
		e.Observe(time.Duration(1+rng.IntN(10)) * time.Millisecond)
	}
	assert.InDelta(t, float64(10*time.Millisecond), float64(e.High()), float64(2*time.Millisecond))
	assert.InDelta(t, float64(5500*time.Microsecond), float64(e.HedgeDelay()), float64(1500*time.Microsecond))
	// Recent latencies replace old ones: after two windows of slow samples
	// the fast ones no longer count.
	for range 2 * latencyWindow {
		e.Observe(200 * time.Millisecond)
	}
	assert.InDelta(t, float64(200*time.Millisecond), float64(e.HedgeDelay()), float64(40*time.Millisecond))
}

func TestLatencyEstimateMemoryIsBounded(t *testing.T) {
	e := newLatencyEstimate(0.999, 0.95)
	size := unsafe.Sizeof(*e)
	allocs := testing.AllocsPerRun(1_000_000, func() { e.Observe(3 * time.Millisecond) })
	assert.Zero(t, allocs, "Observe allocates nothing")
	assert.Equal(t, uint64(1_000_001), e.Samples())
	assert.Equal(t, size, unsafe.Sizeof(*e), "fixed-size histogram")
	assert.Less(t, size, uintptr(4096))

	hosts := newLatencyByHost(0.999, 0.95)
	for i := range 10 * latencyMaxHosts {
		hosts.For(string(rune('a'+i%26)) + time.Duration(i).String())
	}
	assert.LessOrEqual(t, hosts.count, latencyMaxHosts, "at most latencyMaxHosts estimates are kept")
	n := 0
	hosts.hosts.Range(func(any, any) bool { n++; return true })
	assert.Equal(t, hosts.count, n)
}

// Beyond latencyMaxHosts, a new host gets an estimate of its own (so its
// initial timeout), and the least recently used host makes way for it.
func TestLatencyBeyondTheHostLimitEvictsTheLeastRecentlyUsed(t *testing.T) {
	hosts := newLatencyByHost(0.999, 0.95)
	for i := range latencyMaxHosts {
		e := hosts.For(fmt.Sprintf("h%d", i))
		for range 100 {
			e.Observe(2 * time.Millisecond)
		}
	}
	hosts.For("h0") // h0 is recent again; h1 is now the least recently used
	other := hosts.For("other.test")
	for range 100 {
		other.Observe(50 * time.Millisecond)
	}
	fresh := hosts.For("new.test")
	assert.Zero(t, fresh.Samples(), "a never measured host learns from scratch")
	var a adaptiveConfig
	var c config
	WithAdaptiveTimeout(AdaptiveTimeout{Initial: 500 * time.Millisecond}).apply(&c)
	a = c.adaptive
	assert.Equal(t, 500*time.Millisecond, a.attemptTimeoutFor(fresh), "its initial timeout, not another host's")
	_, kept := hosts.hosts.Load("h0")
	_, evicted := hosts.hosts.Load("h1")
	_, evicted2 := hosts.hosts.Load("h2")
	assert.True(t, kept, "the recently used host stays")
	assert.False(t, evicted || evicted2, "the least recently used ones made way")
	assert.Equal(t, uint64(100), hosts.For("h0").Samples(), "a kept host keeps what it learned")
}

func TestNilBaseIsBoundedByTheTransportsOwnTimer(t *testing.T) {
	tr := NewTransport(nil)
	base := tr.base.(*http.Transport)
	assert.Zero(t, base.ResponseHeaderTimeout, "no fixed bound that a longer deadline could not lift")
	assert.False(t, tr.bounded, "so the Transport times attempts without a deadline itself")
	assert.True(t, NewTransport(&http.Transport{ResponseHeaderTimeout: time.Second}).bounded,
		"a base with its own header timeout bounds itself")
}

func TestOnlySafeRequestsAreHedged(t *testing.T) {
	tr := NewTransport(nil, WithHedging(Hedging{}), WithoutKeys())
	hedgeable := func(method string, body bool) bool {
		req, _ := http.NewRequest(method, "http://h.test/", nil)
		if body {
			req, _ = http.NewRequest(method, "http://h.test/", http.NoBody)
		}
		var rt roundTrip
		rt.start(tr, req)
		return rt.hedgeable()
	}
	assert.True(t, hedgeable("GET", false))
	assert.True(t, hedgeable("PUT", true))
	assert.False(t, hedgeable("POST", true), "a POST without a key is never hedged")
	assert.False(t, hedgeable("PATCH", false))
}

func BenchmarkLatencyObserve(b *testing.B) {
	e := newLatencyEstimate(0.999, 0.95)
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			e.Observe(time.Duration(i%5000) * time.Microsecond)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				e.Observe(time.Duration(i%5000) * time.Microsecond)
				i++
			}
		})
	})
}
