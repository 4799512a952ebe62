package retry_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
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
)

// Riding through outages keeps the promises the rest of the client makes.
// Each test here pins one that it used to break.

// lonely makes a request that waits alone for a dead host wait at the
// gate when its deadline comes: it probes again and again while nobody
// else waits (100 ms, 300 ms, 700 ms... after the host went down), and
// this gives it attempts enough for that and no backoff of its own between
// them, so its wait ends in vain, not with its attempts spent or its
// backoff past the deadline.
var lonely = []retry.Option{retry.WithMaxAttempts(10), retry.WithBackoff(backoff.Constant(0))}

// respond is a base that answers every request with what answer says.
func respond(answer func(r *http.Request) (int, string)) roundTripFunc {
	return func(r *http.Request) (*http.Response, error) {
		code, body := answer(r)
		return &http.Response{StatusCode: code, Header: http.Header{}, ContentLength: int64(len(body)),
			Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
	}
}

// WithMaxAttempts is a hard cap, probes included: a request that always
// fails reaches the server at most that often, however the host's gate
// sends it (it used to go a fifth time as the probe).
func TestMaxAttemptsCapsProbesToo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		seen := map[string]int{}
		base := respond(func(r *http.Request) (int, string) {
			mu.Lock()
			seen[r.URL.Path]++
			mu.Unlock()
			time.Sleep(time.Millisecond)
			if n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/")); n%7 == 0 {
				return 503, "always"
			}
			return 200, "ok"
		})
		client := &http.Client{Transport: retry.NewTransport(base, retry.WithMaxAttempts(4))}
		var next atomic.Int64
		var wg sync.WaitGroup
		for range 64 {
			wg.Go(func() {
				for i := next.Add(1); i <= 768; i = next.Add(1) {
					var report retry.Report
					ctx := retry.NewContext(context.Background(), retry.WithReport(&report))
					resp, err := client.Do(mustRequest(ctx, fmt.Sprintf("http://dep.test/%d", i)))
					if err == nil {
						resp.Body.Close()
					}
					assert.LessOrEqual(t, report.Attempts, 4, "request %d: %v", i, report)
				}
			})
		}
		wg.Wait()
		for path, n := range seen {
			assert.LessOrEqual(t, n, 4, "%s reached the server %d times", path, n)
		}
	})
}

// A request that waits for its dependency in vain hands back the last
// response it got, body intact, at its deadline; one whose body is too long
// to keep gets the *Error, with the status in it; one that never got a
// response keeps its *Error, which tells that the deadline ended it.
func TestTheLastResponseIsHandedBackWhenAWaitEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, size := range []int{14 << 10, 100 << 10} {
			body := strings.Repeat("x", size)
			for name, base := range bases(t, func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(503)
				io.WriteString(w, body)
			}) {
				tr := retry.NewTransport(base, append(lonely, retry.WithBudget(retry.NewBudget(0, 0, 1)))...)
				var report retry.Report
				ctx, cancel := context.WithTimeout(retry.NewContext(context.Background(), retry.WithReport(&report)), time.Second)
				start := time.Now()
				resp, err := (&http.Client{Transport: tr}).Do(mustRequest(ctx, "http://pipe.test/"))
				took := time.Since(start)
				cancel()
				assert.ErrorIs(t, report.Reason, retry.ErrDependencyDown, "%s, %d bytes", name, size)
				assert.Equal(t, time.Second, took, "%s, %d bytes: at the deadline", name, size)
				if size > 64<<10 {
					var e *retry.Error
					require.ErrorAs(t, err, &e, "%s, %d bytes", name, size)
					var status *retry.StatusError
					require.ErrorAs(t, err, &status)
					assert.Equal(t, 503, status.StatusCode)
					continue
				}
				require.NoError(t, err, "%s, %d bytes", name, size)
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				require.NoError(t, err)
				assert.Equal(t, 503, resp.StatusCode)
				assert.True(t, bytes.Equal([]byte(body), got), "%s: the body, whole (%d of %d bytes)", name, len(got), size)
			}
		}
	})
}

