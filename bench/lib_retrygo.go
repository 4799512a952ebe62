package bench

import (
	"net/http"

	retrygo "github.com/avast/retry-go/v4"
)

// newRetryGo wraps each request in retry-go's DoWithData.
func newRetryGo(p Policy, base http.RoundTripper) Client {
	return retryGoClient{c: &http.Client{Transport: base}, p: p}
}

type retryGoClient struct {
	c *http.Client
	p Policy
}

func (c retryGoClient) Do(req *http.Request) (*http.Response, error) {
	opts := []retrygo.Option{retrygo.Context(req.Context()), retrygo.LastErrorOnly(true)}
	if c.p == Comparable {
		opts = append(opts, retrygo.Attempts(PolicyAttempts), retrygo.Delay(PolicyBase),
			retrygo.MaxDelay(PolicyCap), retrygo.DelayType(retrygo.FullJitterBackoffDelay))
	}
	n := 0
	return retrygo.DoWithData(func() (*http.Response, error) {
		n++
		return attemptOnce(c.c, req, n)
	}, opts...)
}
