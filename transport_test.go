package retry_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/backoff"
)

// scriptServer serves a scripted handler on loopback and counts its
// connections.
type scriptServer struct {
	*httptest.Server
	*scripted
	newConns atomic.Int32
	openConn atomic.Int32
	closedCh chan struct{} // one value per connection closed
}

func newScriptServer(t *testing.T, script ...int) *scriptServer {
	s := &scriptServer{scripted: newScripted(script...), closedCh: make(chan struct{}, 1024)}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			s.newConns.Add(1)
			s.openConn.Add(1)
		case http.StateClosed, http.StateHijacked:
			s.openConn.Add(-1)
			s.closedCh <- struct{}{}
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func newClient(t *testing.T, opts ...retry.Option) (*http.Client, *retry.Transport) {
	tr := retry.NewTransport(nil, opts...)
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}, tr
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	return string(b)
}

func TestGetRetries503UntilSuccess(t *testing.T) {
	srv := newScriptServer(t, 503, 503, 200)
	srv.body = []byte("hello")
	client, _ := newClient(t, retry.WithClock(newAutoClock()))
	var rep retry.Report
	req, _ := http.NewRequestWithContext(retry.NewContext(context.Background(), retry.WithReport(&rep)), "GET", srv.URL, nil)
	resp, err := client.Do(req)
	require.NoError(t, err)
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, "hello", readAll(t, resp))
	assert.Len(t, srv.requests(), 3)
	assert.Equal(t, retry.Report{Attempts: 3, StatusCode: 200}, rep)
	assert.Empty(t, srv.requests()[0].key, "GET gets no key")
}

func TestRetryAfterSecondsIsAFloor(t *testing.T) {
	clk := newAutoClock()
	srv := newScriptServer(t, 429, 200)
	srv.clk = clk
	srv.headers[0] = http.Header{"Retry-After": {"1"}}
	client, _ := newClient(t, retry.WithClock(clk), retry.WithBackoff(backoff.FullJitter(10*time.Millisecond, time.Second)))
	resp, err := client.Get(srv.URL)
	require.NoError(t, err)
	readAll(t, resp)
	reqs := srv.requests()
	require.Len(t, reqs, 2)
	assert.GreaterOrEqual(t, reqs[1].at.Sub(reqs[0].at), time.Second)
}

func TestRetryAfterHTTPDateIsAFloor(t *testing.T) {
	clk := newAutoClock()
	srv := newScriptServer(t, 503, 200)
	srv.clk = clk
	at := clk.Now().Add(2 * time.Second)
	srv.headers[0] = http.Header{"Retry-After": {at.Format(http.TimeFormat)}}
	client, _ := newClient(t, retry.WithClock(clk), retry.WithBackoff(backoff.FullJitter(10*time.Millisecond, time.Second)))
	resp, err := client.Get(srv.URL)
	require.NoError(t, err)
	readAll(t, resp)
	reqs := srv.requests()
	require.Len(t, reqs, 2)
	gap := reqs[1].at.Sub(reqs[0].at)
	assert.GreaterOrEqual(t, gap, time.Second)
	assert.LessOrEqual(t, gap, 2*time.Second)
}

func TestRetryAfterPastTheDeadlineHandsBackAtOnce(t *testing.T) {
	clk := newAutoClock()
	srv := newScriptServer(t, 503)
	srv.headers[0] = http.Header{"Retry-After": {"3600"}}
	srv.body = []byte("come back later")
	client, _ := newClient(t, retry.WithClock(clk), retry.WithTotalTimeout(2*time.Second),
		retry.WithMaxRetryAfter(2*time.Hour))
	var rep retry.Report
	req, _ := http.NewRequestWithContext(retry.NewContext(context.Background(), retry.WithReport(&rep)), "GET", srv.URL, nil)
	resp, err := client.Do(req)
	require.NoError(t, err)
	assert.Equal(t, 503, resp.StatusCode)
	assert.Equal(t, "come back later", readAll(t, resp), "the body is intact")
	assert.Len(t, srv.requests(), 1)
	assert.Empty(t, clk.Waits(), "no wait was started")
	assert.ErrorIs(t, rep.Reason, retry.ErrDeadline)
}

func TestRetryAfterHeaderOverTheCapHandsBackAtOnce(t *testing.T) {
	clk := newAutoClock()
	srv := newScriptServer(t, 429)
	srv.headers[0] = http.Header{"Retry-After": {"3600"}}
	client, _ := newClient(t, retry.WithClock(clk))
	var rep retry.Report
	req, _ := http.NewRequestWithContext(retry.NewContext(context.Background(), retry.WithReport(&rep)), "GET", srv.URL, nil)
	resp, err := client.Do(req)
	require.NoError(t, err)
	readAll(t, resp)
	assert.Equal(t, 429, resp.StatusCode)
	assert.Empty(t, clk.Waits())
	assert.ErrorIs(t, rep.Reason, retry.ErrRetryAfterTooLong)
}

