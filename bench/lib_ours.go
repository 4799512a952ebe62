package bench

import (
	"net/http"

	"github.com/exactlyonce/retry"
)

// newOurs is this module's Transport: with Defaults, exactly NewClient's
// policy (its retry budget included).
func newOurs(p Policy, base http.RoundTripper) Client {
	var opts []retry.Option
	if p == Comparable {
		opts = append(opts,
			retry.WithMaxAttempts(PolicyAttempts),
			retry.WithBackoff(retry.FullJitter(PolicyBase, PolicyCap)))
	}
	return &http.Client{Transport: retry.NewTransport(base, opts...)}
}
