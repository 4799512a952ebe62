package retry_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry"
)

// bases returns, for a handler, the two kinds of base every behaviour is
// tried over: net/http's own Transport (over an in-memory network) and a
// custom RoundTripper that implements nothing of this package's. Call it
// inside a synctest bubble.
func bases(t *testing.T, h http.HandlerFunc) map[string]http.RoundTripper {
	netTr, _ := newPipeServer(t, h)
	custom := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		rec := newStreamRecorder(r)
		in := r.Clone(r.Context()) // the request as a server sees it
		if in.Body == nil {
			in.Body = http.NoBody
		}
		go func() {
			h(rec, in)
			in.Body.Close() // a RoundTripper closes the request body
			rec.finish()
		}()
		return rec.response()
	})
	return map[string]http.RoundTripper{"net/http": netTr, "custom": custom}
}

// streamRecorder serves a handler in memory like a connection would: the
// response is handed over once its header is written, and its body streams.
type streamRecorder struct {
	req     *http.Request
	header  http.Header
	status  chan int
	pw      *io.PipeWriter
	pr      *io.PipeReader
	written atomic.Bool
}

func newStreamRecorder(r *http.Request) *streamRecorder {
	pr, pw := io.Pipe()
	return &streamRecorder{req: r, header: http.Header{}, status: make(chan int, 1), pr: pr, pw: pw}
}

func (s *streamRecorder) Header() http.Header { return s.header }
func (s *streamRecorder) WriteHeader(code int) {
	if !s.written.Swap(true) {
		s.status <- code
	}
}
func (s *streamRecorder) Write(p []byte) (int, error) {
	s.WriteHeader(200)
	return s.pw.Write(p)
}
func (s *streamRecorder) finish() {
	s.WriteHeader(200)
	s.pw.Close()
}
func (s *streamRecorder) response() (*http.Response, error) {
	select {
	case code := <-s.status:
		return &http.Response{StatusCode: code, Header: s.header.Clone(), Body: s.pr, Request: s.req}, nil
	case <-s.req.Context().Done():
		s.pr.Close()
		return nil, s.req.Context().Err()
	}
}

// An attempt cut off by its timeout is a deadline exceeded, never a
// cancellation: nobody cancelled it.
func TestAttemptTimeoutIsNotACancellation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for name, base := range bases(t, func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done() // every attempt hangs
		}) {
			tr := retry.NewTransport(base, retry.WithAttemptTimeout(time.Second), retry.WithMaxAttempts(2))
			_, err := (&http.Client{Transport: tr}).Get("http://pipe.test/")
			require.Error(t, err, name)
			var timeout *retry.AttemptTimeoutError
			assert.ErrorAs(t, err, &timeout, name)
			assert.ErrorIs(t, err, context.DeadlineExceeded, name)
			assert.NotErrorIs(t, err, context.Canceled, name)
			assert.NotErrorIs(t, timeout, context.Canceled, name)
			tr.CloseIdleConnections()
		}
	})
}

// The default bound applies only when nothing else bounds an attempt: a
// longer attempt timeout, or a longer deadline, is honoured.
func TestLongerAttemptTimeoutOrDeadlineIsHonoured(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-time.After(35 * time.Second):
				w.Write([]byte("late but fine"))
			case <-r.Context().Done():
			}
		}
		for name, base := range bases(t, slow) {
			tr := retry.NewTransport(base, retry.WithAttemptTimeout(45*time.Second))
			resp, err := (&http.Client{Transport: tr}).Get("http://pipe.test/")
			require.NoError(t, err, name)
			assert.Equal(t, "late but fine", readAll(t, resp), name)

			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			req, _ := http.NewRequestWithContext(ctx, "GET", "http://pipe.test/", nil)
			resp, err = (&http.Client{Transport: retry.NewTransport(base)}).Do(req)
			require.NoError(t, err, name)
			assert.Equal(t, "late but fine", readAll(t, resp), name)
			cancel()

			// Without a deadline, DefaultAttemptTimeout cuts every attempt.
			start := time.Now()
			_, err = (&http.Client{Transport: retry.NewTransport(base, retry.WithMaxAttempts(1))}).Get("http://pipe.test/")
			var timeout *retry.AttemptTimeoutError
			require.ErrorAs(t, err, &timeout, name)
			assert.Equal(t, retry.DefaultAttemptTimeout, timeout.Timeout)
			assert.Equal(t, retry.DefaultAttemptTimeout, time.Since(start), name)
			tr.CloseIdleConnections()
		}
	})
}

