package bench

import (
	"context"
	"io"
	"net/http"
	"time"
)

// NewBounded returns lib's client with policy p and every attempt bounded
// by d: through the library's own option where it has one, else
// through a base transport that bounds each round trip (what an
// http.Client.Timeout does per attempt for a library that retries around
// an http.Client). A client that never retries keeps only the request's
// own deadline, as its users would.
func (l Library) NewBounded(p Policy, base http.RoundTripper, d time.Duration) Client {
	switch {
	case l.Bounded != nil:
		return l.Bounded(p, base, d)
	case !l.Retries:
		return l.New(p, base)
	}
	return l.New(p, attemptBound{base: base, timeout: d})
}

// attemptBound is a RoundTripper that gives each round trip at most timeout,
// until its response body is closed.
type attemptBound struct {
	base    http.RoundTripper
	timeout time.Duration
}

// RoundTrip implements http.RoundTripper.
func (a attemptBound) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(req.Context(), a.timeout)
	resp, err := a.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelOnClose cancels its attempt's context once the body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

// Close implements io.Closer.
func (c cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}
