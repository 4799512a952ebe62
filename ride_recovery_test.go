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
)

// How requests come back after an outage, and what a slow host that
// answers is owed: each test here failed before the release went by what
// the host shows it can take.

// answers records when a base answered 200 and how many requests it held
// at once.
type answers struct {
	mu      sync.Mutex
	ok      []time.Duration // since start, when each 200 was sent
	out     int
	maxOut  int
	outFrom time.Duration // the most held at once counts from here on
}

func (a *answers) enter(since time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.out++
	if since >= a.outFrom {
		a.maxOut = max(a.maxOut, a.out)
	}
}

func (a *answers) leave(since time.Duration, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.out--
	if ok {
		a.ok = append(a.ok, since)
	}
}

// okIn counts the 200s sent in [from, to).
func (a *answers) okIn(from, to time.Duration) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, at := range a.ok {
		if at >= from && at < to {
			n++
		}
	}
	return n
}

// firstOK is when the first 200 was sent.
func (a *answers) firstOK() time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Min(a.ok)
}

// serving is a base that takes service per request (or until the
// request's context ends) and answers 503 to requests that arrive while
// down says so.
func serving(start time.Time, service time.Duration, down func(since time.Duration) bool, a *answers) roundTripFunc {
	return func(r *http.Request) (*http.Response, error) {
		arrived := time.Since(start)
		a.enter(arrived)
		select {
		case <-time.After(service):
		case <-r.Context().Done():
			a.leave(time.Since(start), false)
			return nil, r.Context().Err()
		}
		ok := !down(arrived)
		a.leave(time.Since(start), ok)
		code, body := 200, "ok"
		if !ok {
			code, body = 503, "down"
		}
		return respond(func(*http.Request) (int, string) { return code, body })(r)
	}
}

// Sixteen callers in a closed loop, 2 ms a call: after the host answers
// again they are back to their full throughput within three round trips.
// The release used to go at the rate callers asked, and in a closed loop
// they ask only as fast as they are released: the pace crept up from a few
// hundred calls a second while the host could take 8,000.
func TestClosedLoopCallersAreBackAtFullSpeedWithinThreeRoundTrips(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			callers = 16
			service = 2 * time.Millisecond
		)
		start := time.Now()
		a := &answers{}
		tr := retry.NewTransport(serving(start, service, func(since time.Duration) bool { return since < 100*time.Millisecond }, a))
		client := &http.Client{Transport: tr}
		stop := start.Add(time.Second)
		var wg sync.WaitGroup
		for range callers {
			wg.Go(func() {
				for time.Now().Before(stop) {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					resp, err := client.Do(mustRequest(ctx, "http://dep.test/"))
					if err == nil {
						resp.Body.Close()
					}
					cancel()
				}
			})
		}
		wg.Wait()
		st := tr.Dependencies()[0]
		require.Equal(t, uint64(1), st.Outages, "%+v", st)
		back := a.firstOK() + 3*service
		full := callers * int(50*time.Millisecond/service)
		got := a.okIn(back, back+50*time.Millisecond)
		t.Logf("first answer at %v; %d calls answered in the 50 ms from three round trips later (full speed %d); %+v",
			a.firstOK(), got, full, st)
		assert.GreaterOrEqual(t, got, full*9/10)
	})
}

