package bench

import (
	"io"
	"net/http"
	"time"
)

// newPlain is an http.Client that never retries.
func newPlain(_ Policy, base http.RoundTripper) Client {
	return &http.Client{Transport: base}
}

// naiveWait is the naive loop's pause between attempts.
const naiveWait = 10 * time.Millisecond

// newNaive is the loop most code starts with: send again, up to 4 attempts,
// on any error or 5xx, after a short fixed pause. It has one policy.
func newNaive(_ Policy, base http.RoundTripper) Client {
	return naiveClient{c: &http.Client{Transport: base}}
}

type naiveClient struct{ c *http.Client }

func (n naiveClient) Do(req *http.Request) (*http.Response, error) {
	var (
		resp *http.Response
		err  error
	)
	for a := 1; a <= PolicyAttempts; a++ {
		if a > 1 && !sleepCtx(req.Context(), naiveWait) {
			return nil, req.Context().Err()
		}
		r, rerr := attemptRequest(req, a)
		if rerr != nil {
			return nil, rerr
		}
		resp, err = n.c.Do(r)
		if err == nil && resp.StatusCode < 500 {
			return resp, nil
		}
		if err == nil && a < PolicyAttempts {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	return resp, err
}
