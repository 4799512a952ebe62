package retry_test

import (
	"context"
	"net/http"
	"slices"
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

// How soon a recovery is noticed and acted on. Each test here failed
// before a dependency that many ask for was probed once for every ten
// requests that join the wait, before requests that arrive after the
// recovery went ahead of the backlog, and before a brief cut was left to
// the retries' backoff.

// storm offers rate calls a second for offer to a host that answers 503 at
// once until down has passed and then takes service for each call, and
// returns how long each call made after down took, whether each call
// succeeded, the attempts in each 250 ms, and the Transport.
func storm(t *testing.T, rate int, offer, down, service time.Duration) (after []time.Duration, ok, total int, buckets []int64, tr *retry.Transport) {
	start := time.Now()
	counts := make([]atomic.Int64, int((offer+10*time.Second)/(250*time.Millisecond)))
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		since := time.Since(start)
		counts[since/(250*time.Millisecond)].Add(1)
		if since < down {
			return respond(func(*http.Request) (int, string) { return 503, "down" })(r)
		}
		time.Sleep(service)
		return respond(func(*http.Request) (int, string) { return 200, "ok" })(r)
	})
	tr = retry.NewTransport(base)
	client := &http.Client{Transport: tr}
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		succeeded atomic.Int64
	)
	total = int(offer.Seconds() * float64(rate))
	for i := range total {
		due := start.Add(time.Duration(i) * time.Second / time.Duration(rate))
		time.Sleep(time.Until(due))
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			resp, err := client.Do(mustRequest(ctx, "http://dep.test/"))
			took := time.Since(due)
			if err == nil {
				if resp.StatusCode == 200 {
					succeeded.Add(1)
				}
				resp.Body.Close()
			}
			if due.Sub(start) >= down {
				mu.Lock()
				after = append(after, took)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for i := range counts {
		buckets = append(buckets, counts[i].Load())
	}
	slices.Sort(after)
	return after, int(succeeded.Load()), total, buckets, tr
}

// Offered 200 calls a second, the host down for 3 s and then taking 10 ms
// a call: the calls made after it came back take their service time, p99
// within 50 ms of it, while the backlog drains behind them and the peak
// stays within twice the offered rate. The recovery used to be noticed by
// a probe up to a second later, and the calls made in between waited at
// the back of the backlog, p99 near their 5 s deadline.
func TestCallsMadeAfterTheRecoveryTakeTheirServiceTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			rate    = 200
			service = 10 * time.Millisecond
		)
		after, ok, total, buckets, tr := storm(t, rate, 6*time.Second, 3*time.Second, service)
		p99 := after[(len(after)*99+99)/100-1]
		peak := slices.Max(buckets) * 4
		st := tr.Dependencies()[0]
		t.Logf("%d of %d succeeded; %d calls after the recovery: p50 %v, p99 %v; peak %d/s; %+v",
			ok, total, len(after), after[len(after)/2], p99, peak, st)
		// Every call outlived the outage, but a call whose attempts all went
		// in the moment it took to see the outage fails (see RideThrough).
		assert.GreaterOrEqual(t, ok, total-2)
		assert.LessOrEqual(t, p99, service+50*time.Millisecond)
		assert.LessOrEqual(t, peak, int64(2*rate))
	})
}

// A host many requests wait for is probed once for every ten that join the
// wait, so the first answer after it comes back follows within the time
// ten arrivals take; probes stay a tenth of the waits and a few more for
// the probe interval. It used to be probed at doubling intervals of up to
// a second, however many waited.
func TestAHostManyWaitForIsProbedOftenEnough(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			rate = 200
			down = 2300 * time.Millisecond
		)
		start := time.Now()
		var firstOK atomic.Int64
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if time.Since(start) < down {
				return respond(func(*http.Request) (int, string) { return 503, "down" })(r)
			}
			time.Sleep(2 * time.Millisecond)
			firstOK.CompareAndSwap(0, int64(time.Since(start)))
			return respond(func(*http.Request) (int, string) { return 200, "ok" })(r)
		})
		tr := retry.NewTransport(base)
		client := &http.Client{Transport: tr}
		var wg sync.WaitGroup
		for i := range 3 * rate {
			time.Sleep(time.Until(start.Add(time.Duration(i) * time.Second / rate)))
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if resp, err := client.Do(mustRequest(ctx, "http://dep.test/")); err == nil {
					resp.Body.Close()
				}
			})
		}
		wg.Wait()
		st := tr.Dependencies()[0]
		noticed := time.Duration(firstOK.Load()) - down
		t.Logf("first answer %v after the recovery; %+v", noticed, st)
		assert.LessOrEqual(t, noticed, 10*time.Second/rate+2*time.Millisecond)
		assert.LessOrEqual(t, st.Probes, st.Waited/10+8, "probes are a tenth of the waits, and a few more")
	})
}