func TestPostBodyReplayedWithSameKey(t *testing.T) {
	payload := bytes.Repeat([]byte("0123456789abcdef"), 64) // 1 KiB
	for _, withGetBody := range []bool{true, false} {
		t.Run("GetBody="+strconv.FormatBool(withGetBody), func(t *testing.T) {
			srv := newScriptServer(t, 503, 200)
			client, _ := newClient(t, retry.WithClock(newAutoClock()))
			var body io.Reader = bytes.NewReader(payload)
			if !withGetBody {
				body = io.MultiReader(body) // hides the type: no GetBody
			}
			req, err := http.NewRequest("POST", srv.URL, body)
			require.NoError(t, err)
			require.Equal(t, withGetBody, req.GetBody != nil)
			resp, err := client.Do(req)
			require.NoError(t, err)
			readAll(t, resp)
			assert.Equal(t, 200, resp.StatusCode)
			reqs := srv.requests()
			require.Len(t, reqs, 2)
			for _, r := range reqs {
				assert.Equal(t, payload, r.body)
			}
			assert.NotEmpty(t, reqs[0].key)
			assert.Equal(t, reqs[0].key, reqs[1].key, "every attempt carries the same key")
			assert.Regexp(t, `^"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"$`, reqs[0].key)
			assert.Empty(t, req.Header.Get("Idempotency-Key"), "the caller's request is not modified")
		})
	}
}

func TestReportedKeyLetsTheCallerRepeatTheRequest(t *testing.T) {
	srv := newScriptServer(t, 503, 503, 201)
	client, _ := newClient(t, retry.WithClock(newAutoClock()), retry.WithMaxAttempts(2))
	var rep retry.Report
	req, _ := http.NewRequestWithContext(retry.NewContext(context.Background(), retry.WithReport(&rep)), "POST", srv.URL, strings.NewReader("charge"))
	resp, err := client.Do(req)
	require.NoError(t, err)
	readAll(t, resp)
	assert.Equal(t, 503, resp.StatusCode, "the Transport gave up")
	assert.ErrorIs(t, rep.Reason, retry.ErrAttemptsExhausted)
	require.Len(t, srv.requests(), 2)
	assert.Equal(t, srv.requests()[0].key, rep.IdempotencyKey)

	// The caller repeats the same logical request later, with the reported key.
	again, _ := http.NewRequestWithContext(retry.NewContext(context.Background(), retry.WithReport(&rep)), "POST", srv.URL, strings.NewReader("charge"))
	again.Header.Set("Idempotency-Key", rep.IdempotencyKey)
	resp, err = client.Do(again)
	require.NoError(t, err)
	readAll(t, resp)
	assert.Equal(t, 201, resp.StatusCode)
	reqs := srv.requests()
	require.Len(t, reqs, 3)
	assert.Equal(t, reqs[0].key, reqs[2].key, "the repeat reaches the server as the same logical request")
	assert.Equal(t, reqs[0].key, rep.IdempotencyKey, "a caller's key is reported as it is")

	get, _ := http.NewRequestWithContext(retry.NewContext(context.Background(), retry.WithReport(&rep)), "GET", srv.URL, nil)
	resp, err = client.Do(get)
	require.NoError(t, err)
	readAll(t, resp)
	assert.Empty(t, rep.IdempotencyKey, "a GET carries no key")
}

func TestKeyForms(t *testing.T) {
	srv := newScriptServer(t, 200)
	client, _ := newClient(t, retry.WithTokenKeys())
	resp, err := client.Post(srv.URL, "text/plain", strings.NewReader("x"))
	require.NoError(t, err)
	readAll(t, resp)
	assert.Regexp(t, `^[0-9a-f-]{36}$`, srv.requests()[0].key)

	req, _ := http.NewRequest("PATCH", srv.URL, strings.NewReader("x"))
	req.Header.Set("Idempotency-Key", "caller-key")
	resp, err = client.Do(req)
	require.NoError(t, err)
	readAll(t, resp)
	assert.Equal(t, "caller-key", srv.requests()[1].key, "a caller's key is kept")
}

func TestCustomKeyHeader(t *testing.T) {
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("X-Request-Key") + "|" + r.Header.Get("Idempotency-Key"))
	}))
	defer srv.Close()
	client, _ := newClient(t, retry.WithKeyHeader("X-Request-Key"))
	resp, err := client.Post(srv.URL, "text/plain", strings.NewReader("x"))
	require.NoError(t, err)
	readAll(t, resp)
	v := got.Load().(string)
	assert.True(t, strings.HasPrefix(v, `"`) && strings.HasSuffix(v, `"|`), v)
}

