package bench

import (
	"net/http"

	"github.com/failsafe-go/failsafe-go/failsafehttp"
)

// newFailsafe is failsafe-go's RoundTripper with its HTTP retry policy.
func newFailsafe(p Policy, base http.RoundTripper) Client {
	b := failsafehttp.NewRetryPolicyBuilder()
	if p == Comparable {
		b = b.WithMaxAttempts(PolicyAttempts).WithBackoff(PolicyBase, PolicyCap)
	}
	return &http.Client{Transport: failsafehttp.NewRoundTripper(base, b.Build())}
}
