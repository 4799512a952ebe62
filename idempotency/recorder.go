package idempotency

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"sync"
)

// recorder buffers the response of a handler behind the Middleware, so that
// it can be stored before the client sees it. Recorders are pooled; the
// handler never holds one (see handlerWriter).
//
// The response is classified when its header is written: a 4xx written before
// the execution was marked started is a rejection, anything else an outcome.
// The header is a snapshot taken then, as net/http takes it: changes the
// handler makes to its header map afterwards are neither sent nor stored.
// What is stored must fit the limit: the body its own, the rest (status,
// header, framing) the header's room. A rejection larger than the limit is
// streamed to the client from then on; an outcome larger than the limit is
// discarded and replaced by a 500 problem (see Middleware).
type recorder struct {
	client http.ResponseWriter
	exec   *Execution
	limit  responseLimit

	// The request being served.
	next     http.Handler
	req      *http.Request
	reqBody  []byte
	in       bytes.Reader
	panicked bool
	panicVal any

	// header is the snapshot of the handler's header taken when the header
	// was written. The map is kept across requests; its values belong to the
	// request, since they are handed to the client's ResponseWriter.
	header      http.Header
	headSize    int // encoded size of the status and header
	status      int // 0 until the header is written
	rejected    bool
	overflow    bool // outcome over the limit: body discarded
	passthrough bool // rejection over the limit: streamed to client
	body        []byte
	enc         []byte // the encoded outcome
}

// recorderPool recycles recorders. What a recorder holds is never reachable
// by user code once the handler returned: the handler's ResponseWriter and
// request body are per-request objects that let go of the recorder then, the
// handler's header map is its own, and the stores copy what they are given.
var recorderPool = sync.Pool{New: func() any { return &recorder{header: make(http.Header)} }}

// responseLimit bounds what is stored of a response: body, the size of its
// body; head, the size of the rest (version, status, header, the body's
// length) as encodeResponse writes it.
type responseLimit struct{ body, head int }

// fits reports whether a response whose encoded head (encodedHeadSize) is
// head bytes, with a body of n bytes, is within the limit.
func (l responseLimit) fits(head, n int) bool {
	return n <= l.body && head+uvarintLen(n) <= l.head
}

func newRecorder(client http.ResponseWriter, limit responseLimit) *recorder {
	rw := recorderPool.Get().(*recorder)
	rw.client, rw.limit = client, limit
	return rw
}

// release returns rw to the pool, keeping buffers of reasonable size.
func (rw *recorder) release() {
	clear(rw.header)
	rw.in.Reset(nil)
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

// writeHeader records the status and takes the snapshot of h, the handler's
// header. Informational (1xx) headers are not stored or forwarded.
func (rw *recorder) writeHeader(code int, h http.Header) {
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	if rw.status != 0 || code < 200 {
		return
	}
	rw.status = code
	rw.rejected = code >= 400 && code < 500 && !rw.exec.Started()
	// One backing array for all the values, as http.Header.Clone makes, so
	// that the handler's later changes, even to a value in place, never
	// reach the snapshot.
	n := 0
	for _, v := range h {
		n += len(v)
	}
	values := make([]string, n)
	for k, v := range h {
		n := copy(values, v)
		rw.header[k] = values[:n:n]
		values = values[n:]
	}
	rw.headSize = encodedHeadSize(code, rw.header)
}

// fits reports whether a body of n bytes fits the limit with the header.
func (rw *recorder) fits(n int) bool {
	return rw.limit.fits(rw.headSize, n)
}

// write appends p to the response body.
func (rw *recorder) write(p []byte, h http.Header) (int, error) {
	if rw.status == 0 {
		rw.writeHeader(http.StatusOK, h)
	}
	switch {
	case !bodyAllowed(rw.status):
		return 0, http.ErrBodyNotAllowed
	case rw.passthrough:
		return rw.client.Write(p)
	case rw.overflow:
		return len(p), nil
	case rw.fits(len(rw.body) + len(p)):
		rw.body = append(rw.body, p...)
		return len(p), nil
	case rw.rejected:
		rw.passthrough = true
		rw.writeHeaderTo(rw.client, false)
		if _, err := rw.client.Write(rw.body); err != nil {
			return 0, err
		}
		rw.body = rw.body[:0]
		return rw.client.Write(p)
	default:
		rw.overflow = true
		rw.body = rw.body[:0]
		return len(p), nil
	}
}

// writeString appends s to the response body.
func (rw *recorder) writeString(s string, h http.Header) (int, error) {
	if rw.status != 0 && !rw.passthrough && !rw.overflow && bodyAllowed(rw.status) && rw.fits(len(rw.body)+len(s)) {
		rw.body = append(rw.body, s...)
		return len(s), nil
	}
	return rw.write([]byte(s), h)
}

// flush flushes a streamed rejection; a buffered response is not flushed.
func (rw *recorder) flush() {
	if rw.passthrough {
		_ = http.NewResponseController(rw.client).Flush()
	}
}

// finish completes the response after the handler returned normally (its
// header written, see handlerWriter.close): Content-Type (sniffed as
// net/http would) and Content-Length are filled in, so that the first
// response and every replay carry the same header; an outcome that does not
// fit the limit with that header is marked as overflowing.
func (rw *recorder) finish() {
	if rw.passthrough || rw.overflow {
		return
	}
	if bodyAllowed(rw.status) {
		if _, ok := rw.header["Content-Type"]; !ok && len(rw.body) > 0 && rw.header.Get("Content-Encoding") == "" {
			rw.header.Set("Content-Type", http.DetectContentType(rw.body))
		}
		if _, ok := rw.header["Content-Length"]; !ok && rw.header.Get("Transfer-Encoding") == "" {
			rw.header.Set("Content-Length", strconv.Itoa(len(rw.body)))
		}
	}
	if !rw.rejected && !rw.limit.fits(encodedHeadSize(rw.status, rw.header), len(rw.body)) {
		rw.overflow = true
		rw.body = rw.body[:0]
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
		h.Set(replayedHeader, "true")
	}
	w.WriteHeader(max(rw.status, http.StatusOK))
}

// bodyAllowed reports whether a response with status may have a body.
func bodyAllowed(status int) bool {
	return status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}