func TestLargeBodyWithoutGetBodyIsSentOnce(t *testing.T) {
	srv := newScriptServer(t, 503)
	client, _ := newClient(t, retry.WithClock(newAutoClock()), retry.WithBodyBufferLimit(100))
	var rep retry.Report
	req, _ := http.NewRequestWithContext(retry.NewContext(context.Background(), retry.WithReport(&rep)), "PUT", srv.URL,
		io.MultiReader(bytes.NewReader(make([]byte, 1000))))
	resp, err := client.Do(req)
	require.NoError(t, err)
	readAll(t, resp)
	assert.Len(t, srv.requests(), 1)
	assert.ErrorIs(t, rep.Reason, retry.ErrBodyNotReplayable)
}

// resetServer reads each request, then resets its connection without answering.
func resetServer(t *testing.T) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		io.ReadAll(r.Body)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		conn.(*net.TCPConn).SetLinger(0)
		conn.Close()
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func TestPostResetAfterWriteRetriedOnlyWithKey(t *testing.T) {
	srv, n := resetServer(t)
	client, _ := newClient(t, retry.WithClock(newAutoClock()), retry.WithoutKeys())
	_, err := client.Post(srv.URL, "text/plain", strings.NewReader("charge"))
	require.Error(t, err)
	assert.ErrorIs(t, err, retry.ErrNotIdempotent)
	assert.Equal(t, int32(1), n.Load(), "a POST without a key that reached the server is not repeated")

	n.Store(0)
	keyed, _ := newClient(t, retry.WithClock(newAutoClock()), retry.WithKeysHonoured())
	_, err = keyed.Post(srv.URL, "text/plain", strings.NewReader("charge"))
	require.Error(t, err)
	assert.ErrorIs(t, err, retry.ErrAttemptsExhausted)
	assert.Equal(t, int32(retry.DefaultMaxAttempts), n.Load(), "a keyed POST to a host that honours keys is retried")
}

func TestPostRefusedAtConnectIsRetriedEitherWay(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close() // nothing listens: connections are refused
	for _, opts := range [][]retry.Option{{retry.WithoutKeys()}, nil} {
		attempts := 0
		opts = append(opts, retry.WithClock(newAutoClock()), onAttempt(func(retry.Attempt) { attempts++ }))
		client, _ := newClient(t, opts...)
		_, err := client.Post("http://"+addr, "text/plain", strings.NewReader("x"))
		require.Error(t, err)
		assert.ErrorIs(t, err, retry.ErrAttemptsExhausted)
		assert.Equal(t, retry.DefaultMaxAttempts, attempts)
	}
}

func TestStatusesThatAreNotRetried(t *testing.T) {
	for _, code := range []int{400, 401, 404, 422, 500, 501} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			srv := newScriptServer(t, code, 200)
			client, _ := newClient(t, retry.WithClock(newAutoClock()))
			resp, err := client.Get(srv.URL)
			require.NoError(t, err)
			readAll(t, resp)
			assert.Equal(t, code, resp.StatusCode)
			assert.Len(t, srv.requests(), 1)
		})
	}
}

func TestRetryOn500ByOption(t *testing.T) {
	srv := newScriptServer(t, 500, 200)
	client, _ := newClient(t, retry.WithClock(newAutoClock()), retry.WithRetryStatuses(500, 502, 503, 504, 429))
	resp, err := client.Get(srv.URL)
	require.NoError(t, err)
	readAll(t, resp)
	assert.Equal(t, 200, resp.StatusCode)
}

func TestConflictRetriedOnlyWithKey(t *testing.T) {
	srv := newScriptServer(t, 409, 200)
	client, _ := newClient(t, retry.WithClock(newAutoClock()))
	resp, err := client.Get(srv.URL)
	require.NoError(t, err)
	readAll(t, resp)
	assert.Equal(t, 409, resp.StatusCode, "a GET without a key: 409 is a real conflict")

	srv2 := newScriptServer(t, 409, 201)
	srv2.headers[0] = http.Header{"Retry-After": {"1"}}
	resp, err = client.Post(srv2.URL, "text/plain", strings.NewReader("x"))
	require.NoError(t, err)
	readAll(t, resp)
	assert.Equal(t, 201, resp.StatusCode, "a keyed POST: 409 with Retry-After means still in progress")
	assert.Len(t, srv2.requests(), 2)

	srv3 := newScriptServer(t, 409, 201)
	resp, err = client.Post(srv3.URL, "text/plain", strings.NewReader("x"))
	require.NoError(t, err)
	readAll(t, resp)
	assert.Equal(t, 409, resp.StatusCode, "a keyed POST: 409 without Retry-After is a real conflict")
	assert.Len(t, srv3.requests(), 1)
}

