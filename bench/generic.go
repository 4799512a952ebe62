package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// attemptRequest returns the request for attempt n (from 1): req itself for
// the first, then a shallow copy with a fresh body from GetBody, as a careful
// caller of a generic retry library would write it.
func attemptRequest(req *http.Request, n int) (*http.Request, error) {
	if n == 1 || req.Body == nil || req.Body == http.NoBody {
		return req, nil
	}
	if req.GetBody == nil {
		return nil, errors.New("bench: request body cannot be replayed")
	}
	b, err := req.GetBody()
	if err != nil {
		return nil, err
	}
	r := new(http.Request)
	*r = *req
	r.Body = b
	return r, nil
}

// StatusError is the error the generic wrappers return for a response they
// retry (429 or 5xx): the response itself is closed.
type StatusError struct{ Code int }

func (e *StatusError) Error() string { return fmt.Sprintf("status %d", e.Code) }

// attemptOnce is attempt n of a generic retry library's HTTP wrapper,
// written the way their documentation shows an operation: an error or a
// retryable status is an error (the response closed, not drained);
// anything else is the result.
func attemptOnce(c *http.Client, req *http.Request, n int) (*http.Response, error) {
	r, err := attemptRequest(req, n)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(r)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
		resp.Body.Close()
		return nil, &StatusError{Code: resp.StatusCode}
	}
	return resp, nil
}

// sleepCtx waits d or until ctx ends; it reports whether it waited.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