// Offered 150 calls a second, 2 ms each, the host down for its first 2 s:
// calls made once the host answers again go at once, while the backlog of
// those that waited drains behind them without pushing the peak past twice
// the offered rate. They used to wait behind the whole backlog, released
// earliest deadline first, for more than a second.
func TestCallsAfterARecoveryNeverWaitBehindTheBacklog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			rate    = 150
			service = 2 * time.Millisecond
		)
		start := time.Now()
		a := &answers{}
		var buckets [32]atomic.Int64 // attempts per 250 ms
		base := serving(start, service, func(since time.Duration) bool { return since < 2*time.Second }, a)
		tr := retry.NewTransport(roundTripFunc(func(r *http.Request) (*http.Response, error) {
			buckets[time.Since(start)/(250*time.Millisecond)].Add(1)
			return base(r)
		}))
		client := &http.Client{Transport: tr}
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			after []time.Duration // how long each call made after the first answer took
			ok    atomic.Int64
		)
		total := 6 * rate
		for i := range total {
			time.Sleep(time.Until(start.Add(time.Duration(i) * time.Second / rate)))
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				sent := time.Now()
				resp, err := client.Do(mustRequest(ctx, "http://dep.test/"))
				took := time.Since(sent)
				if err == nil {
					if resp.StatusCode == 200 {
						ok.Add(1)
					}
					resp.Body.Close()
				}
				a.mu.Lock()
				answered := len(a.ok) > 0 && sent.Sub(start) > slices.Min(a.ok)
				a.mu.Unlock()
				if answered {
					mu.Lock()
					after = append(after, took)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		slices.Sort(after)
		p99 := after[len(after)*99/100]
		peak := int64(0)
		for i := range buckets {
			peak = max(peak, buckets[i].Load())
		}
		t.Logf("%d of %d succeeded; %d calls after the first answer (at %v): p50 %v, p99 %v; peak %d/s; %+v",
			ok.Load(), total, len(after), a.firstOK(), after[len(after)/2], p99, peak*4, tr.Dependencies())
		assert.LessOrEqual(t, p99, service+50*time.Millisecond)
		assert.LessOrEqual(t, peak*4, int64(2*rate))
		// Every call outlived the outage, but a call whose attempts all went
		// in the moment it took to see the outage fails (see RideThrough).
		assert.GreaterOrEqual(t, ok.Load(), int64(total-2))
	})
}

// A request whose own deadline runs out while its attempt is out says
// nothing of the host: a host that takes 50 ms is not taken as down by
// requests that give it 20. Each such attempt used to count as a failure
// of the host, and eight in a row took it down.
func TestARequestsOwnDeadlineNeverTakesTheHostDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		a := &answers{}
		tr := retry.NewTransport(serving(start, 50*time.Millisecond, func(time.Duration) bool { return false }, a))
		client := &http.Client{Transport: tr}
		for range 20 {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			_, err := client.Do(mustRequest(ctx, "http://dep.test/"))
			cancel()
			require.Error(t, err)
		}
		st := tr.Dependencies()[0]
		assert.Equal(t, "up", st.State, "%+v", st)
		assert.Zero(t, st.Outages, "%+v", st)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		sent := time.Now()
		resp, err := client.Do(mustRequest(ctx, "http://dep.test/"))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 50*time.Millisecond, time.Since(sent), "a request with time to wait goes at once")
	})
}

// The probe of a host that went down is a waiting request that has time to
// wait for its answer: here the host answers again but takes 40 ms, and
// the request with the earliest deadline has 20 ms left when the probe is
// due. It used to be the probe, time out, and double the probe interval,
// again and again.
func TestTheProbeIsARequestThatCanWaitForItsAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		a := &answers{}
		// Down for its first 150 ms (fast 503s), then 40 ms an answer.
		slow := serving(start, 40*time.Millisecond, func(time.Duration) bool { return false }, a)
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if time.Since(start) < 150*time.Millisecond {
				return respond(func(*http.Request) (int, string) { return 503, "down" })(r)
			}
			return slow(r)
		})
		tr := retry.NewTransport(base)
		client := &http.Client{Transport: tr}
		get := func(deadline time.Duration) (bool, time.Duration) {
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			sent := time.Now()
			resp, err := client.Do(mustRequest(ctx, "http://dep.test/"))
			if err != nil {
				return false, time.Since(sent)
			}
			resp.Body.Close()
			return resp.StatusCode == 200, time.Since(sent)
		}
		// Eight requests fail in a row, 15 ms apart, and take the host
		// down: the first probe is due 100 ms later.
		for range 8 {
			time.Sleep(15 * time.Millisecond)
			ok, _ := get(time.Millisecond)
			require.False(t, ok)
		}
		require.Equal(t, "down", tr.Dependencies()[0].State)
		var wg sync.WaitGroup
		var shortOK, longOK atomic.Bool
		var longTook atomic.Int64
		wg.Go(func() { ok, _ := get(120 * time.Millisecond); shortOK.Store(ok) })
		wg.Go(func() { ok, took := get(2 * time.Second); longOK.Store(ok); longTook.Store(int64(took)) })
		wg.Wait()
		st := tr.Dependencies()[0]
		t.Logf("short deadline: %v, long deadline: %v after %v; %+v", shortOK.Load(), longOK.Load(), time.Duration(longTook.Load()), st)
		assert.True(t, longOK.Load())
		assert.Equal(t, uint64(1), st.Probes, "one probe, answered: %+v", st)
		assert.Less(t, time.Duration(longTook.Load()), 200*time.Millisecond)
	})
}

