package bench

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// cloneWithBody returns a copy of req for one attempt, with a fresh body from
// GetBody when there is one.
func cloneWithBody(req *http.Request) (*http.Request, error) {
	r := req.Clone(req.Context())
	if req.Body != nil && req.GetBody != nil {
		b, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		r.Body = b
	}
	return r, nil
}

// StatusError is the error the generic wrappers return for a response they
// retry (429 or 5xx): the response itself is closed.
type StatusError struct{ Code int }

func (e *StatusError) Error() string { return fmt.Sprintf("status %d", e.Code) }

// attemptOnce is one attempt of a generic retry library's HTTP wrapper,
// written the way their documentation shows an operation: an error or a
// retryable status is an error (the response closed, not drained);
// anything else is the result.
func attemptOnce(c *http.Client, req *http.Request) (*http.Response, error) {
	r, err := cloneWithBody(req)
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