// A wait in vain after a response whose body is too long to keep ends in
// an *Error that still says what the server said: its status and its
// header (a reason of its own, a Retry-After), through errors.As.
func TestAWaitInVainKeepsTheServersStatusAndHeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		body := strings.Repeat("x", 100<<10)
		for name, base := range bases(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Reason", "overloaded")
			w.WriteHeader(503)
			io.WriteString(w, body)
		}) {
			tr := retry.NewTransport(base, append(lonely, retry.WithBudget(retry.NewBudget(0, 0, 1)))...)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			_, err := (&http.Client{Transport: tr}).Do(mustRequest(ctx, "http://pipe.test/"))
			cancel()
			assert.ErrorIs(t, err, retry.ErrDependencyDown, name)
			var status *retry.StatusError
			require.ErrorAs(t, err, &status, name)
			assert.Equal(t, 503, status.StatusCode, name)
			assert.Equal(t, "overloaded", status.Header.Get("X-Reason"), name)
		}
	})
}

// A wait in vain hands back the last response even when its small body
// came after a pause longer than the wait before the retry: the body is
// read on while the request waits for its dependency (it used to be closed
// 5 ms after the wait, and the caller got an *Error instead).
func TestALateBodyIsKeptForAWaitInVain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for name, base := range bases(t, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(503)
			http.NewResponseController(w).Flush()
			time.Sleep(200 * time.Millisecond) // the body is late: past any first wait
			io.WriteString(w, "overloaded, come back later")
		}) {
			tr := retry.NewTransport(base, append(lonely, retry.WithBudget(retry.NewBudget(0, 0, 1)))...)
			var report retry.Report
			ctx, cancel := context.WithTimeout(retry.NewContext(context.Background(), retry.WithReport(&report)), time.Second)
			resp, err := (&http.Client{Transport: tr}).Do(mustRequest(ctx, "http://pipe.test/"))
			cancel()
			assert.ErrorIs(t, report.Reason, retry.ErrDependencyDown, name)
			require.NoError(t, err, name)
			assert.Equal(t, 503, resp.StatusCode, name)
			assert.Equal(t, "overloaded, come back later", readAll(t, resp), name)
		}
	})
}

// The context's error is never hidden: a request whose deadline (or
// cancellation) ends its wait for a down host says so.
func TestTheContextsErrorIsNeverHiddenByAWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := retry.NewTransport(respond(func(*http.Request) (int, string) { return 503, "" }),
			retry.WithBackoff(backoff.Constant(0)))
		downHost(t, tr, "http://down.test/")
		client := &http.Client{Transport: tr}

		// Both end before the first probe is due (100 ms after the host
		// went down): they never get a response to hand back.
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Millisecond)
		defer cancel()
		_, err := client.Do(mustRequest(ctx, "http://down.test/"))
		var e *retry.Error
		require.ErrorAs(t, err, &e)
		assert.ErrorIs(t, err, retry.ErrDependencyDown)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, context.DeadlineExceeded, e.Context)

		ctx, cancel = context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, cancel)
		_, err = client.Do(mustRequest(ctx, "http://down.test/"))
		require.ErrorAs(t, err, &e)
		assert.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, context.Canceled, e.Context)
	})
}

