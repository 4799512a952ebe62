package retry

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"
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
