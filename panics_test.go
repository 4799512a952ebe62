package retry_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/backoff"
	"github.com/exactlyonce/retry/protocol"
)

// An operation that panics does not leave its contexts, or their timers,
// live: Do cleans up, then lets the panic go on.
func TestPanickingOperationReleasesItsContexts(t *testing.T) {
	var seen context.Context
	func() {
		defer func() { assert.Equal(t, "boom", recover()) }()
		retry.Do(context.Background(), func(ctx context.Context) error {
			seen = ctx
			panic("boom")
		}, retry.WithTotalTimeout(time.Hour), retry.WithAttemptTimeout(time.Minute))
	}()
	require.NotNil(t, seen)
	assert.Error(t, seen.Err(), "the attempt's context ended with the panic")
}

// closeCounter is a response body that counts its Close calls.
type closeCounter struct {
	io.Reader
	closed atomic.Int32
}

func (c *closeCounter) Close() error { c.closed.Add(1); return nil }

// A hook, a classifier or a backoff that panics inside the Transport does
// not leak the response: its body is closed and the attempt's context ends
// before the panic goes on.
func TestPanickingPolicyCodeReleasesTheResponse(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  retry.Option
	}{
		{"WithOnAttempt", onAttempt(func(retry.Attempt) { panic("boom") })},
		{"WithOnRetry", onRetry(func(retry.Attempt) { panic("boom") })},
		{"Backoff", retry.WithBackoff(backoff.Func(func(int, time.Duration, float64) time.Duration { panic("boom") }))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := &closeCounter{Reader: strings.NewReader("busy")}
			var seen context.Context
			base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				seen = r.Context()
				return &http.Response{StatusCode: 503, Header: http.Header{}, Body: body, Request: r}, nil
			})
			tr := retry.NewTransport(base, tc.opt, retry.WithClock(newAutoClock()))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", "http://mem.test/", nil)
			func() {
				defer func() { assert.Equal(t, "boom", recover()) }()
				tr.RoundTrip(req)
			}()
			assert.Equal(t, int32(1), body.closed.Load(), "the response body was closed")
			assert.Error(t, seen.Err(), "the attempt's context ended")
		})
	}
	t.Run("Classifier", func(t *testing.T) {
		var seen context.Context
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			seen = r.Context()
			return nil, io.ErrUnexpectedEOF
		})
		tr := retry.NewTransport(base, retry.WithClassifier(func(error) bool { panic("boom") }),
			retry.WithTotalTimeout(time.Hour))
		req, _ := http.NewRequest("GET", "http://mem.test/", nil)
		func() {
			defer func() { assert.Equal(t, "boom", recover()) }()
			tr.RoundTrip(req)
		}()
		assert.Error(t, seen.Err(), "the total deadline's context and its timer ended")
	})
}

// Over net/http, a panicking hook must not leave the connection busy: its
// goroutines end once the idle connections are closed.
func TestPanickingHookLeavesNoConnectionBehind(t *testing.T) {
	srv := newScriptServer(t, 503)
	srv.body = []byte("busy")
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	tr := retry.NewTransport(nil, onAttempt(func(retry.Attempt) { panic("boom") }))
	func() {
		defer func() { recover() }()
		(&http.Client{Transport: tr}).Get(srv.URL)
	}()
	tr.CloseIdleConnections()
}

// Where net/http answers with an error, so does the Transport: a nil
// *http.Transport, the zero Transport, a request without a URL, a base that
// returns nothing.
func TestMisuseGetsErrorsNotPanics(t *testing.T) {
	srv := newScriptServer(t, 200)
	t.Run("typed nil base", func(t *testing.T) {
		var nilTr *http.Transport
		tr := retry.NewTransport(nilTr)
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
		require.NoError(t, err)
		readAll(t, resp)
	})
	t.Run("zero Transport", func(t *testing.T) {
		tr := &retry.Transport{}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
		require.NoError(t, err)
		readAll(t, resp)
		assert.NotNil(t, tr.Budget(), "with a budget of its own")
	})
	t.Run("nil URL", func(t *testing.T) {
		for _, opt := range []retry.Option{retry.WithAdaptiveTimeout(retry.AdaptiveTimeout{}), retry.WithHedging(retry.Hedging{}), nil} {
			tr := retry.NewTransport(roundTripFunc(func(*http.Request) (*http.Response, error) {
				t.Error("sent")
				return nil, nil
			}), opt)
			body := &closeCounter{Reader: strings.NewReader("x")}
			_, err := tr.RoundTrip(&http.Request{Method: "POST", Header: http.Header{}, Body: body})
			assert.Error(t, err)
			assert.Equal(t, int32(1), body.closed.Load(), "the body is closed, as RoundTrip must")
		}
	})
	t.Run("nil response and nil error", func(t *testing.T) {
		tr := retry.NewTransport(roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, nil }))
		u, _ := url.Parse("http://mem.test/")
		resp, err := tr.RoundTrip(&http.Request{Method: "GET", URL: u, Header: http.Header{}})
		assert.Nil(t, resp)
		var re *retry.Error
		require.ErrorAs(t, err, &re)
		assert.Equal(t, 1, re.Attempts)
		assert.Contains(t, err.Error(), "nil *http.Response")
	})
}

