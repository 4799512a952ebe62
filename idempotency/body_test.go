package idempotency_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/idempotency"
)

// trickle is a request body that arrives in chunks of size and then fails,
// as a client that stalls and goes away; it records the most room a Read
// was offered beyond what had arrived.
type trickle struct {
	left, size int
	received   int
	worst      int // the largest len(p)-received seen: room beyond twice what arrived
	first      int // len(p) of the first Read
}

func (b *trickle) Read(p []byte) (int, error) {
	if b.first == 0 {
		b.first = len(p)
	}
	b.worst = max(b.worst, len(p)-b.received)
	if b.left == 0 {
		return 0, io.ErrUnexpectedEOF
	}
	n := min(len(p), b.size, b.left)
	b.left -= n
	b.received += n
	return n, nil
}

func (*trickle) Close() error { return nil }

// maxPooledBuffer is the largest buffer the Middleware keeps between
// requests (a pooled buffer costs nothing new).
const maxPooledBuffer = 64 << 10

// The request buffer grows with the bytes that arrive, not with the declared
// Content-Length: a client that declares 1 MiB and sends 84 bytes holds
// about 84 bytes, not 1 MiB.
func TestRequestBufferGrowsWithBytesReceived(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var c counting
	h := e.handle(&c)
	for _, sent := range []int{84, 100 << 10} {
		body := &trickle{left: sent, size: 1 << 10}
		r := httptest.NewRequest(http.MethodPost, "/orders", nil)
		r.Body, r.ContentLength = body, 1<<20
		r.Header.Set("Idempotency-Key", "k")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		problem(t, w, http.StatusBadRequest) // the body never completed
		require.Equal(t, sent, body.received)
		assert.LessOrEqual(t, body.first, maxPooledBuffer+1, "first read offered room for the declared length")
		// Capacity stays within twice what arrived (plus a small start, or
		// a buffer kept from an earlier request).
		assert.LessOrEqual(t, body.worst, maxPooledBuffer+1, "sent %d: buffer grew ahead of the bytes received", sent)
	}
	assert.Zero(t, c.runs.Load())
}

// A body longer than its declared length is read to the limit all the same.
func TestBodyLongerThanDeclared(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var c counting
	h := e.handle(&c, idempotency.WithMaxRequestBody(8<<10))
	for _, n := range []int{10, 8 << 10} {
		r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(strings.Repeat("x", n)))
		r.ContentLength = 3
		r.Header.Set("Idempotency-Key", fmt.Sprint("k", n))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		require.Equal(t, http.StatusCreated, w.Code)
		require.Equal(t, "made:"+strings.Repeat("x", n), w.Body.String())
	}
	r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(strings.Repeat("x", 8<<10+1)))
	r.ContentLength = 3
	r.Header.Set("Idempotency-Key", "over")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	problem(t, w, http.StatusRequestEntityTooLarge)
}
