package retry_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry"
)

func TestHiddenReplaysByNetHTTPAreCountedAndCharged(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 2 {
			// The second request arrives on the reused connection: close it
			// without an answer, so net/http replays the GET by itself.
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	budget := retry.DefaultBudget()
	client, _ := newClient(t, retry.WithBudget(budget), retry.WithClock(newAutoClock()))

	resp, err := client.Get(srv.URL)
	require.NoError(t, err)
	readAll(t, resp)

	var rep retry.Report
	req, _ := http.NewRequestWithContext(retry.WithReport(context.Background(), &rep), "GET", srv.URL, nil)
	resp, err = client.Do(req)
	require.NoError(t, err)
	assert.Equal(t, "ok", readAll(t, resp))
	require.Equal(t, int32(3), n.Load(), "net/http replayed the request on a new connection")
	assert.Equal(t, 2, rep.Attempts, "the hidden replay is counted")
	assert.Equal(t, uint64(1), budget.Stats().RetriesAllowed, "and charged to the budget")
}

func TestLoggerIsSilentByDefaultAndReportsRetries(t *testing.T) {
	srv := newScriptServer(t, 503, 503)
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	client, _ := newClient(t, retry.WithLogger(logger), retry.WithClock(newAutoClock()), retry.WithMaxAttempts(2))
	resp, err := client.Get(srv.URL)
	require.NoError(t, err)
	readAll(t, resp)
	out := buf.String()
	assert.Contains(t, out, `msg=retrying attempt=1`)
	assert.Contains(t, out, `status=503`)
	assert.Contains(t, out, `msg="retry stopped" attempts=2 reason="retry: attempts exhausted"`)
}

func TestNoConnectionIsLeft(t *testing.T) {
	srv := newScriptServer(t, 503, 200, 502, 200)
	tr := retry.NewTransport(nil, retry.WithClock(newAutoClock()))
	client := &http.Client{Transport: tr}
	for range 2 {
		resp, err := client.Get(srv.URL)
		require.NoError(t, err)
		readAll(t, resp)
	}
	require.Equal(t, int32(1), srv.newConns.Load(), "four attempts, one connection")
	require.Equal(t, int32(1), srv.openConn.Load())
	tr.CloseIdleConnections()
	<-srv.closedCh // the server sees the connection go
	assert.Equal(t, int32(0), srv.openConn.Load(), "no connection is left open")
}
