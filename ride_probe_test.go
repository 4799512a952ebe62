package retry_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/backoff"
)

// Who probes a host that is down, and when. Each test here failed before:
// a request probed at most once, requests that joined the wait just before
// the probe that saw the recovery waited behind the whole backlog, and the
// first probes of an outage came at doubling intervals however fast
// callers had asked.

// Calls made after the host came back but before a probe saw it go before
// the backlog: whatever the moment the outage ends (ten moments, 5 ms
// apart, against probes that go once for every ten arrivals), no call made
// after it waits longer than the next probe and its own service. They
// used to join the backlog's end, earliest deadline first, and wait for
// all of it to drain: 3.8 s.
func TestCallsMadeBeforeTheRecoveryIsSeenSkipTheBacklog(t *testing.T) {
	const service = 10 * time.Millisecond
	for k := range 10 {
		synctest.Test(t, func(t *testing.T) {
			down := 3*time.Second + time.Duration(k)*5*time.Millisecond
			after, ok, total, _, _ := storm(t, 200, 5*time.Second, down, service)
			slowest := after[len(after)-1]
			t.Logf("outage ends at %v: %d of %d succeeded; slowest call made after it: %v", down, ok, total, slowest)
			assert.LessOrEqual(t, slowest, service+100*time.Millisecond, "outage ending at %v", down)
		})
	}
}

// Three requests wait for a host that is down; each probes it once in
// vain, and nobody else asks. When the host comes back, one of them probes
// again (it has attempts to spare), sees it, and all three succeed. They
// used to wait out their deadlines: a request probed at most once, and no
// waiter was left that had not.
func TestWaitersThatAllProbedStillProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if time.Since(start) < time.Second {
				return respond(func(*http.Request) (int, string) { return 503, "down" })(r)
			}
			return respond(func(*http.Request) (int, string) { return 200, "ok" })(r)
		})
		tr := retry.NewTransport(base, retry.WithMaxAttempts(10), retry.WithBackoff(backoff.Constant(10*time.Millisecond)))
		downHost(t, tr, "http://dep.test/")
		client := &http.Client{Transport: tr}
		var wg sync.WaitGroup
		var ok atomic.Int64
		for range 3 {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				resp, err := client.Do(mustRequest(ctx, "http://dep.test/"))
				if err == nil {
					if resp.StatusCode == 200 {
						ok.Add(1)
					}
					resp.Body.Close()
				}
			})
		}
		wg.Wait()
		took := time.Since(start)
		st := tr.Dependencies()[0]
		t.Logf("%d of 3 succeeded after %v; %+v", ok.Load(), took, st)
		assert.Equal(t, int64(3), ok.Load())
		assert.Less(t, took, 2*time.Second, "seen back by the next probe after it came back")
	})
}

// Sixteen callers in a closed loop, 2 ms a call, meet bursts of failures:
// now and then the host fails the next 20 calls at once, whenever they
// come, as a server that sheds a burst does. The first eight of a burst,
// one after another, take the host down; the first probes then go at a
// tenth of the rate the callers were served at, each from a caller that
// has not probed, and the burst is spent within milliseconds: the run
// costs no more than 1.2x the run with riding through off. Probes used to
// go 100 ms, 200 ms, 400 ms... apart, one burst call each, and a run took
// several times as long.
func TestBurstsOfFailuresCostNoMoreThanRidingThroughOff(t *testing.T) {
	run := func(t *testing.T, opts ...retry.Option) (took time.Duration, st retry.DependencyStats) {
		synctest.Test(t, func(t *testing.T) {
			var n atomic.Int64
			base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				if (n.Add(1)-1)%220 >= 200 {
					return respond(func(*http.Request) (int, string) { return 503, "shed" })(r)
				}
				time.Sleep(2 * time.Millisecond)
				return respond(func(*http.Request) (int, string) { return 200, "ok" })(r)
			})
			tr := retry.NewTransport(base, opts...)
			client := &http.Client{Transport: tr}
			start := time.Now()
			var calls atomic.Int64
			var wg sync.WaitGroup
			for range 16 {
				wg.Go(func() {
					for calls.Add(1) <= 2000 {
						ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
						resp, err := client.Do(mustRequest(ctx, "http://dep.test/"))
						cancel()
						if err == nil {
							resp.Body.Close()
						}
					}
				})
			}
			wg.Wait()
			took = time.Since(start)
			if deps := tr.Dependencies(); len(deps) > 0 {
				st = deps[0]
			}
		})
		return took, st
	}
	var on, off time.Duration
	var outages uint64
	for range 5 { // backoff jitter makes any one run's length vary
		took, st := run(t)
		on += took
		outages += st.Outages
		took, _ = run(t, retry.WithoutRideThrough())
		off += took
	}
	t.Logf("5 x 2,000 calls: %v riding through (%d outages), %v with it off", on, outages, off)
	require.Positive(t, outages, "bursts take the host down")
	assert.LessOrEqual(t, on.Seconds(), 1.2*off.Seconds())
}
