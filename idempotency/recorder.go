package idempotency

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"sync"
)

// recorder is the ResponseWriter a handler behind the Middleware writes to.
// It buffers the response so that it can be stored before the client sees it.
//
// The response is classified when its header is written: a 4xx written before
// the execution was marked started is a rejection, anything else an outcome.
// A rejection larger than the limit is streamed to the client from then on;
// an outcome larger than the limit is discarded and replaced by a 500 problem
// (see Middleware). Flush is a no-op while buffering. Hijack is not supported
// (http.ResponseController reports http.ErrNotSupported), and there is
// deliberately no Unwrap, so nothing bypasses the buffer.
type recorder struct {
	client http.ResponseWriter
	exec   *Execution
	limit  int

	// The request being served.
	next     http.Handler
	req      *http.Request
	reqBody  []byte
	in       requestBody
	panicked bool
	panicVal any

	header      http.Header
	status      int // 0 until the header is written
	rejected    bool
	overflow    bool // outcome over the limit: body discarded
	passthrough bool // rejection over the limit: streamed to client
	body        []byte
	enc         []byte // the encoded outcome
}

// recorderPool recycles recorders: a handler may not use its ResponseWriter
// after it returns, and the stores copy what they are given.
var recorderPool = sync.Pool{New: func() any { return &recorder{header: make(http.Header)} }}

func newRecorder(client http.ResponseWriter, limit int) *recorder {
	rw := recorderPool.Get().(*recorder)
	rw.client, rw.limit = client, limit
	return rw
}

// release returns rw to the pool, keeping buffers of reasonable size.
func (rw *recorder) release() {
	clear(rw.header)
	*rw = recorder{header: rw.header, body: reuse(rw.body), enc: reuse(rw.enc), reqBody: reuse(rw.reqBody)}
	recorderPool.Put(rw)
}

// reuse returns b emptied, or nil when it is too large to keep.
func reuse(b []byte) []byte {
	if cap(b) > maxPooled {
		return nil
	}
	return b[:0]
}

// requestBody is the buffered request body handed to the handler.
type requestBody struct{ bytes.Reader }

// Close implements io.Closer.
func (*requestBody) Close() error { return nil }

// Header implements http.ResponseWriter.
func (rw *recorder) Header() http.Header { return rw.header }

// WriteHeader implements http.ResponseWriter. Informational (1xx) headers
// are not stored or forwarded.
func (rw *recorder) WriteHeader(code int) {
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	if rw.status != 0 || code < 200 {
		return
	}
	rw.status = code
	rw.rejected = code >= 400 && code < 500 && !rw.exec.Started()
}

// Write implements http.ResponseWriter.
func (rw *recorder) Write(p []byte) (int, error) {
	if rw.status == 0 {
		rw.WriteHeader(http.StatusOK)
	}
	switch {
	case !bodyAllowed(rw.status):
		return 0, http.ErrBodyNotAllowed
	case rw.passthrough:
		return rw.client.Write(p)
	case rw.overflow:
		return len(p), nil
	case len(rw.body)+len(p) <= rw.limit:
		rw.body = append(rw.body, p...)
		return len(p), nil
	case rw.rejected:
		rw.passthrough = true
		rw.writeHeaderTo(rw.client, false)
		if _, err := rw.client.Write(rw.body); err != nil {
			return 0, err
		}
		rw.body = nil
		return rw.client.Write(p)
	default:
		rw.overflow = true
		rw.body = nil
		return len(p), nil
	}
}

// WriteString implements io.StringWriter.
func (rw *recorder) WriteString(s string) (int, error) {
	if rw.status != 0 && !rw.passthrough && !rw.overflow && len(rw.body)+len(s) <= rw.limit {
		rw.body = append(rw.body, s...)
		return len(s), nil
	}
	return rw.Write([]byte(s))
}

// Flush implements http.Flusher: it flushes a streamed rejection and does
// nothing while the response is buffered.
func (rw *recorder) Flush() {
	if rw.passthrough {
		_ = http.NewResponseController(rw.client).Flush()
	}
}

// finish completes the response after the handler returned normally: an
// unwritten header is a 200, and Content-Type (sniffed as net/http would) and
// Content-Length are filled in, so that the first response and every replay
// carry the same header.
func (rw *recorder) finish() {
	if rw.status == 0 {
		rw.WriteHeader(http.StatusOK)
	}
	if rw.passthrough || rw.overflow || !bodyAllowed(rw.status) {
		return
	}
	if _, ok := rw.header["Content-Type"]; !ok && len(rw.body) > 0 && rw.header.Get("Content-Encoding") == "" {
		rw.header.Set("Content-Type", http.DetectContentType(rw.body))
	}
	if _, ok := rw.header["Content-Length"]; !ok && rw.header.Get("Transfer-Encoding") == "" {
		rw.header.Set("Content-Length", strconv.Itoa(len(rw.body)))
	}
}

// writeTo sends the buffered response to w (unless it was streamed already).
func (rw *recorder) writeTo(w http.ResponseWriter) {
	if rw.passthrough {
		return
	}
	rw.writeHeaderTo(w, false)
	if len(rw.body) > 0 {
		_, _ = w.Write(rw.body)
	}
}

func (rw *recorder) writeHeaderTo(w http.ResponseWriter, replayed bool) {
	h := w.Header()
	for k, v := range rw.header {
		h[k] = v
	}
	if replayed {
		h.Set(ReplayedHeader, "true")
	}
	w.WriteHeader(max(rw.status, http.StatusOK))
}

// bodyAllowed reports whether a response with status may have a body.
func bodyAllowed(status int) bool {
	return status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}
