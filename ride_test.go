package retry_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/backoff"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/pushback"
)

// flaky is a base whose answers depend on time: fail says, for an
// attempt's arrival since start, whether it gets a 503. It counts the
// attempts in buckets of 250 ms.
type flaky struct {
	start   time.Time
	fail    func(since time.Duration, n int64) bool
	n       atomic.Int64
	mu      sync.Mutex
	buckets map[int]int
}

func newFlaky(fail func(since time.Duration, n int64) bool) *flaky {
	return &flaky{start: time.Now(), fail: fail, buckets: map[int]int{}}
}

func (f *flaky) RoundTrip(r *http.Request) (*http.Response, error) {
	since := time.Since(f.start)
	n := f.n.Add(1)
	f.mu.Lock()
	f.buckets[int(since/(250*time.Millisecond))]++
	f.mu.Unlock()
	code := 200
	if f.fail(since, n) {
		code = 503
	}
	return &http.Response{StatusCode: code, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("x")), Request: r}, nil
}

// attemptsIn counts the attempts that arrived in [from, to).
func (f *flaky) attemptsIn(from, to time.Duration) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for b, c := range f.buckets {
		if at := time.Duration(b) * 250 * time.Millisecond; at >= from && at < to {
			n += c
		}
	}
	return n
}

// peak is the largest number of attempts per second in one bucket.
func (f *flaky) peak() float64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := 0
	for _, c := range f.buckets {
		p = max(p, c)
	}
	return float64(p) * 4
}

// offer sends rate GET requests a second for d through client, each with
// its own deadline, and returns how many succeeded.
func offer(t *testing.T, client *http.Client, rate int, d, deadline time.Duration) (sent, ok int) {
	var wg sync.WaitGroup
	var succeeded atomic.Int64
	total := int(d.Seconds() * float64(rate))
	start := time.Now()
	for i := range total {
		time.Sleep(time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(rate))))
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", "http://dep.test/", nil)
			resp, err := client.Do(req)
			if err != nil {
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				succeeded.Add(1)
			}
		})
	}
	wg.Wait()
	return total, int(succeeded.Load())
}

// The storm of the bench module, in fake time: 200 requests/s for 8 s, the
// first 3 s of them against a dependency that answers 503, 5 s deadlines.
func TestRideThroughAStorm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := newFlaky(func(since time.Duration, _ int64) bool { return since < 3*time.Second })
		tr := retry.NewTransport(base)
		sent, ok := offer(t, &http.Client{Transport: tr}, 200, 8*time.Second, 5*time.Second)
		attempts := base.n.Load()
		during := base.attemptsIn(0, 3*time.Second)
		t.Logf("succeeded %d of %d; attempts per request %.3f, during the outage %.3f; peak %.0f/s; %+v",
			ok, sent, float64(attempts)/float64(sent), float64(during)/600, base.peak(), tr.Dependencies())
		assert.GreaterOrEqual(t, ok, 1590)
		assert.LessOrEqual(t, float64(attempts)/float64(sent), 1.08)
		assert.LessOrEqual(t, float64(during)/600, 0.2, "probes are a tenth of the requests that wait")
		assert.LessOrEqual(t, base.peak(), 400.0)
	})
}

// A flapping dependency: down 500 ms, up 500 ms, for 4 s. The requests
// that waited through a down half are served in the up half that follows,
// so the bad period's attempts are about one per request: the one that
// succeeds, and the probes and failures of the down halves; and the peak
// stays within twice the offered rate, though the rate the dependency
// served at before each outage counts the last backlog's release too (it
// used to drain the next backlog at 0.7 times that rate: 460/s).
func TestRideThroughAFlappingDependency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := newFlaky(func(since time.Duration, _ int64) bool {
			return since < 4*time.Second && since%time.Second < 500*time.Millisecond
		})
		tr := retry.NewTransport(base)
		sent, ok := offer(t, &http.Client{Transport: tr}, 200, 6*time.Second, 5*time.Second)
		bad := base.attemptsIn(0, 4*time.Second)
		t.Logf("succeeded %d of %d; attempts per request over the bad period %.3f; peak %.0f/s; %+v",
			ok, sent, float64(bad)/800, base.peak(), tr.Dependencies())
		assert.GreaterOrEqual(t, float64(ok)/float64(sent), 0.99)
		assert.LessOrEqual(t, float64(bad)/800, 1.2)
		assert.LessOrEqual(t, base.peak(), 400.0, "twice the offered rate at most")
	})
}

