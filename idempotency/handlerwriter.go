package idempotency

import (
	"bytes"
	"errors"
	"net/http"
	"sync"
)

// errHandlerReturned is returned by the Write method of the ResponseWriter
// that the Middleware gives a handler, once the handler has returned. (A
// ResponseWriter may not be used after the handler returns; a goroutine the
// handler left behind gets this error instead of reaching another request.)
var errHandlerReturned = errors.New("idempotency: ResponseWriter used after the handler returned")

// handlerWriter is the ResponseWriter a handler behind the Middleware gets,
// and its body field the handler's request body. Both are made for one
// request and never pooled. They forward to the request's (pooled) recorder
// until the handler returns, and let go of it then: from that moment a
// Write fails with errHandlerReturned, a Read with
// http.ErrBodyReadAfterClose, Header returns a map that goes nowhere, and
// WriteHeader and Flush do nothing, so a goroutine the handler left behind
// can never touch the response, body or stored replay of another request.
// A mutex orders the handler's calls against that moment.
//
// Flush does nothing while the response is buffered. Hijack is not supported
// (http.ResponseController reports http.ErrNotSupported), and there is
// deliberately no Unwrap, so nothing bypasses the buffer.
type handlerWriter struct {
	mu     sync.Mutex
	rw     *recorder   // nil once the handler returned
	header http.Header // the handler's header map, made on first use
	body   handlerBody
}

var _ http.Flusher = (*handlerWriter)(nil)

// Header implements http.ResponseWriter.
func (w *handlerWriter) Header() http.Header {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.rw == nil {
		return http.Header{}
	}
	if w.header == nil {
		w.header = make(http.Header)
	}
	return w.header
}

// WriteHeader implements http.ResponseWriter.
func (w *handlerWriter) WriteHeader(code int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.rw != nil {
		w.rw.writeHeader(code, w.header)
	}
}

// Write implements http.ResponseWriter.
func (w *handlerWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.rw == nil {
		return 0, errHandlerReturned
	}
	return w.rw.write(p, w.header)
}

// WriteString implements io.StringWriter.
func (w *handlerWriter) WriteString(s string) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.rw == nil {
		return 0, errHandlerReturned
	}
	return w.rw.writeString(s, w.header)
}

// Flush implements http.Flusher: it flushes a streamed rejection and does
// nothing while the response is buffered.
func (w *handlerWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.rw != nil {
		w.rw.flush()
	}
}

// close ends the handler's use of w and its body, when the handler returned.
// After a normal return an unwritten header is written as 200, as net/http
// does, so the header is taken while the handler can no longer change it.
func (w *handlerWriter) close(returned bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if returned && w.rw.status == 0 {
		w.rw.writeHeader(http.StatusOK, w.header)
	}
	w.rw = nil
	w.body.release()
}

// handlerBody is the buffered request body handed to the handler.
type handlerBody struct {
	mu sync.Mutex
	in *bytes.Reader // the recorder's reader; nil once closed
}

// Read implements io.Reader.
func (b *handlerBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.in == nil {
		return 0, http.ErrBodyReadAfterClose
	}
	return b.in.Read(p)
}

// Close implements io.Closer. Later reads fail, as with net/http.
func (b *handlerBody) Close() error {
	b.release()
	return nil
}

func (b *handlerBody) release() {
	b.mu.Lock()
	b.in = nil
	b.mu.Unlock()
}
