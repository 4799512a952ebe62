package bench

import (
	"net/http"

	"github.com/hashicorp/go-retryablehttp"
)

// newRetryableHTTP is go-retryablehttp's StandardClient.
func newRetryableHTTP(p Policy, base http.RoundTripper) Client {
	c := retryablehttp.NewClient()
	c.Logger = nil
	c.HTTPClient = &http.Client{Transport: base}
	if p == Comparable {
		c.RetryMax = PolicyAttempts - 1
		c.RetryWaitMin = PolicyBase
		c.RetryWaitMax = PolicyCap
	}
	return c.StandardClient()
}
