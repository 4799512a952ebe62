package bench

import (
	"context"
	"net/http"

	goretry "github.com/sethvargo/go-retry"
)

// newSethvargo wraps each request in go-retry's DoValue. The library has no
// default backoff, so both policies are the comparable one.
func newSethvargo(_ Policy, base http.RoundTripper) Client {
	return sethvargoClient{c: &http.Client{Transport: base}}
}

type sethvargoClient struct{ c *http.Client }

func (c sethvargoClient) Do(req *http.Request) (*http.Response, error) {
	b := goretry.WithMaxRetries(PolicyAttempts-1,
		goretry.WithCappedDuration(PolicyCap, goretry.WithFullJitter(goretry.NewExponential(PolicyBase))))
	n := 0
	return goretry.DoValue(req.Context(), b, func(context.Context) (*http.Response, error) {
		n++
		resp, err := attemptOnce(c.c, req, n)
		if err != nil {
			return nil, goretry.RetryableError(err)
		}
		return resp, nil
	})
}
