package retry

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
)

// handBack returns the last response with its body intact. Closing the body
// ends the contexts the round trip made for it (the attempt's and the total
// deadline's), so timeouts never cut off a body the caller is still reading.
func (rt *roundTrip) handBack() *http.Response {
	resp := rt.resp
	// An attempt context whose parent can never end needs no cancel to be
	// released once its timer is stopped.
	attempt := rt.bound.owns && rt.ctx.Done() != nil
	if !attempt && !rt.ownsLoop {
		return resp
	}
	cancels := [2]context.CancelFunc{rt.bound.cancel, rt.cancelLoop}
	if resp.Body == nil {
		cancels[0]()
		cancels[1]()
		return resp
	}
	var wrap *cancelOnClose
	if rt.out != nil {
		wrap = &rt.out.wrap // in the attempt's own allocation
	} else {
		wrap = new(cancelOnClose)
	}
	*wrap = cancelOnClose{ReadCloser: resp.Body, cancel: cancels}
	resp.Body = wrap
	if rw, ok := wrap.ReadCloser.(io.ReadWriteCloser); ok && resp.StatusCode == http.StatusSwitchingProtocols {
		// The body of a 101 is the connection, which the caller writes to.
		resp.Body = &cancelOnCloseRW{cancelOnClose: wrap, w: rw}
	}
	return resp
}

// cancelOnClose ends an attempt's contexts when the caller closes the
// response body, not when RoundTrip returns.
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

// cancelOnCloseRW is cancelOnClose for a switched protocol's connection,
// which stays writable.
type cancelOnCloseRW struct {
	*cancelOnClose
	w io.Writer
}

// Write writes to the connection.
func (b *cancelOnCloseRW) Write(p []byte) (int, error) { return b.w.Write(p) }

// drain reads up to drainLimit bytes of a response body that will not be used
// and closes it, so its connection goes back to the pool. A body that has
// not ended within bound is closed where it stands (its connection is not
// reused), so a stalled body never holds the caller.
func drain(resp *http.Response, clk clock.Clock, bound time.Duration) {
	if resp == nil || resp.Body == nil {
		return
	}
	body := &closeOnce{ReadCloser: resp.Body}
	if bound > 0 {
		t := afterFunc(clk, bound, func() { body.Close() })
		io.CopyN(io.Discard, body, drainLimit)
		t.Stop()
	}
	body.Close()
}

// keep drains a response that is about to be retried, as drain does, and
// returns a copy of it whose body is the bytes read, for handing back
// later: nil when the body did not end within bound and drainLimit (it is
// then closed where it stands, and cannot be had whole).
func keep(resp *http.Response, clk clock.Clock, bound time.Duration) *http.Response {
	if resp.ContentLength > drainLimit || bound <= 0 {
		drain(resp, clk, bound)
		return nil
	}
	var b []byte
	if resp.Body != nil {
		body := &closeOnce{ReadCloser: resp.Body}
		t := afterFunc(clk, bound, func() { body.Close() })
		read, err := io.ReadAll(io.LimitReader(body, drainLimit+1))
		t.Stop()
		body.Close()
		if err != nil || len(read) > drainLimit {
			return nil
		}
		b = read
	}
	kept := *resp
	kept.Body = io.NopCloser(bytes.NewReader(b))
	return &kept
}

// closeOnce closes its body once, whoever asks first.
type closeOnce struct {
	io.ReadCloser
	closed atomic.Bool
}

// Close closes the body the first time it is called.
func (b *closeOnce) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	return b.ReadCloser.Close()
}