// A Do call that panics tells its Trace through Panicked (never End), with
// the loop's context and the panic's value, and the panic goes on; a
// goroutine that exits inside the operation (runtime.Goexit, as t.FailNow
// does) is told with a nil value.
func TestPanickingOperationIsToldToTheTrace(t *testing.T) {
	type key struct{}
	var ended atomic.Int32
	var told []any
	var loopCtx context.Context
	tr := &retry.Trace{
		Start: func(ctx context.Context, _ *http.Request) context.Context {
			return context.WithValue(ctx, key{}, "loop")
		},
		End: func(context.Context, retry.Report) { ended.Add(1) },
		Panicked: func(ctx context.Context, v any) {
			loopCtx = ctx
			told = append(told, v)
		},
	}
	assert.PanicsWithValue(t, "boom", func() {
		_ = retry.Do(context.Background(), func(context.Context) error { panic("boom") }, retry.WithTrace(tr))
	})
	require.NotNil(t, loopCtx)
	assert.Equal(t, "loop", loopCtx.Value(key{}))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = retry.Do(context.Background(), func(context.Context) error { runtime.Goexit(); return nil }, retry.WithTrace(tr))
	}()
	<-done
	assert.Equal(t, []any{"boom", nil}, told)
	assert.Zero(t, ended.Load())
}

// A RoundTrip whose base panics tells its Trace through Panicked, and the
// panic goes on.
func TestPanickingBaseIsToldToTheTrace(t *testing.T) {
	var ended atomic.Int32
	var told []any
	tr := &retry.Trace{
		End:      func(context.Context, retry.Report) { ended.Add(1) },
		Panicked: func(_ context.Context, v any) { told = append(told, v) },
	}
	base := roundTripFunc(func(*http.Request) (*http.Response, error) { panic("boom") })
	req, err := http.NewRequest(http.MethodGet, "http://mem.test/", nil)
	require.NoError(t, err)
	assert.PanicsWithValue(t, "boom", func() { _, _ = retry.NewTransport(base, retry.WithTrace(tr)).RoundTrip(req) })
	assert.Equal(t, []any{"boom"}, told)
	assert.Zero(t, ended.Load())
}

// A Caller's call that panics tells its Trace through Panicked (never End),
// with the loop's context, as Do and RoundTrip do: a span the Trace began
// at Start ends; a goroutine that exits inside the attempt is told with a
// nil value.
func TestPanickingCallerCallIsToldToTheTrace(t *testing.T) {
	type key struct{}
	var ended atomic.Int32
	var told []any
	var loopCtx context.Context
	tr := &retry.Trace{
		Start: func(ctx context.Context, _ *http.Request) context.Context {
			return context.WithValue(ctx, key{}, "loop")
		},
		End: func(context.Context, retry.Report) { ended.Add(1) },
		Panicked: func(ctx context.Context, v any) {
			loopCtx = ctx
			told = append(told, v)
		},
	}
	cl := protocol.NewCaller(retry.WithTrace(tr))
	assert.PanicsWithValue(t, "boom", func() {
		_, _ = cl.Run(context.Background(), &protocol.Call{Idempotent: true},
			func(context.Context, int, bool) protocol.Verdict { panic("boom") })
	})
	require.NotNil(t, loopCtx)
	assert.Equal(t, "loop", loopCtx.Value(key{}))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = cl.Run(context.Background(), &protocol.Call{Idempotent: true},
			func(context.Context, int, bool) protocol.Verdict { runtime.Goexit(); return protocol.Verdict{} })
	}()
	<-done
	assert.Equal(t, []any{"boom", nil}, told)
	assert.Zero(t, ended.Load())
}