// A recovered host is released at the rate it is asked, whenever its first
// success comes: here an attempt in flight answers 20 ms after the host was
// taken as down (the release rate used to be guessed from those 20 ms, and
// never caught up with 150 requests a second).
func TestARecoveredHostIsReleasedAtTheRateItIsAsked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		// 150 requests a second, 40 ms each; those arriving in the first
		// 67 ms fail. The eighth failure (sent at 47 ms) answers at 87 ms
		// and takes the host as down; the first success (sent at 67 ms)
		// answers at 107 ms.
		base := respond(func(*http.Request) (int, string) {
			arrived := time.Since(start)
			time.Sleep(40 * time.Millisecond)
			if arrived < 67*time.Millisecond {
				return 503, "down"
			}
			return 200, "ok"
		})
		tr := retry.NewTransport(base)
		client := &http.Client{Transport: tr}
		var wg sync.WaitGroup
		var late, lateOK atomic.Int64
		for i := range 900 { // 6 s
			time.Sleep(time.Until(start.Add(time.Duration(i) * time.Second / 150)))
			if i == 600 {
				st := tr.Dependencies()[0]
				assert.Equal(t, "up", st.State, "4 s into the recovery: %+v", st)
			}
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				sent := time.Since(start)
				resp, err := client.Do(mustRequest(ctx, "http://dep.test/"))
				ok := err == nil && resp.StatusCode == 200
				if err == nil {
					resp.Body.Close()
				}
				if sent >= 3*time.Second {
					late.Add(1)
					if ok {
						lateOK.Add(1)
					}
				}
			})
		}
		wg.Wait()
		t.Logf("%d of %d requests between 3 s and 6 s succeeded; %+v", lateOK.Load(), late.Load(), tr.Dependencies())
		assert.Equal(t, late.Load(), lateOK.Load(), "every request after the recovery succeeds")
		assert.Equal(t, uint64(1), tr.Dependencies()[0].Outages)
	})
}

// A panic in the code of an attempt that was the host's probe never leaves
// the host down: the next probe goes when it is due.
func TestAPanickingProbeNeverLeavesAHostDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var healthy atomic.Bool
		var panicking atomic.Bool
		base := respond(func(*http.Request) (int, string) {
			if healthy.Load() {
				return 200, "ok"
			}
			return 503, "down"
		})
		tr := retry.NewTransport(base, retry.WithBackoff(backoff.Constant(0)), retry.WithTrace(&retry.Trace{
			AttemptEnd: func(context.Context, int, *http.Response, error) {
				if panicking.CompareAndSwap(true, false) {
					panic("a hook that panics")
				}
			},
		}))
		client := &http.Client{Transport: tr}
		downHost(t, tr, "http://dep.test/")
		healthy.Store(true)
		panicking.Store(true)
		func() {
			defer func() { assert.Equal(t, "a hook that panics", recover()) }()
			client.Do(mustRequest(context.Background(), "http://dep.test/")) // waits, probes, panics
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		resp, err := client.Do(mustRequest(ctx, "http://dep.test/"))
		require.NoError(t, err, "the healthy host is reached again")
		resp.Body.Close()
		assert.Equal(t, 200, resp.StatusCode)
	})
}

// The same for Do, whose operation panics while it probes its Budget's
// dependency.
func TestAPanickingProbeNeverLeavesDosDependencyDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		budget := retry.NewBudget(0.1, 1, 20)
		opts := []retry.Option{retry.WithBudget(budget), retry.WithBackoff(backoff.Constant(0))}
		for range 8 { // eight failures in a row: down
			retry.Do(context.Background(), func(context.Context) error { return errFlaky }, append(opts, retry.WithMaxAttempts(1))...)
		}
		require.Equal(t, "down", budget.DependencyStats().State)
		func() {
			defer func() { assert.Equal(t, "an operation that panics", recover()) }()
			retry.Do(context.Background(), func(context.Context) error { panic("an operation that panics") }, opts...)
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		assert.NoError(t, retry.Do(ctx, func(context.Context) error { return nil }, opts...))
	})
}

