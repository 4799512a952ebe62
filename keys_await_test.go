package retry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/backoff"
	"github.com/exactlyonce/retry/idempotency"
)

// firstWave is a server for n concurrent keyed POSTs ("charge-0" to
// "charge-<n-1>") that all reach it before any is answered: the first
// copies of the first resets ones have their effect and then meet a
// connection reset, and the others are answered only once the client has
// seen every reset (released by resetsSeen), so that no answer has come
// back when the resets are judged. Later copies are served at once. The
// effect and the answer are handler's; it runs behind the idempotency
// middleware when mw is set.
type firstWave struct {
	n, resets int
	handler   http.Handler
	arrived   chan struct{} // closed when the n first copies are in
	released  chan struct{} // closed by resetSeen once the client saw every reset

	mu       sync.Mutex
	seen     map[string]bool // bodies seen
	in       int
	resetsIn atomic.Int32
	effects  map[string]int
}

func newFirstWave(n, resets int, mw bool) *firstWave {
	w := &firstWave{n: n, resets: resets, arrived: make(chan struct{}), released: make(chan struct{}),
		seen: map[string]bool{}, effects: map[string]int{}}
	w.handler = http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		idempotency.MarkStarted(r.Context())
		body, _ := io.ReadAll(r.Body)
		w.mu.Lock()
		w.effects[string(body)]++
		w.mu.Unlock()
		rw.WriteHeader(http.StatusCreated)
		io.WriteString(rw, "charged")
	})
	if mw {
		w.handler = idempotency.Middleware(idempotency.NewRunner(nil), idempotency.SingleTenant)(w.handler)
	}
	return w
}

func (w *firstWave) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(strings.NewReader(string(body)))
	var i int
	fmt.Sscanf(string(body), "charge-%d", &i)
	w.mu.Lock()
	first := !w.seen[string(body)]
	w.seen[string(body)] = true
	if first {
		if w.in++; w.in == w.n {
			close(w.arrived)
		}
	}
	w.mu.Unlock()
	if !first {
		w.handler.ServeHTTP(rw, r)
		return
	}
	<-w.arrived
	if i < w.resets {
		w.handler.ServeHTTP(discardWriter{header: http.Header{}}, r) // the effect, whose answer is lost
		conn, _, err := http.NewResponseController(rw).Hijack()
		if err != nil {
			panic(http.ErrAbortHandler)
		}
		conn.Close() // a pipe: the client reads EOF, as after a reset
		return
	}
	<-w.released
	w.handler.ServeHTTP(rw, r)
}

// resetSeen counts a reset the client saw, and releases the answers once
// it saw them all.
func (w *firstWave) resetSeen() {
	if int(w.resetsIn.Add(1)) == w.resets {
		close(w.released)
	}
}

func (w *firstWave) effectsOf(body string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.effects[body]
}

type discardWriter struct{ header http.Header }

func (d discardWriter) Header() http.Header         { return d.header }
func (d discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d discardWriter) WriteHeader(int)             {}

// run sends the wave's n POSTs at once through a Transport over base (a
// *http.Transport on a pipe network) and returns their errors, and how long
// the slowest took.
func (w *firstWave) run(t *testing.T, base http.RoundTripper, opts ...retry.Option) ([]error, time.Duration) {
	t.Helper()
	seeing := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := base.RoundTrip(r)
		if err != nil {
			w.resetSeen()
		}
		return resp, err
	})
	tr := retry.NewTransport(seeing, append([]retry.Option{retry.WithBackoff(backoff.Constant(time.Millisecond))}, opts...)...)
	client := &http.Client{Transport: tr}
	errs := make([]error, w.n)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range w.n {
		wg.Go(func() {
			resp, err := client.Post("http://pipe.test/charges", "text/plain", strings.NewReader(fmt.Sprintf("charge-%d", i)))
			if err == nil {
				assert.Equal(t, http.StatusCreated, resp.StatusCode)
				assert.Equal(t, "charged", readAll(t, resp))
			}
			errs[i] = err
		})
	}
	wg.Wait()
	return errs, time.Since(start)
}

// Issue 39, the demo's failures: keyed POSTs were resent only to a host
// that had shown it honours keys, so the first concurrent POSTs to a fresh
// host that met a reset after their effect, before any answer had come
// back, failed, although the host runs our middleware. They now wait for
// the answers still out to that host: once one echoes its key, they are
// retried, and every charge is made once and confirmed.
func TestResetsBeforeTheFirstAnswerWaitForTheHostToShowItHonoursKeys(t *testing.T) {
	for _, deadline := range []time.Duration{0, 10 * time.Second} {
		t.Run(fmt.Sprintf("deadline %v", deadline), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const n, resets = 8, 3
				wave := newFirstWave(n, resets, true)
				base, _ := newPipeServer(t, wave)
				var opts []retry.Option
				if deadline > 0 {
					opts = append(opts, retry.WithTotalTimeout(deadline))
				}
				errs, took := wave.run(t, base, opts...)
				for i, err := range errs {
					assert.NoError(t, err, "charge %d", i)
					assert.Equal(t, 1, wave.effectsOf(fmt.Sprintf("charge-%d", i)), "charge %d", i)
				}
				assert.Less(t, took, time.Second, "no wait but the backoff")
			})
		})
	}
}