// A brownout: 30% of the attempts fail, independently, for 3 s. Retries
// that succeed are not rationed like retries into a dead dependency. With
// four attempts each, 0.3^4 of the requests of the bad period (about 5 of
// 600) fail all four.
func TestRideThroughABrownout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := newFlaky(func(since time.Duration, n int64) bool {
			return since < 3*time.Second && brownout(n)
		})
		tr := retry.NewTransport(base)
		sent, ok := offer(t, &http.Client{Transport: tr}, 200, 8*time.Second, 5*time.Second)
		bad := base.attemptsIn(0, 3*time.Second)
		t.Logf("succeeded %d of %d; attempts per request over the bad period %.3f; %+v; budget %v",
			ok, sent, float64(bad)/600, tr.Dependencies(), tr.Budget().Stats())
		assert.GreaterOrEqual(t, float64(ok)/float64(sent), 0.99)
		assert.LessOrEqual(t, float64(bad)/600, 1.45)
		assert.Zero(t, tr.Dependencies()[0].Waited, "a brownout is not an outage: nobody waited")
	})
}

// brownout fails 30% of attempts, by a fixed pseudo-random sequence.
func brownout(n int64) bool {
	x := uint64(n) * 0x9e3779b97f4a7c15
	x ^= x >> 29
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 32
	return x%100 < 30
}

// Healthy traffic with 5% random failures never waits.
func TestRideThroughLeavesHealthyTrafficAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := newFlaky(func(_ time.Duration, n int64) bool { return brownout(n) && n%6 == 0 })
		tr := retry.NewTransport(base)
		sent, ok := offer(t, &http.Client{Transport: tr}, 200, 5*time.Second, 5*time.Second)
		st := tr.Dependencies()[0]
		t.Logf("succeeded %d of %d; attempts %d; %+v", ok, sent, base.n.Load(), st)
		// Four attempts each at 5%: a request fails all four once in
		// 160,000, so one run in 160 sees one.
		assert.GreaterOrEqual(t, ok, sent-1)
		assert.Zero(t, st.Waited)
		assert.Zero(t, st.Outages)
	})
}

// In a total outage, every request ends with ErrDependencyDown (or the
// 503 it got), at its own deadline while the outage is young and at once
// once the host has been down longer than MaxWait; attempts stay near one
// per request. Without deadlines, the long outage costs each request one
// MaxWait at most, not one each: 2,000 requests end in under 30 s.
func TestRideThroughATotalOutage(t *testing.T) {
	for _, deadline := range []time.Duration{50 * time.Millisecond, 0} {
		for _, callers := range []int{1, 50} {
			t.Run(fmt.Sprintf("deadline %v, %d callers", deadline, callers), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) { totalOutage(t, deadline, callers) })
			})
		}
	}
}

func totalOutage(t *testing.T, deadline time.Duration, callers int) {
	base := newFlaky(func(time.Duration, int64) bool { return true })
	tr := retry.NewTransport(base)
	client := &http.Client{Transport: tr}
	const requests = 2000
	var next atomic.Int64
	var wg sync.WaitGroup
	begin := time.Now()
	for range callers {
		wg.Go(func() {
			for next.Add(1) <= requests {
				start := time.Now()
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				if deadline > 0 {
					ctx, cancel = context.WithTimeout(ctx, deadline)
				}
				resp, err := client.Do(mustRequest(ctx, "http://dep.test/"))
				cancel()
				if err == nil {
					assert.Equal(t, 503, resp.StatusCode, "only a 503 is handed back")
					resp.Body.Close()
					continue
				}
				assert.ErrorIs(t, err, retry.ErrDependencyDown)
				took := time.Since(start)
				if deadline > 0 && took > 0 {
					assert.Equal(t, deadline, took, "it ended at its deadline")
					assert.ErrorIs(t, err, context.DeadlineExceeded)
				}
			}
		})
	}
	wg.Wait()
	st := tr.Dependencies()[0]
	perRequest := float64(base.n.Load()) / requests
	t.Logf("attempts per request %.3f; %v for all; %+v", perRequest, time.Since(begin), st)
	assert.LessOrEqual(t, perRequest, 1.10)
	assert.Less(t, time.Since(begin), 30*time.Second)
	if time.Since(begin) > retry.DefaultMaxWait+time.Second {
		assert.Positive(t, st.FailedFast, "a long outage fails fast")
	}
}

