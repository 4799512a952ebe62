package retry

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
)

// bodySource gives every attempt of one request its body.
type bodySource struct {
	orig    io.ReadCloser // the caller's body; nil or http.NoBody for none
	none    bool          // the request has no body
	getBody func() (io.ReadCloser, error)
	rec     *recordingBody
	// once: the body can be sent a single time (too large to buffer).
	once bool
	// next is the body readied for the next attempt, and its GetBody.
	next    io.ReadCloser
	nextGet func() (io.ReadCloser, error)
}

// newBodySource decides how req's body will be replayed.
func newBodySource(req *http.Request, limit int64) bodySource {
	switch {
	case req.Body == nil || req.Body == http.NoBody:
		return bodySource{orig: req.Body, none: true}
	case req.GetBody != nil:
		return bodySource{orig: req.Body, getBody: req.GetBody}
	case limit <= 0 || req.ContentLength > limit:
		return bodySource{orig: req.Body, once: true}
	default:
		return bodySource{orig: req.Body, rec: newRecordingBody(req.Body, req.ContentLength, limit)}
	}
}

// forAttempt returns the body of attempt n and the GetBody to offer the
// base transport for its own replays: the caller's (recorded if need be)
// for the first, the one readied by ready for a later one.
func (s *bodySource) forAttempt(n int) (io.ReadCloser, func() (io.ReadCloser, error)) {
	switch {
	case s.none:
		return s.orig, nil
	case n == 1 && s.rec != nil:
		return s.rec, nil
	case n == 1:
		return s.orig, s.getBody
	}
	b, get := s.next, s.nextGet
	s.next, s.nextGet = nil, nil
	return b, get
}

// atOnce reports whether the body can be had again at any moment, as a
// hedge needs it: there is none, or it has GetBody.
func (s *bodySource) atOnce() bool {
	return s.none || s.getBody != nil
}

// ready gets the body of the next attempt now, so that a retry is decided
// only when its body can be had: from GetBody, or from the recording of the
// first attempt's body once the base transport is done with it (waiting at
// most bound for that). It reports false when the body cannot be had.
func (s *bodySource) ready(ctx context.Context, clk clock.Clock, bound time.Duration) bool {
	switch {
	case s.none, s.next != nil:
		return true
	case s.getBody != nil:
		b, err := s.getBody()
		if err != nil {
			return false
		}
		s.next, s.nextGet = b, s.getBody
		return true
	case s.rec != nil:
		buf, ok := s.rec.replay(ctx, clk, bound)
		if !ok {
			return false
		}
		get := func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf)), nil }
		s.next, _ = get()
		s.nextGet = get
		return true
	}
	return false
}

// release closes a body readied for an attempt that was never made.
func (s *bodySource) release() {
	if s.next != nil {
		s.next.Close()
		s.next, s.nextGet = nil, nil
	}
}

// closeUnsent closes the caller's body when no attempt was ever sent with
// it (RoundTrip must always close the request body).
func (s *bodySource) closeUnsent() {
	if !s.none {
		s.orig.Close()
	}
}

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

// recordingChunk is the most a recording reserves before bytes arrive: its
// buffer grows with what is read, never with what the request declares.
const recordingChunk = 4 << 10

func newRecordingBody(body io.ReadCloser, size, limit int64) *recordingBody {
	rb := &recordingBody{body: body, limit: limit, done: make(chan struct{})}
	if size > 0 && size <= limit {
		rb.buf = make([]byte, 0, min(size, recordingChunk))
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

// replay waits until the base transport is finished with the body (at most
// bound, and not after ctx ends) and returns the whole body, if it was read
// to its end within the limit.
func (rb *recordingBody) replay(ctx context.Context, clk clock.Clock, bound time.Duration) ([]byte, bool) {
	if !waitClosed(rb.done, ctx, clk, bound) {
		return nil, false
	}
	rb.mu.Lock()
	defer rb.mu.Unlock()
	return rb.buf, rb.eof && !rb.over
}

// waitClosed waits until done is closed, for at most bound on clk and not
// after ctx ends, and reports whether it was.
func waitClosed(done <-chan struct{}, ctx context.Context, clk clock.Clock, bound time.Duration) bool {
	select {
	case <-done:
		return true
	default:
	}
	if bound <= 0 {
		return false
	}
	expired := make(chan struct{})
	t := afterFunc(clk, bound, func() { close(expired) })
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-ctx.Done():
	case <-expired:
	}
	return false
}
