package bench

import (
	"net/http"

	"github.com/cenkalti/backoff/v5"
)

// newCenkalti wraps each request in backoff.Retry.
func newCenkalti(p Policy, base http.RoundTripper) Client {
	return cenkaltiClient{c: &http.Client{Transport: base}, p: p}
}

type cenkaltiClient struct {
	c *http.Client
	p Policy
}

func (c cenkaltiClient) Do(req *http.Request) (*http.Response, error) {
	var opts []backoff.RetryOption
	if c.p == Comparable {
		b := backoff.NewExponentialBackOff()
		b.InitialInterval = PolicyBase
		b.MaxInterval = PolicyCap
		opts = append(opts, backoff.WithBackOff(b), backoff.WithMaxTries(PolicyAttempts))
	}
	n := 0
	return backoff.Retry(req.Context(), func() (*http.Response, error) {
		n++
		return attemptOnce(c.c, req, n)
	}, opts...)
}