// A request's own RideThrough holds for it alone: neither the first
// request to a host nor any other sets what the next may do.
func TestEveryRequestsOwnRideThroughHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var down atomic.Bool
		base := respond(func(*http.Request) (int, string) {
			if down.Load() {
				return 503, "down"
			}
			return 200, "ok"
		})
		long := retry.NewContext(context.Background(), retry.WithRideThrough(retry.RideThrough{MaxWait: 30 * time.Second}))
		short := retry.NewContext(context.Background(), retry.WithRideThrough(retry.RideThrough{MaxWait: 300 * time.Millisecond}))
		waited := func(client *http.Client, ctx context.Context, url string) time.Duration {
			start := time.Now()
			resp, err := client.Do(mustRequest(ctx, url))
			if err == nil {
				resp.Body.Close()
			}
			return time.Since(start)
		}

		// The first request to the host carries a long MaxWait of its own.
		tr := retry.NewTransport(base, retry.WithBackoff(backoff.Constant(0)),
			retry.WithRideThrough(retry.RideThrough{MaxWait: 300 * time.Millisecond}))
		client := &http.Client{Transport: tr}
		waited(client, long, "http://a.test/")
		down.Store(true)
		downHost(t, tr, "http://a.test/")
		assert.LessOrEqual(t, waited(client, context.Background(), "http://a.test/"), 310*time.Millisecond,
			"a plain request waits the Transport's MaxWait")

		// A request's own MaxWait is shorter than the Transport's.
		down.Store(false)
		tr = retry.NewTransport(base, retry.WithBackoff(backoff.Constant(0)))
		client = &http.Client{Transport: tr}
		waited(client, context.Background(), "http://b.test/")
		down.Store(true)
		downHost(t, tr, "http://b.test/")
		assert.LessOrEqual(t, waited(client, short, "http://b.test/"), 310*time.Millisecond,
			"a request waits its own MaxWait")

		// Do with a shared Budget: the same.
		budget := retry.NewBudget(0.1, 1, 20)
		fail := func(context.Context) error { return errFlaky }
		retry.Do(context.Background(), fail, retry.WithBudget(budget),
			retry.WithRideThrough(retry.RideThrough{MaxWait: 30 * time.Second}), retry.WithMaxAttempts(1))
		for range 8 {
			retry.Do(context.Background(), fail, retry.WithBudget(budget), retry.WithMaxAttempts(1))
		}
		start := time.Now()
		retry.Do(context.Background(), fail, retry.WithBudget(budget), retry.WithBackoff(backoff.Constant(0)),
			retry.WithRideThrough(retry.RideThrough{MaxWait: 300 * time.Millisecond}))
		assert.LessOrEqual(t, time.Since(start), 310*time.Millisecond, "Do waits its own MaxWait")
	})
}

// A Transport that met many hosts still rides through outages of the next:
// idle hosts are forgotten, new ones never ignored.
func TestEveryHostKeepsRidingThrough(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := respond(func(r *http.Request) (int, string) {
			if r.URL.Host == "new.test" {
				return 503, "down"
			}
			return 200, "ok"
		})
		tr := retry.NewTransport(base, retry.WithBackoff(backoff.Constant(0)))
		client := &http.Client{Transport: tr}
		for i := range 1024 {
			resp, err := client.Do(mustRequest(context.Background(), fmt.Sprintf("http://pod-%d.test/", i)))
			require.NoError(t, err)
			resp.Body.Close()
		}
		for range 3 { // 12 failures in a row
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			resp, err := client.Do(mustRequest(ctx, "http://new.test/"))
			cancel()
			if err == nil {
				resp.Body.Close()
			}
		}
		var found bool
		for _, st := range tr.Dependencies() {
			if st.Name == "new.test" {
				found = true
				assert.Equal(t, uint64(1), st.Outages, "%+v", st)
			}
		}
		assert.True(t, found, "the new host is listed")
		assert.LessOrEqual(t, len(tr.Dependencies()), 2048, "memory stays bounded")
	})
}