func TestUnkeyedPostIsNotRetriedOn503(t *testing.T) {
	srv := newScriptServer(t, 503, 200)
	client, _ := newClient(t, retry.WithClock(newAutoClock()), retry.WithoutKeys())
	var rep retry.Report
	req, _ := http.NewRequestWithContext(retry.NewContext(context.Background(), retry.WithReport(&rep)), "POST", srv.URL, strings.NewReader("x"))
	resp, err := client.Do(req)
	require.NoError(t, err)
	readAll(t, resp)
	assert.Equal(t, 503, resp.StatusCode)
	assert.Len(t, srv.requests(), 1)
	assert.ErrorIs(t, rep.Reason, retry.ErrNotIdempotent)
}

func TestErrorBodiesAreDrainedSoTheConnectionIsReused(t *testing.T) {
	srv := newScriptServer(t, 503)
	srv.body = bytes.Repeat([]byte("x"), 16<<10)
	client, _ := newClient(t, retry.WithClock(newAutoClock()), retry.WithBudget(nil), noRideThrough)
	for range 5 {
		resp, err := client.Get(srv.URL)
		require.NoError(t, err)
		assert.Len(t, readAll(t, resp), 16<<10)
	}
	assert.Len(t, srv.requests(), 20)
	assert.Equal(t, int32(1), srv.newConns.Load(), "one TCP connection for 20 attempts")
}

func TestTotalTimeoutShorterThanBaseReturnsWithoutWaiting(t *testing.T) {
	clk := newAutoClock()
	srv := newScriptServer(t, 503)
	client, _ := newClient(t, retry.WithClock(clk), retry.WithTotalTimeout(300*time.Millisecond),
		retry.WithBackoff(backoff.Constant(time.Second)))
	resp, err := client.Get(srv.URL)
	require.NoError(t, err)
	readAll(t, resp)
	assert.Equal(t, 503, resp.StatusCode)
	assert.Less(t, clk.Elapsed(), 350*time.Millisecond)
	assert.Empty(t, clk.Waits())
}

func TestAttemptTimeoutDoesNotCutOffTheBody(t *testing.T) {
	clk := newAutoClock()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("first part "))
		http.NewResponseController(w).Flush()
		<-release
		w.Write([]byte("second part"))
	}))
	defer srv.Close()
	client, _ := newClient(t, retry.WithClock(clk), retry.WithAttemptTimeout(time.Second))
	resp, err := client.Get(srv.URL)
	require.NoError(t, err)
	clk.Add(time.Minute) // long past the attempt timeout while the caller reads
	close(release)
	assert.Equal(t, "first part second part", readAll(t, resp))
}

func TestAttemptTimeoutAbandonsAHangingAttempt(t *testing.T) {
	clk := newAutoClock()
	var n atomic.Int32
	hang := make(chan struct{})
	arrived := make(chan struct{})
	defer close(hang)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			close(arrived)
			select {
			case <-hang:
			case <-r.Context().Done():
			}
			return
		}
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	attempts := make(chan retry.Attempt, 4)
	client, _ := newClient(t, retry.WithClock(clk), retry.WithAttemptTimeout(time.Second),
		onAttempt(func(a retry.Attempt) { attempts <- a }))
	done := make(chan *http.Response)
	go func() {
		resp, err := client.Get(srv.URL)
		assert.NoError(t, err)
		done <- resp
	}()
	// Wait until the first request reaches the server, then let the attempt time out.
	<-arrived
	clk.Add(time.Second)
	resp := <-done
	assert.Equal(t, "ok", readAll(t, resp))
	first := <-attempts
	var timeout *retry.AttemptTimeoutError
	assert.ErrorAs(t, first.Err, &timeout)
	assert.ErrorIs(t, first.Err, context.DeadlineExceeded)
	assert.True(t, first.Retrying)
}

func TestCallerRequestIsNotModified(t *testing.T) {
	srv := newScriptServer(t, 503, 200)
	client, _ := newClient(t, retry.WithClock(newAutoClock()))
	req, _ := http.NewRequest("POST", srv.URL, strings.NewReader("x"))
	req.Header.Set("X-Trace", "1")
	before := req.Header.Clone()
	resp, err := client.Do(req)
	require.NoError(t, err)
	readAll(t, resp)
	assert.Equal(t, before, req.Header)
}

func TestTransportErrorKeepsLastError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	client, _ := newClient(t, retry.WithClock(newAutoClock()), retry.WithMaxAttempts(2))
	_, err = client.Get("http://" + addr)
	var re *retry.Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 2, re.Attempts)
	var op *net.OpError
	assert.ErrorAs(t, err, &op)
	assert.True(t, errors.Is(err, retry.ErrAttemptsExhausted))
}
