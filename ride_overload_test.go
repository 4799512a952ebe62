package retry_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry"
)

// What a host that answers, only slowly, is owed: each test here runs in
// fake time (testing/synctest) against a host whose latency rises with its
// queue.

// queueingHost is a server of workers behind one queue with no bound,
// served in order of arrival: an attempt's latency is its wait in the
// queue plus its service. Its work goes on when the attempt's caller
// gives up (it never watches the request's context), and it answers 503
// without work only to an attempt that waited over maxWait for a worker.
type queueingHost struct {
	start   time.Time
	workers chan struct{}
	service func(since time.Duration) time.Duration
	maxWait time.Duration

	mu             sync.Mutex
	attempts       map[int]int // per 500 ms, by arrival
	served, wasted int
}

func newQueueingHost(start time.Time, workers int, service func(time.Duration) time.Duration) *queueingHost {
	return &queueingHost{start: start, workers: make(chan struct{}, workers), service: service, maxWait: time.Second, attempts: map[int]int{}}
}

func (h *queueingHost) RoundTrip(r *http.Request) (*http.Response, error) {
	arrived := time.Now()
	h.mu.Lock()
	h.attempts[int(arrived.Sub(h.start)/(500*time.Millisecond))]++
	h.mu.Unlock()
	done := make(chan int, 1)
	go func() {
		h.workers <- struct{}{} // blocked senders go in order of arrival
		if time.Since(arrived) > h.maxWait {
			<-h.workers
			done <- http.StatusServiceUnavailable
			return
		}
		time.Sleep(h.service(time.Since(h.start)))
		<-h.workers
		h.mu.Lock()
		h.served++
		if r.Context().Err() != nil {
			h.wasted++
		}
		h.mu.Unlock()
		done <- http.StatusOK
	}()
	select {
	case code := <-done:
		return respond(func(*http.Request) (int, string) { return code, "" })(r)
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
}

// openLoop is what an open-loop run measured: requests offered and
// succeeded per 500 ms, by when they were offered.
type openLoop struct {
	offered, succeeded map[int]int
}

// share is the share of the requests offered in [from, to) that succeeded.
func (o openLoop) share(from, to time.Duration) float64 {
	var n, ok int
	for b := int(from / (500 * time.Millisecond)); b < int(to/(500*time.Millisecond)); b++ {
		n += o.offered[b]
		ok += o.succeeded[b]
	}
	return float64(ok) / float64(max(n, 1))
}

// offerOpenLoop sends rate GETs a second for d through client, each with
// a deadline of timeout, and waits for them.
func offerOpenLoop(start time.Time, client *http.Client, rate int, d, timeout time.Duration) openLoop {
	o := openLoop{offered: map[int]int{}, succeeded: map[int]int{}}
	var (
		wg sync.WaitGroup
		mu sync.Mutex
	)
	for i := range int(d.Seconds() * float64(rate)) {
		due := time.Duration(i) * time.Second / time.Duration(rate)
		time.Sleep(time.Until(start.Add(due)))
		b := int(due / (500 * time.Millisecond))
		o.offered[b]++
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			resp, err := client.Do(mustRequest(ctx, "http://dep.test/"))
			if err != nil {
				return
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				mu.Lock()
				o.succeeded[b]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return o
}

// The server: 4 workers of 10 ms (400/s) behind a queue with no
// bound, 300 requests a second with a 1 s deadline each, 250 ms per
// attempt, the service time x4 from 2 s to 4 s. Requests are held to a
// window once the host's answers come slow, not sent into its queue: at
// least as many succeed during the slowdown as without retries, 99% after
// it, the host is never taken as down, the attempts never go past 1.1x its
// capacity, and it wastes little more work than without retries. The
// release used to go at 0.7x the rate answered before, on top of the
// arrivals: the queue filled, attempts timed out, eight timeouts took the
// host down, nothing went, and it all began again (a 90% after, dozens of
// outages).
func TestASlowedQueueingHostIsHeldToAWindowNotTakenDown(t *testing.T) {
	const (
		rate     = 300
		offer    = 7 * time.Second
		deadline = time.Second
		from, to = 2 * time.Second, 4 * time.Second
		capacity = 400 // a second
	)
	service := func(since time.Duration) time.Duration {
		if since >= from && since < to {
			return 40 * time.Millisecond
		}
		return 10 * time.Millisecond
	}
	type run struct {
		o              openLoop
		host           *queueingHost
		st             retry.DependencyStats
		served, wasted int
	}
	measure := func(ours bool) (r run) {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			r.host = newQueueingHost(start, 4, service)
			client := &http.Client{Transport: r.host}
			var tr *retry.Transport
			if ours {
				tr = retry.NewTransport(r.host, retry.WithAttemptTimeout(250*time.Millisecond))
				client = &http.Client{Transport: tr}
			}
			r.o = offerOpenLoop(start, client, rate, offer, deadline)
			synctest.Wait() // the host's work still queued is counted
			if ours {
				deps := tr.Dependencies()
				require.Len(t, deps, 1)
				r.st = deps[0]
			}
		})
		r.host.mu.Lock()
		defer r.host.mu.Unlock()
		r.served, r.wasted = r.host.served, r.host.wasted
		return r
	}
	plain, ours := measure(false), measure(true)
	peak := 0
	for b, n := range ours.host.attempts {
		if time.Duration(b)*500*time.Millisecond >= from {
			peak = max(peak, n)
		}
	}
	wasted := func(r run) float64 { return float64(r.wasted) / float64(max(r.served, 1)) }
	t.Logf("without retries: %.0f%% during, %.0f%% after, %.1f%% wasted", 100*plain.o.share(from, to), 100*plain.o.share(to, offer), 100*wasted(plain))
	t.Logf("ours: %.0f%% during, %.0f%% after, %.1f%% wasted, peak %d/s; attempts per 500 ms %v; %+v",
		100*ours.o.share(from, to), 100*ours.o.share(to, offer), 100*wasted(ours), 2*peak, ours.host.attempts, ours.st)
	assert.GreaterOrEqual(t, ours.o.share(from, to), plain.o.share(from, to), "during the slowdown")
	assert.GreaterOrEqual(t, ours.o.share(to, offer), 0.99, "after the slowdown")
	assert.GreaterOrEqual(t, ours.o.share(to, to+time.Second), 0.95, "in the second after it")
	assert.LessOrEqual(t, ours.st.Outages, uint64(2), "outages taken")
	assert.LessOrEqual(t, float64(2*peak), 1.1*capacity, "peak attempts/s from the slowdown on")
	assert.LessOrEqual(t, wasted(ours), wasted(plain)+0.05, "work nobody waited for")
}

// A host whose every answer takes ten times longer from some moment on,
// however loaded (its latency changed for good, not its queue), is taken
// as overloaded at first, but its window grows while its answers come in
// time for what it now shows, and every request still succeeds: the
// window never throttles a host that is merely slower.
func TestAHostSlowerForGoodIsNotThrottled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const rate = 300
		start := time.Now()
		var (
			mu          sync.Mutex
			out, maxOut int
		)
		host := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			since := time.Since(start)
			mu.Lock()
			out++
			if since >= 2*time.Second {
				maxOut = max(maxOut, out)
			}
			mu.Unlock()
			defer func() {
				mu.Lock()
				out--
				mu.Unlock()
			}()
			took := 10 * time.Millisecond
			if since >= time.Second {
				took = 100 * time.Millisecond
			}
			select {
			case <-time.After(took):
			case <-r.Context().Done():
				return nil, r.Context().Err()
			}
			return respond(func(*http.Request) (int, string) { return 200, "" })(r)
		})
		tr := retry.NewTransport(host)
		o := offerOpenLoop(start, &http.Client{Transport: tr}, rate, 4*time.Second, time.Second)
		st := tr.Dependencies()[0]
		t.Logf("%.1f%% succeeded; at most %d out at once from 2 s on; %+v", 100*o.share(0, 4*time.Second), maxOut, st)
		assert.Equal(t, 1.0, o.share(0, 4*time.Second))
		// 300 a second of 100 ms each: 30 out at once.
		assert.GreaterOrEqual(t, maxOut, 25)
		assert.Zero(t, st.Outages)
	})
}