// Waits ended by their deadlines count as Expired, not as Abandoned; a
// request that waits twice counts once in Waited.
func TestDependencyStatsSayWhatHappened(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := retry.NewTransport(respond(func(*http.Request) (int, string) { return 503, "" }),
			retry.WithBackoff(backoff.Constant(0)))
		downHost(t, tr, "http://down.test/")
		client := &http.Client{Transport: tr}
		before := tr.Dependencies()[0]
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				defer cancel()
				resp, err := client.Do(mustRequest(ctx, "http://down.test/"))
				if err == nil {
					resp.Body.Close()
				}
			})
		}
		wg.Wait()
		after := tr.Dependencies()[0]
		t.Logf("before %+v\nafter %+v", before, after)
		assert.Equal(t, before.Expired+4, after.Expired, "four waits ended by their deadlines")
		assert.Equal(t, before.Abandoned, after.Abandoned)
		assert.Equal(t, before.Waited+4, after.Waited, "four requests waited (each probed, then waited again)")
	})
}

// A stalled body never delays a retry: when the wait before the retry
// ends, the body is closed where it stands (it used to hold the retry for
// a second, the whole drain bound).
func TestAStalledBodyNeverDelaysARetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sent []time.Duration
		start := time.Now()
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			sent = append(sent, time.Since(start))
			if len(sent) > 1 {
				return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
			}
			pr, pw := io.Pipe()
			go pw.Write(make([]byte, 18)) // then nothing: it stalls
			return &http.Response{StatusCode: 503, Header: http.Header{}, ContentLength: 4096, Body: pr, Request: r}, nil
		})
		tr := retry.NewTransport(base, retry.WithAttemptTimeout(150*time.Millisecond),
			retry.WithBackoff(backoff.Constant(time.Millisecond)))
		resp, err := (&http.Client{Transport: tr}).Do(mustRequest(context.Background(), "http://dep.test/"))
		require.NoError(t, err)
		resp.Body.Close()
		require.Len(t, sent, 2)
		assert.LessOrEqual(t, sent[1]-sent[0], 6*time.Millisecond,
			"the retry went once the body had sent nothing for 5 ms after the wait")
	})
}

// A body still arriving when the wait before the retry ends is read to its
// end, so its connection is reused: only a body that stalls is cut off.
func TestABodyStillArrivingIsDrainedWhole(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var read atomic.Int64
		var readAtRetry int64
		attempts := 0
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			attempts++
			if attempts > 1 {
				readAtRetry = read.Load()
				return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
			}
			pr, pw := io.Pipe()
			go func() {
				for range 8 { // 4 KiB over 8 ms
					pw.Write(make([]byte, 512))
					time.Sleep(time.Millisecond)
				}
				pw.Close()
			}()
			body := readCounter{pr, &read}
			return &http.Response{StatusCode: 503, Header: http.Header{}, ContentLength: 4096, Body: body, Request: r}, nil
		})
		tr := retry.NewTransport(base, retry.WithBackoff(backoff.Constant(time.Millisecond)))
		resp, err := (&http.Client{Transport: tr}).Do(mustRequest(context.Background(), "http://dep.test/"))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, int64(4096), readAtRetry, "the body was read whole before the retry")
	})
}

// readCounter counts the bytes read from its body.
type readCounter struct {
	io.ReadCloser
	n *atomic.Int64
}

func (r readCounter) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	r.n.Add(int64(n))
	return n, err
}