// A timer that fires just as the response arrives makes the attempt a
// timeout: a success whose body is already dead is never handed back.
func TestAttemptTimerFiringWithTheResponseIsATimeout(t *testing.T) {
	clk := newAutoClock()
	var calls atomic.Int32
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if calls.Add(1) == 1 {
			clk.Add(time.Second) // the timer fires as the headers come in
			<-r.Context().Done()
			return &http.Response{StatusCode: 200, Header: http.Header{}, Body: ctxBody{r.Context()}, Request: r}, nil
		}
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
	})
	tr := retry.NewTransport(base, retry.WithClock(clk), retry.WithAttemptTimeout(time.Second))
	var rep retry.Report
	req, _ := http.NewRequestWithContext(retry.NewContext(context.Background(), retry.WithReport(&rep)), "GET", "http://mem.test/", nil)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	require.NoError(t, err)
	assert.Equal(t, "ok", readAll(t, resp), "the attempt that timed out was retried")
	assert.Equal(t, 2, rep.Attempts)
}

// ctxBody is a body that fails once its request's context has ended, as
// net/http's does.
type ctxBody struct{ ctx context.Context }

func (b ctxBody) Read(p []byte) (int, error) {
	if err := b.ctx.Err(); err != nil {
		return 0, err
	}
	return copy(p, "ok"), io.EOF
}
func (ctxBody) Close() error { return nil }

// Responses without a body, and switched protocols, release the attempt's
// context too.
func TestResponsesWithoutABodyReleaseTheAttemptContext(t *testing.T) {
	for _, tc := range []struct {
		name string
		resp func(r *http.Request) *http.Response
	}{
		{"nil body", func(r *http.Request) *http.Response {
			return &http.Response{StatusCode: 204, Header: http.Header{}, Request: r}
		}},
		{"101", func(r *http.Request) *http.Response {
			return &http.Response{StatusCode: 101, Header: http.Header{}, Body: &rwc{}, Request: r}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var seen context.Context
			base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				seen = r.Context()
				return tc.resp(r), nil
			})
			tr := retry.NewTransport(base, retry.WithAttemptTimeout(time.Hour))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", "http://mem.test/", nil)
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			if resp.Body != nil {
				_, writable := resp.Body.(io.Writer)
				assert.True(t, writable, "a switched protocol's connection stays writable")
				require.NoError(t, resp.Body.Close())
			}
			assert.Error(t, seen.Err(), "the attempt's context was released")
		})
	}
}

// rwc is a connection-like body: readable, writable, closable.
type rwc struct{ strings.Builder }

func (*rwc) Read([]byte) (int, error) { return 0, io.EOF }
func (*rwc) Close() error             { return nil }

// Adaptive timeouts learn that a host got slower from the attempts they cut
// off, and come back down when it is fast again.
func TestAdaptiveTimeoutLearnsASlowdownAndARecovery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var latency atomic.Int64
		latency.Store(int64(2 * time.Millisecond))
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			select {
			case <-time.After(time.Duration(latency.Load())):
				return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
			case <-r.Context().Done():
				return nil, r.Context().Err()
			}
		})
		var first retry.Attempt
		tr := retry.NewTransport(base, retry.WithAdaptiveTimeout(retry.AdaptiveTimeout{}), retry.WithBudget(nil),
			onAttempt(func(a retry.Attempt) {
				if a.Number == 1 {
					first = a
				}
			}))
		client := &http.Client{Transport: tr}
		get := func() error {
			resp, err := client.Get("http://mem.test/")
			if err == nil {
				resp.Body.Close()
			}
			return err
		}
		for range 100 { // warmed at 2 ms: the learned timeout is the 50 ms floor
			require.NoError(t, get())
		}
		latency.Store(int64(80 * time.Millisecond)) // slower, still healthy
		ok := 0
		for range 12 {
			if get() == nil {
				ok++
			}
		}
		assert.Equal(t, 12, ok, "every request succeeds: the cut attempts raised the estimate")
		require.NoError(t, get())
		assert.NoError(t, first.Err, "by now the first attempt is given time enough")

		latency.Store(int64(2 * time.Millisecond)) // fast again
		for range 2100 {
			require.NoError(t, get())
		}
		latency.Store(int64(time.Hour)) // a hung attempt shows the timeout in force
		assert.Error(t, get())
		var timeout *retry.AttemptTimeoutError
		require.ErrorAs(t, first.Err, &timeout)
		assert.Equal(t, 50*time.Millisecond, timeout.Timeout, "back to the floor once the slow samples aged out")
	})
}