// An attempt timeout is worth its cut only when another attempt can
// follow: when the attempt limit, the budget or the deadline allows none,
// the attempt runs to the request's deadline, as a client without retries
// lets it, and a host that needs 400 ms answers it. It used to be cut at
// 250 ms and fail.
func TestAnAttemptNoOtherCanFollowRunsToTheDeadline(t *testing.T) {
	drained := retry.NewBudget(0, 0, 1)
	require.True(t, drained.AllowRetry(time.Now()))
	for name, opts := range map[string][]retry.Option{
		"last attempt":   {retry.WithMaxAttempts(1)},
		"empty budget":   {retry.WithBudget(drained)},
		"no time for it": {retry.WithTotalTimeout(450 * time.Millisecond)},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := respond(func(*http.Request) (int, string) {
					time.Sleep(400 * time.Millisecond)
					return 200, "ok"
				})
				tr := retry.NewTransport(base, append(opts, retry.WithAttemptTimeout(250*time.Millisecond))...)
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				resp, err := (&http.Client{Transport: tr}).Do(mustRequest(ctx, "http://dep.test/"))
				require.NoError(t, err)
				resp.Body.Close()
				assert.Equal(t, 200, resp.StatusCode)
			})
		})
	}
	t.Run("another can follow", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var n atomic.Int64
			base := respond(func(*http.Request) (int, string) {
				if n.Add(1) == 1 {
					time.Sleep(400 * time.Millisecond)
				}
				return 200, "ok"
			})
			tr := retry.NewTransport(base, retry.WithAttemptTimeout(250*time.Millisecond))
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			resp, err := (&http.Client{Transport: tr}).Do(mustRequest(ctx, "http://dep.test/"))
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, int64(2), n.Load(), "the first attempt was cut")
		})
	})
}

// After an outage, a waiter with less time left than the host took to
// answer the probe is not let go: its attempt would only give the host
// work nobody waits for. Here the host answers again but takes 300 ms; a
// request with 100 ms left when the probe is answered used to be released
// first (earliest deadline first) and fill the host's queue in vain.
func TestAWaiterWithoutTimeForAnAnswerIsNotReleased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		a := &answers{}
		var arrivals []string
		var mu sync.Mutex
		slow := serving(start, 300*time.Millisecond, func(time.Duration) bool { return false }, a)
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if time.Since(start) < 150*time.Millisecond {
				return respond(func(*http.Request) (int, string) { return 503, "down" })(r)
			}
			mu.Lock()
			arrivals = append(arrivals, r.Header.Get("X-Name"))
			mu.Unlock()
			return slow(r)
		})
		tr := retry.NewTransport(base)
		client := &http.Client{Transport: tr}
		get := func(name string, deadline time.Duration) error {
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			req := mustRequest(ctx, "http://dep.test/")
			req.Header.Set("X-Name", name)
			resp, err := client.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			return err
		}
		for range 8 { // 15 ms apart: the first probe is due 100 ms after the last
			time.Sleep(15 * time.Millisecond)
			_ = get("down", time.Millisecond) // a 503 comes back
		}
		require.Equal(t, "down", tr.Dependencies()[0].State)
		// The probe goes 100 ms after the host went down and is answered
		// 300 ms later: "short" then has 100 ms left, "long" 1.6 s.
		var wg sync.WaitGroup
		errs := map[string]*error{"probe": new(error), "short": new(error), "long": new(error)}
		for name, deadline := range map[string]time.Duration{"probe": 3 * time.Second, "short": 500 * time.Millisecond, "long": 2 * time.Second} {
			wg.Go(func() { *errs[name] = get(name, deadline) })
		}
		wg.Wait()
		t.Logf("arrivals after the outage: %v; %+v", arrivals, tr.Dependencies())
		assert.Equal(t, []string{"probe", "long"}, arrivals)
		assert.NoError(t, *errs["probe"])
		assert.NoError(t, *errs["long"])
		assert.ErrorIs(t, *errs["short"], context.DeadlineExceeded)
	})
}