// Sixteen callers in a closed loop, 2 ms a call, through brief cuts (after
// every 200 attempts the next 20 fail, as when a proxy drops connections)
// take no longer than with riding through off: a cut the retries' backoff
// rides through does not take the host down. Sixteen attempts sent
// together that failed together used to take it down, and each failed
// probe lengthened the cut by a probe interval.
func TestBriefCutsCostNoMoreThanRidingThroughOff(t *testing.T) {
	run := func(t *testing.T, opts ...retry.Option) (time.Duration, retry.DependencyStats) {
		var took time.Duration
		var st retry.DependencyStats
		synctest.Test(t, func(t *testing.T) {
			var n atomic.Int64
			base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				cut := (n.Add(1)-1)%220 >= 200
				time.Sleep(2 * time.Millisecond)
				if cut {
					return respond(func(*http.Request) (int, string) { return 503, "cut" })(r)
				}
				return respond(func(*http.Request) (int, string) { return 200, "ok" })(r)
			})
			tr := retry.NewTransport(base, append(opts, retry.WithBackoff(backoff.Constant(10*time.Millisecond)))...)
			client := &http.Client{Transport: tr}
			start := time.Now()
			var calls, failed atomic.Int64
			var wg sync.WaitGroup
			for range 16 {
				wg.Go(func() {
					for calls.Add(1) <= 1000 {
						ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
						resp, err := client.Do(mustRequest(ctx, "http://dep.test/"))
						cancel()
						require.NoError(t, err)
						resp.Body.Close()
						if resp.StatusCode != 200 {
							failed.Add(1)
						}
					}
				})
			}
			wg.Wait()
			took = time.Since(start)
			assert.Zero(t, failed.Load(), "every call succeeds")
			if deps := tr.Dependencies(); len(deps) > 0 {
				st = deps[0]
			}
		})
		return took, st
	}
	on, st := run(t)
	off, _ := run(t, retry.WithoutRideThrough())
	t.Logf("1,000 calls: %v riding through, %v with it off; %+v", on, off, st)
	assert.Zero(t, st.Outages, "brief cuts never take the host down")
	assert.LessOrEqual(t, on.Seconds(), 1.2*off.Seconds())
}

// A request waiting out its backoff when its host, taken as down since,
// answers again goes then: from then on the release paces it, not its
// backoff. It used to sleep its whole backoff (2 s here) after the host
// had been back for most of it.
func TestABackoffEndsWhenTheHostAnswersAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if time.Since(start) < 150*time.Millisecond {
				return respond(func(*http.Request) (int, string) { return 503, "down" })(r)
			}
			time.Sleep(2 * time.Millisecond)
			return respond(func(*http.Request) (int, string) { return 200, "ok" })(r)
		})
		tr := retry.NewTransport(base)
		client := &http.Client{Transport: tr}
		slow := retry.NewContext(context.Background(), retry.WithBackoff(backoff.Constant(2*time.Second)))
		took := throughAnOutage(t, client, mustRequest(slow, "http://dep.test/"), start)
		st := tr.Dependencies()[0]
		t.Logf("the request with a 2 s backoff ended after %v; %+v", took, st)
		assert.Equal(t, uint64(1), st.Outages)
		assert.Less(t, took, 500*time.Millisecond)
	})
}

// A wait the server asked for (Retry-After) is not a backoff: the host
// answering again does not end it. The recovery used to end it like any
// backoff, and the request went back 850 ms early.
func TestARetryAfterOutlastsTheRecovery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if time.Since(start) < 150*time.Millisecond {
				resp, err := respond(func(*http.Request) (int, string) { return 503, "down" })(r)
				if r.Header.Get("X-Slow") != "" {
					resp.Header.Set("Retry-After", "1")
				}
				return resp, err
			}
			time.Sleep(2 * time.Millisecond)
			return respond(func(*http.Request) (int, string) { return 200, "ok" })(r)
		})
		tr := retry.NewTransport(base)
		client := &http.Client{Transport: tr}
		req := mustRequest(context.Background(), "http://dep.test/")
		req.Header.Set("X-Slow", "1")
		took := throughAnOutage(t, client, req, start)
		st := tr.Dependencies()[0]
		t.Logf("the request told to come back in 1 s ended after %v; %+v", took, st)
		assert.Equal(t, uint64(1), st.Outages)
		assert.GreaterOrEqual(t, took, time.Second)
	})
}

// throughAnOutage sends req through client on a goroutine of its own while
// eight other requests, 8 ms apart and one attempt each, take the host down
// (the last of them waits for it, and probes it when it is back), and
// returns how long after start req ended; req must succeed.
func throughAnOutage(t *testing.T, client *http.Client, req *http.Request, start time.Time) time.Duration {
	var took time.Duration
	var wg sync.WaitGroup
	wg.Go(func() {
		resp, err := client.Do(req)
		took = time.Since(start)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode)
	})
	once := retry.NewContext(context.Background(), retry.WithMaxAttempts(1))
	for range 8 {
		time.Sleep(8 * time.Millisecond)
		if resp, err := client.Do(mustRequest(once, "http://dep.test/")); err == nil {
			resp.Body.Close()
		}
	}
	// A request made after the outage, while the host is still taken as
	// down, sees it answer again (as the probe, or released by one).
	time.Sleep(time.Until(start.Add(200 * time.Millisecond)))
	if resp, err := client.Do(mustRequest(once, "http://dep.test/")); err == nil {
		resp.Body.Close()
	}
	wg.Wait()
	return took
}