// A budget drained by one host's outage does not take a healthy host as
// down on its first failure: that retry is denied, and its response handed
// back at once, as with riding through off.
func TestADrainedBudgetDoesNotTakeAHealthyHostDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var blip atomic.Bool
		base := respond(func(r *http.Request) (int, string) {
			if r.URL.Host == "down.test" || blip.CompareAndSwap(true, false) {
				return 503, "no"
			}
			return 200, "ok"
		})
		budget := retry.NewBudget(0.1, 0, 2)
		tr := retry.NewTransport(base, retry.WithBudget(budget), retry.WithBackoff(backoff.Constant(0)))
		client := &http.Client{Transport: tr}
		for range 2 { // the outage's retries drain the budget, and it is taken as down
			resp, err := client.Do(mustRequest(context.Background(), "http://down.test/"))
			require.NoError(t, err)
			resp.Body.Close()
		}
		require.Equal(t, "down", tr.Dependencies()[0].State)
		require.Less(t, budget.Stats().Tokens, 1.0, "the outage drained the budget")
		blip.Store(true)
		start := time.Now()
		var report retry.Report
		resp, err := client.Do(mustRequest(retry.NewContext(context.Background(), retry.WithReport(&report)), "http://ok.test/"))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 503, resp.StatusCode)
		assert.ErrorIs(t, report.Reason, retry.ErrBudgetDenied)
		assert.Zero(t, time.Since(start), "handed back at once")
		for _, st := range tr.Dependencies() {
			if st.Name == "ok.test" {
				assert.Equal(t, "up", st.State)
				assert.Zero(t, st.Outages)
			}
		}
	})
}

// A retry the budget paid for that never went (its wait for the
// dependency ended first) gets its token back.
func TestAnUnsentRetryGetsItsTokenBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var down atomic.Bool
		base := respond(func(*http.Request) (int, string) {
			if down.Load() {
				return 503, "down"
			}
			return 200, "ok"
		})
		budget := retry.NewBudget(0.1, 0, 10)
		tr := retry.NewTransport(base, retry.WithBudget(budget), retry.WithBackoff(backoff.Constant(0)),
			retry.WithRideThrough(retry.RideThrough{MaxWait: time.Minute}))
		client := &http.Client{Transport: tr}
		// Eight single-attempt failures take the host as down without
		// spending the budget.
		down.Store(true)
		once := retry.NewContext(context.Background(), retry.WithMaxAttempts(1))
		for range 8 {
			resp, err := client.Do(mustRequest(once, "http://dep.test/"))
			require.NoError(t, err)
			resp.Body.Close()
		}
		require.Equal(t, "down", tr.Dependencies()[0].State)
		// A request whose first attempt goes as the probe, fails, gets a
		// retry paid for, and waits in vain: its deadline comes before the
		// next probe is due.
		time.Sleep(time.Second)
		tokens := budget.Stats().Tokens
		ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
		defer cancel()
		resp, err := client.Do(mustRequest(ctx, "http://dep.test/"))
		if err == nil {
			resp.Body.Close()
		}
		st := budget.Stats()
		assert.Equal(t, uint64(1), st.RetriesAllowed, "%v", st)
		assert.Equal(t, tokens, st.Tokens, "the unsent retry's token is back")
	})
}

// A probe answered by a keyed 409 with Retry-After (an earlier copy still
// runs) tells that the server is alive: the host recovers.
func TestAProbeAnsweredWithAKeyed409MeansTheServerIsAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var state atomic.Int32 // 0 down, 1 busy with the first copy, 2 done
		answer := respond(func(r *http.Request) (int, string) {
			switch state.Load() {
			case 0:
				return 503, "down"
			case 1:
				return 409, "in progress"
			}
			return 201, "created"
		})
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := answer(r)
			if resp.StatusCode == 409 {
				resp.Header.Set("Retry-After", "0")
			}
			return resp, err
		})
		tr := retry.NewTransport(base, retry.WithBackoff(backoff.Constant(50*time.Millisecond)))
		downHost(t, tr, "http://dep.test/")
		state.Store(1)
		time.AfterFunc(2*time.Second, func() { state.Store(2) })
		req, _ := http.NewRequest("POST", "http://dep.test/", strings.NewReader("x"))
		req.Header.Set("Idempotency-Key", `"k"`)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := (&http.Client{Transport: tr}).Do(req.WithContext(ctx))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 201, resp.StatusCode)
		st := tr.Dependencies()[0]
		assert.Equal(t, "up", st.State, "%+v", st)
		assert.LessOrEqual(t, st.Probes, uint64(2), "the 409 was no failed probe: %+v", st)
	})
}