// downHost sends requests to url, which always fails, until tr takes its
// host as down.
func downHost(t *testing.T, tr *retry.Transport, url string) {
	t.Helper()
	client := &http.Client{Transport: tr}
	once := retry.NewContext(context.Background(), retry.WithMaxAttempts(1))
	for range 20 {
		for _, st := range tr.Dependencies() {
			if st.State == "down" {
				return
			}
		}
		// One attempt every 15 ms, as a caller asking some 60 times a
		// second: the first probe is due 100 ms after the host went down.
		time.Sleep(15 * time.Millisecond)
		resp, err := client.Do(mustRequest(once, url))
		if err == nil {
			resp.Body.Close()
		}
	}
	t.Fatal("the host was never taken as down")
}

func mustRequest(ctx context.Context, url string) *http.Request {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		panic(err)
	}
	return req
}

// A waiting request whose context is cancelled is released at once; past
// MaxWaiters a request fails at once; one without a deadline waits at most
// MaxWait; once the host has been down longer than MaxWait, requests fail
// at once; and another host is not held back.
func TestRideThroughWaitsAreBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			code := 503
			if r.URL.Host == "ok.test" {
				code = 200
			}
			return &http.Response{StatusCode: code, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
		})
		tr := retry.NewTransport(base, retry.WithRideThrough(retry.RideThrough{MaxWait: 3 * time.Second, MaxWaiters: 2}),
			retry.WithBackoff(backoff.Constant(0)))
		client := &http.Client{Transport: tr}
		downHost(t, tr, "http://down.test/")
		require.Equal(t, "down", tr.Dependencies()[0].State)

		// Cancelled while waiting: released at once.
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() {
			_, err := client.Do(mustRequest(ctx, "http://down.test/"))
			done <- err
		}()
		synctest.Wait()
		start := time.Now()
		cancel()
		err := <-done
		assert.ErrorIs(t, err, retry.ErrCancelled)
		assert.ErrorIs(t, err, context.Canceled)
		assert.Zero(t, time.Since(start))

		// Past MaxWaiters: at once. The two waiters have no deadline: they
		// wait MaxWait (each probes once on the way, in vain).
		var wg sync.WaitGroup
		start = time.Now()
		for range 2 {
			wg.Go(func() {
				resp, err := client.Do(mustRequest(context.Background(), "http://down.test/"))
				if err == nil { // it probed, and its 503 is handed back
					assert.Equal(t, 503, resp.StatusCode)
					resp.Body.Close()
				} else {
					assert.ErrorIs(t, err, retry.ErrDependencyDown)
				}
				assert.LessOrEqual(t, time.Since(start), 3*time.Second+10*time.Millisecond, "MaxWait, to 10 ms")
				assert.GreaterOrEqual(t, time.Since(start), 3*time.Second, "it waited MaxWait")
			})
		}
		synctest.Wait()
		_, err = client.Do(mustRequest(context.Background(), "http://down.test/"))
		assert.ErrorIs(t, err, retry.ErrDependencyDown)
		assert.Zero(t, time.Since(start), "failed at once")
		wg.Wait()

		// Down for longer than MaxWait: a request without a deadline, and
		// one with a deadline far off, fail at once.
		start = time.Now()
		for _, ctx := range []context.Context{context.Background(), withTimeout(t, time.Minute)} {
			resp, err := client.Do(mustRequest(ctx, "http://down.test/"))
			if err == nil { // it went as the probe, which was due
				assert.Equal(t, 503, resp.StatusCode)
				resp.Body.Close()
			} else {
				assert.ErrorIs(t, err, retry.ErrDependencyDown)
			}
		}
		assert.Zero(t, time.Since(start), "failed at once")

		// Another host goes at once.
		resp, err := client.Do(mustRequest(context.Background(), "http://ok.test/"))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Zero(t, time.Since(start))
		for _, st := range tr.Dependencies() {
			if st.Name == "down.test" {
				t.Logf("%+v", st)
				assert.Equal(t, uint64(1), st.Rejected)
				assert.Equal(t, uint64(1), st.Abandoned)
				assert.Equal(t, uint64(2), st.Expired)
				assert.Positive(t, st.FailedFast)
			}
		}
	})
}

