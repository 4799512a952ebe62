package retry_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry"
)

// A body without GetBody that the base did not read to its end cannot be
// sent again: the Transport hands back what it has, as it is.
func TestBodyThatCannotBeReplayedHandsBackTheLastResponseIntact(t *testing.T) {
	var calls atomic.Int32
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		calls.Add(1)
		half := make([]byte, 10)
		io.ReadFull(r.Body, half) // answers before reading the whole body
		r.Body.Close()
		return &http.Response{StatusCode: 503, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("busy")), Request: r}, nil
	})
	tr := retry.NewTransport(base, retry.WithClock(newAutoClock()), retry.WithKeysHonoured())
	var rep retry.Report
	body := io.MultiReader(strings.NewReader(strings.Repeat("x", 100))) // no GetBody
	req, _ := http.NewRequestWithContext(retry.NewContext(context.Background(), retry.WithReport(&rep)), "POST", "http://mem.test/", body)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	assert.Equal(t, 503, resp.StatusCode)
	assert.Equal(t, "busy", readAll(t, resp), "the body of the last response is intact")
	assert.Equal(t, int32(1), calls.Load())
	assert.Equal(t, 1, rep.Attempts, "one request was sent")
	assert.ErrorIs(t, rep.Reason, retry.ErrBodyNotReplayable)
}

func TestBodyThatCannotBeReplayedKeepsTheRefusedConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close() // nothing listens: connections are refused
	client, _ := newClient(t, retry.WithClock(newAutoClock()))
	body := io.MultiReader(strings.NewReader("charge")) // no GetBody
	_, err = client.Post("http://"+addr, "text/plain", body)
	var re *retry.Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 1, re.Attempts, "one request was sent, not two")
	assert.ErrorIs(t, err, retry.ErrBodyNotReplayable)
	assert.ErrorIs(t, err, syscall.ECONNREFUSED, "the refused connection is not lost")
}

func TestBodyThatCannotBeReplayedWhenGetBodyFails(t *testing.T) {
	srv := newScriptServer(t, 503, 200)
	client, _ := newClient(t, retry.WithClock(newAutoClock()))
	var rep retry.Report
	req, _ := http.NewRequestWithContext(retry.NewContext(context.Background(), retry.WithReport(&rep)), "PUT", srv.URL, strings.NewReader("x"))
	req.GetBody = func() (io.ReadCloser, error) { return nil, errors.New("gone") }
	resp, err := client.Do(req)
	require.NoError(t, err)
	assert.Equal(t, 503, resp.StatusCode)
	readAll(t, resp)
	assert.Len(t, srv.requests(), 1)
	assert.Equal(t, 1, rep.Attempts)
	assert.ErrorIs(t, rep.Reason, retry.ErrBodyNotReplayable)
}

// stalledBody is a response body whose bytes never come, until it is closed.
type stalledBody struct {
	closed chan struct{}
	once   atomic.Bool
}

func newStalledBody() *stalledBody { return &stalledBody{closed: make(chan struct{})} }

func (b *stalledBody) Read([]byte) (int, error) {
	<-b.closed
	return 0, errors.New("read on closed body")
}

func (b *stalledBody) Close() error {
	if !b.once.Swap(true) {
		close(b.closed)
	}
	return nil
}

// A retried response whose body stalls must not hold RoundTrip: the drain
// is bounded, and the body is closed where it stands.
func TestStalledErrorBodyDoesNotHoldTheRetry(t *testing.T) {
	t.Run("custom base", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			stalled := newStalledBody()
			var calls atomic.Int32
			base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				if calls.Add(1) == 1 {
					return &http.Response{StatusCode: 503, Header: http.Header{}, Body: stalled, Request: r}, nil
				}
				return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
			})
			tr := retry.NewTransport(base, retry.WithAttemptTimeout(150*time.Millisecond))
			start := time.Now()
			resp, err := (&http.Client{Transport: tr}).Get("http://mem.test/")
			require.NoError(t, err)
			assert.Equal(t, "ok", readAll(t, resp))
			assert.True(t, stalled.once.Load(), "the stalled body was closed")
			assert.LessOrEqual(t, time.Since(start), 2*time.Second, "bounded by the drain's own limit, not by the server")
		})
	})
	t.Run("net/http", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var calls atomic.Int32
			base, _ := newPipeServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if calls.Add(1) == 1 {
					w.WriteHeader(503)
					w.Write([]byte("partial"))
					http.NewResponseController(w).Flush()
					<-r.Context().Done() // the rest never comes
					return
				}
				w.Write([]byte("ok"))
			}))
			tr := retry.NewTransport(base, retry.WithAttemptTimeout(150*time.Millisecond))
			start := time.Now()
			resp, err := (&http.Client{Transport: tr}).Get("http://pipe.test/")
			require.NoError(t, err)
			assert.Equal(t, "ok", readAll(t, resp))
			assert.LessOrEqual(t, time.Since(start), 2*time.Second)
			tr.CloseIdleConnections()
		})
	})
}

// An error body that ends in time is drained, and its connection reused.
func TestErrorBodyDrainedOverTheWaitReusesTheConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		base, pn := newPipeServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if calls.Add(1) <= 2 {
				w.WriteHeader(503)
				w.Write(bytes.Repeat([]byte("x"), 16<<10))
				return
			}
			w.Write([]byte("ok"))
		}))
		tr := retry.NewTransport(base)
		resp, err := (&http.Client{Transport: tr}).Get("http://pipe.test/")
		require.NoError(t, err)
		assert.Equal(t, "ok", readAll(t, resp))
		assert.Equal(t, 1, pn.Dials(), "three attempts, one connection")
		tr.CloseIdleConnections()
	})
}