// The same first wave against a server that ignores keys (no echo) makes
// no duplicate: the resets' POSTs give up, as soon as an answer without
// the echo shows the host ignores keys, with ErrNotIdempotent.
func TestResetsBeforeTheFirstAnswerFromAServerThatIgnoresKeysGiveUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, resets = 8, 3
		wave := newFirstWave(n, resets, false)
		base, _ := newPipeServer(t, wave)
		errs, took := wave.run(t, base)
		for i, err := range errs {
			if i < resets {
				assert.ErrorIs(t, err, retry.ErrNotIdempotent, "charge %d", i)
			} else {
				assert.NoError(t, err, "charge %d", i)
			}
			assert.Equal(t, 1, wave.effectsOf(fmt.Sprintf("charge-%d", i)), "charge %d: no duplicate", i)
		}
		assert.Zero(t, took, "nobody waits for the deadline or MaxWait")
	})
}

// keyedBase is a RoundTripper for the waits' bounds: a POST to /reset
// fails with a reset once it is written; one to /held is answered 201 with
// the key echoed, or not, once answer is closed.
func keyedBase(answer <-chan struct{}, echo bool) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
		if r.URL.Path == "/reset" {
			return nil, io.ErrUnexpectedEOF
		}
		select {
		case <-answer:
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
		h := http.Header{}
		if echo {
			h.Set("Idempotency-Key", r.Header.Get("Idempotency-Key"))
		}
		return &http.Response{StatusCode: http.StatusCreated, Header: h, Body: http.NoBody, Request: r}, nil
	})
}

// A reset with no other keyed request out to its host gives up at once, as
// before: nothing could show that the host honours keys.
func TestAResetWithNothingElseOutGivesUpAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var attempts atomic.Int32
		tr := retry.NewTransport(keyedBase(nil, true), onAttempt(func(retry.Attempt) { attempts.Add(1) }))
		start := time.Now()
		_, err := (&http.Client{Transport: tr}).Post("http://host.test/reset", "text/plain", strings.NewReader("x"))
		assert.ErrorIs(t, err, retry.ErrNotIdempotent)
		assert.Zero(t, time.Since(start))
		assert.Equal(t, int32(1), attempts.Load())
	})
}

// The wait for another request's answer lasts at most until the request's
// deadline, or DefaultMaxWait without one, and ends in ErrNotIdempotent;
// an answer that comes in time and echoes the key lets it be retried, and
// one that does not echo it ends the wait at once.
func TestTheWaitForKeyEvidenceIsBounded(t *testing.T) {
	cases := []struct {
		name     string
		total    time.Duration
		answerAt time.Duration // 0: never, while the reset waits
		echo     bool
		took     time.Duration
		ok       bool
	}{
		{name: "no deadline", took: retry.DefaultMaxWait},
		{name: "total timeout", total: 3 * time.Second, took: 3 * time.Second},
		{name: "echo in time", total: 3 * time.Second, answerAt: time.Second, echo: true, took: time.Second, ok: true},
		{name: "no echo", total: 3 * time.Second, answerAt: time.Second, took: time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				answer := make(chan struct{})
				base := keyedBase(answer, c.echo)
				var opts []retry.Option
				if c.total > 0 {
					opts = append(opts, retry.WithTotalTimeout(c.total))
				}
				tr := retry.NewTransport(base, append(opts, retry.WithBackoff(backoff.Constant(0)))...)
				client := &http.Client{Transport: tr}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				held := make(chan error, 1)
				go func() {
					req, _ := http.NewRequestWithContext(ctx, "POST", "http://host.test/held", strings.NewReader("held"))
					resp, err := client.Do(req)
					if err == nil {
						resp.Body.Close()
					}
					held <- err
				}()
				synctest.Wait() // the held POST is out
				if c.answerAt > 0 {
					time.AfterFunc(c.answerAt, func() { close(answer) })
				}
				start := time.Now()
				_, err := client.Post("http://host.test/reset", "text/plain", strings.NewReader("x"))
				took := time.Since(start)
				if c.ok {
					// Retried once the host showed it honours keys: the
					// retry meets a reset again, and so on to the limit.
					assert.ErrorIs(t, err, retry.ErrAttemptsExhausted)
				} else {
					assert.ErrorIs(t, err, retry.ErrNotIdempotent)
					var re *retry.Error
					if assert.True(t, errors.As(err, &re)) {
						assert.Equal(t, 1, re.Attempts)
					}
				}
				assert.Equal(t, c.took, took)
				cancel()
				<-held
			})
		})
	}
}