// withTimeout is a context that ends after d, and at the test's end.
func withTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Copies of one keyed request sent together (as a flaky network makes
// them) wait for the first copy's outcome: the server's 409 "in progress"
// is neither a retry the budget pays for nor one the attempt limit counts.
func TestDuplicatesWaitForTheFirstCopyWithoutSpendingTheBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var executed atomic.Int32
		handler := idempotency.Middleware(idempotency.NewRunner(nil), idempotency.SingleTenant)(
			http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				executed.Add(1)
				idempotency.MarkStarted(r.Context())
				time.Sleep(5 * time.Second) // a slow first copy
				w.WriteHeader(http.StatusCreated)
				w.Write([]byte("charged once"))
			}))
		for name, base := range bases(t, handler.ServeHTTP) {
			executed.Store(0)
			budget := retry.NewBudget(0.1, 0, 1)
			client := &http.Client{Transport: retry.NewTransport(base, retry.WithBudget(budget))}
			var wg sync.WaitGroup
			bodies := make([]string, 3)
			for i := range bodies {
				wg.Go(func() {
					req, _ := http.NewRequest("POST", "http://pipe.test/charges", strings.NewReader("amount=10"))
					req.Header.Set("Idempotency-Key", `"order-`+name+`"`)
					resp, err := client.Do(req)
					if !assert.NoError(t, err, name) {
						return
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					bodies[i] = fmt.Sprintf("%d %s", resp.StatusCode, b)
				})
				if i == 0 {
					synctest.Wait() // the first copy is running
				}
			}
			wg.Wait()
			assert.Equal(t, []string{"201 charged once", "201 charged once", "201 charged once"}, bodies, name)
			assert.Equal(t, int32(1), executed.Load(), name)
			assert.Zero(t, budget.Stats().RetriesAllowed+budget.Stats().RetriesDenied, "no retry was charged")
		}
	})
}

// Do rides through an outage of the dependency its Budget stands for.
func TestDoRidesThroughAnOutageOfItsBudgetsDependency(t *testing.T) {
	equalJitter := backoff.EqualJitter(retry.DefaultBackoffBase, retry.DefaultBackoffCap)
	synctest.Test(t, func(t *testing.T) {
		budget := retry.NewBudget(0.1, 1, 20)
		start := time.Now()
		var calls atomic.Int64
		op := func(context.Context) error {
			calls.Add(1)
			if time.Since(start) < 2*time.Second {
				return errFlaky
			}
			return nil
		}
		var wg sync.WaitGroup
		var failed atomic.Int64
		for i := range 400 { // 100 a second for 4 s
			time.Sleep(time.Until(start.Add(time.Duration(i) * 10 * time.Millisecond)))
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				// Equal jitter waits at least 50, 100 and 200 ms, so no
				// operation spends its four attempts in the 80 ms it takes
				// to see the outage (full jitter may, rarely: see
				// RideThrough).
				if err := retry.Do(ctx, op, retry.WithBudget(budget), retry.WithBackoff(equalJitter)); err != nil {
					t.Log(err)
					failed.Add(1)
				}
			})
		}
		wg.Wait()
		st := budget.DependencyStats()
		t.Logf("calls %d for 400 operations; %+v", calls.Load(), st)
		assert.Zero(t, failed.Load(), "every operation outlived the outage and succeeded")
		assert.LessOrEqual(t, float64(calls.Load())/400, 1.10)
		assert.Positive(t, st.Waited)
	})
}

// A request that gives up after waiting for its dependency tells its
// callers not to retry; the response it waited with is handed back.
func TestWaitingInVainIsAGiveUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 503, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
		})
		tr := retry.NewTransport(base, lonely...)
		client := &http.Client{Transport: tr}
		downHost(t, tr, "http://dep.test/")
		handler := pushback.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx, cancel := context.WithTimeout(r.Context(), time.Second)
			defer cancel()
			var report retry.Report
			resp, err := client.Do(mustRequest(retry.NewContext(ctx, retry.WithReport(&report)), "http://dep.test/"))
			if assert.NoError(t, err, "the probe's 503 is handed back") {
				assert.Equal(t, 503, resp.StatusCode)
				resp.Body.Close()
			}
			assert.ErrorIs(t, report.Reason, retry.ErrDependencyDown, "it waited in vain")
			w.WriteHeader(http.StatusBadGateway)
		}))
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		assert.Equal(t, "dependency-down", rec.Header().Get(pushback.Header))
	})
}
