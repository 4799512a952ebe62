package retry

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
)

// ErrBodyNotReplayable: the request's body cannot be sent again (it has no
// GetBody and was larger than the buffer limit, or was not read to its end),
// so the request is not retried.
var ErrBodyNotReplayable = errors.New("retry: request body cannot be replayed")

// recordingBody passes the caller's body through to the first attempt and
// keeps a copy, up to a limit, so later attempts can replay it. The copy is
// usable only if the whole body was read. The base transport may read and
// close it from another goroutine, hence the lock.
type recordingBody struct {
	mu     sync.Mutex
	body   io.ReadCloser
	buf    []byte
	limit  int64
	over   bool
	eof    bool
	closed bool
	// done is closed when the base transport is finished with the body:
	// it read it to the end, or closed it.
	done chan struct{}
}

func newRecordingBody(body io.ReadCloser, size, limit int64) *recordingBody {
	rb := &recordingBody{body: body, limit: limit, done: make(chan struct{})}
	if size > 0 && size <= limit {
		rb.buf = make([]byte, 0, size)
	}
	return rb
}

// Read reads from the caller's body and records what it read.
func (rb *recordingBody) Read(p []byte) (int, error) {
	n, err := rb.body.Read(p)
	rb.mu.Lock()
	if !rb.over {
		if int64(len(rb.buf)+n) > rb.limit {
			rb.over, rb.buf = true, nil
		} else {
			rb.buf = append(rb.buf, p[:n]...)
		}
	}
	if err == io.EOF && !rb.eof {
		rb.eof = true
		rb.finish()
	}
	rb.mu.Unlock()
	return n, err
}

// finish closes done once; rb.mu is held.
func (rb *recordingBody) finish() {
	select {
	case <-rb.done:
	default:
		close(rb.done)
	}
}

// Close closes the caller's body, once.
func (rb *recordingBody) Close() error {
	rb.mu.Lock()
	if rb.closed {
		rb.mu.Unlock()
		return nil
	}
	rb.closed = true
	rb.finish()
	rb.mu.Unlock()
	return rb.body.Close()
}

// replay waits until the base transport is finished with the body (or ctx
// ends) and returns the whole body, if it was read to its end within the limit.
func (rb *recordingBody) replay(ctx context.Context) ([]byte, bool) {
	select {
	case <-rb.done:
	case <-ctx.Done():
		return nil, false
	}
	rb.mu.Lock()
	defer rb.mu.Unlock()
	return rb.buf, rb.eof && !rb.over
}

// overLimit reports whether the body already outgrew the buffer.
func (rb *recordingBody) overLimit() bool {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	return rb.over
}

// bodySource gives every attempt of one request its body.
type bodySource struct {
	orig    io.ReadCloser
	getBody func() (io.ReadCloser, error)
	rec     *recordingBody
	// once: the body can be sent a single time (too large to buffer).
	once bool
}

// newBodySource decides how req's body will be replayed.
func newBodySource(req *http.Request, limit int64) bodySource {
	switch {
	case req.Body == nil || req.Body == http.NoBody:
		return bodySource{}
	case req.GetBody != nil:
		return bodySource{orig: req.Body, getBody: req.GetBody}
	case limit <= 0 || req.ContentLength > limit:
		return bodySource{orig: req.Body, once: true}
	default:
		rec := newRecordingBody(req.Body, req.ContentLength, limit)
		return bodySource{orig: req.Body, rec: rec}
	}
}

// first returns the body of the first attempt and the GetBody to offer the
// base transport for its own replays.
func (s *bodySource) first() (io.ReadCloser, func() (io.ReadCloser, error)) {
	if s.rec != nil {
		return s.rec, nil
	}
	return s.orig, s.getBody
}

// replayable reports whether a later attempt may have the body again. A
// recorded body is known for sure only when the next attempt asks for it.
func (s *bodySource) replayable() bool {
	switch {
	case s.orig == nil, s.getBody != nil:
		return true
	case s.rec != nil:
		return !s.rec.overLimit()
	}
	return false
}

// again returns the body of a later attempt and its GetBody.
func (s *bodySource) again(ctx context.Context) (io.ReadCloser, func() (io.ReadCloser, error), error) {
	switch {
	case s.orig == nil:
		return s.orig, nil, nil
	case s.getBody != nil:
		b, err := s.getBody()
		return b, s.getBody, err
	case s.rec != nil:
		if buf, ok := s.rec.replay(ctx); ok {
			get := func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf)), nil }
			b, _ := get()
			return b, get, nil
		}
	}
	return nil, nil, ErrBodyNotReplayable
}

// closeUnsent closes the caller's body when no attempt was ever sent with
// it (RoundTrip must always close the request body).
func (s *bodySource) closeUnsent() {
	if s.orig != nil {
		s.orig.Close()
	}
}

// drain reads up to limit bytes of a response body that will not be used
// and closes it, so its connection goes back to the pool.
func drain(resp *http.Response, limit int64) {
	if resp == nil || resp.Body == nil {
		return
	}
	if limit > 0 {
		io.CopyN(io.Discard, resp.Body, limit)
	}
	resp.Body.Close()
}

// cancelWhenClosed makes closing resp's body call cancel and then: the
// contexts of the attempt that brought it end when the caller is done with
// it. A switching-protocols body (a connection the caller now owns) is left
// as it is.
func cancelWhenClosed(resp *http.Response, cancel, then context.CancelFunc) {
	if resp.Body == nil || resp.StatusCode == http.StatusSwitchingProtocols {
		return
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: [2]context.CancelFunc{cancel, then}}
}

// cancelOnClose ends an attempt's contexts when the caller closes the
// response body, not when RoundTrip returns, so timeouts never cut off a
// body the caller is still reading.
type cancelOnClose struct {
	io.ReadCloser
	cancel [2]context.CancelFunc
}

// Close closes the body, then cancels the contexts.
func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	for _, c := range b.cancel {
		c()
	}
	return err
}
