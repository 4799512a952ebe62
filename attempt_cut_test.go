package retry_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry"
)

// Over net/http's own Transport on loopback, with the real clock (the
// attempt's context and its pooled timer, not a test clock's), an attempt
// whose headers never come is cut at its timeout, and the server sees the
// request go. The timeout is short so that the test waits little; the cut
// is what it checks, not when.
func TestAHungAttemptIsCutOverNetHTTP(t *testing.T) {
	gone := make(chan struct{}, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fast" {
			return
		}
		<-r.Context().Done() // never answers
		gone <- struct{}{}
	}))
	defer srv.Close()
	tr := retry.NewTransport(srv.Client().Transport, retry.WithAttemptTimeout(20*time.Millisecond), retry.WithMaxAttempts(1))
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	for range 2 {
		resp, err := client.Get(srv.URL + "/fast") // its timer, stopped in time, goes back to the pool
		require.NoError(t, err)
		resp.Body.Close()
		_, err = client.Get(srv.URL + "/hung")
		var timeout *retry.AttemptTimeoutError
		require.ErrorAs(t, err, &timeout)
		assert.Equal(t, 20*time.Millisecond, timeout.Timeout)
		<-gone
	}
}
