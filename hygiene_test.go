package retry_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry"
)

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