// One client calling a dead host and a healthy one with 5% blips: the
// dead host's outage, which drained the budget they share at its start,
// costs the healthy host nothing, and the dead host sees a few attempts
// per hundred requests: the failures that took it down, and the probes
// (one for every ten requests that wait, so that a host that comes back
// is seen within ten arrivals).
func TestOneHostsOutageCostsAnotherNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int64
		base := respond(func(r *http.Request) (int, string) {
			time.Sleep(time.Millisecond)
			if r.URL.Host == "down.test" || brownout(n.Add(1)) && n.Load()%6 == 0 {
				return 503, "no"
			}
			return 200, "ok"
		})
		tr := retry.NewTransport(base)
		client := &http.Client{Transport: tr}
		var wg sync.WaitGroup
		var okHealthy, downAttempts atomic.Int64
		start := time.Now()
		const perHost = 400 // 100 a second each, for 4 s
		for i := range perHost {
			time.Sleep(time.Until(start.Add(time.Duration(i) * 10 * time.Millisecond)))
			for _, host := range []string{"down.test", "ok.test"} {
				wg.Go(func() {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					defer cancel()
					var report retry.Report
					resp, err := client.Do(mustRequest(retry.NewContext(ctx, retry.WithReport(&report)), "http://"+host+"/"))
					if host == "down.test" {
						downAttempts.Add(int64(report.Attempts))
					}
					if err == nil {
						if host == "ok.test" && resp.StatusCode == 200 {
							okHealthy.Add(1)
						}
						resp.Body.Close()
					}
				})
			}
		}
		wg.Wait()
		t.Logf("healthy: %d of %d; down host: %.3f attempts per request; %+v; %v",
			okHealthy.Load(), perHost, float64(downAttempts.Load())/perHost, tr.Dependencies(), tr.Budget().Stats())
		assert.Equal(t, int64(perHost), okHealthy.Load(), "every request to the healthy host succeeds")
		assert.LessOrEqual(t, float64(downAttempts.Load())/perHost, 0.15)
	})
}

// leaseContext reports a deadline it moves on instead of ending then, as an
// execution's context does while its lease is extended.
type leaseContext struct {
	context.Context
	deadline time.Time
}

func (c leaseContext) Deadline() (time.Time, bool) { return c.deadline, true }

// A request whose context reports a deadline that it then moves on (an
// execution's lease, extended) ends its wait at that deadline all the same,
// and says the deadline ended it: it used to wait on for its context.
func TestAWaitEndsAtADeadlineTheContextMovesOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := retry.NewTransport(respond(func(*http.Request) (int, string) { return 503, "" }),
			retry.WithBackoff(backoff.Constant(0)))
		downHost(t, tr, "http://down.test/")
		ctx := leaseContext{Context: context.Background(), deadline: time.Now().Add(300 * time.Millisecond)}
		start := time.Now()
		resp, err := (&http.Client{Transport: tr}).Do(mustRequest(ctx, "http://down.test/"))
		if err == nil { // it probed on the way: its 503 is handed back
			resp.Body.Close()
		} else {
			assert.ErrorIs(t, err, retry.ErrDependencyDown)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
		}
		assert.LessOrEqual(t, time.Since(start), 310*time.Millisecond)

		budget := retry.NewBudget(0.1, 1, 20)
		for range 8 {
			retry.Do(context.Background(), func(context.Context) error { return errFlaky },
				retry.WithBudget(budget), retry.WithMaxAttempts(1))
		}
		ctx = leaseContext{Context: context.Background(), deadline: time.Now().Add(300 * time.Millisecond)}
		start = time.Now()
		err = retry.Do(ctx, func(context.Context) error { return errFlaky }, retry.WithBudget(budget))
		assert.ErrorIs(t, err, retry.ErrDependencyDown)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.LessOrEqual(t, time.Since(start), 310*time.Millisecond)
	})
}
