package bench

import (
	"net/http"
	"time"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/backoff"
)

// newOurs is this module's Transport: with Defaults, exactly NewClient's
// policy (its retry budget included).
func newOurs(p Policy, base http.RoundTripper) Client {
	return &http.Client{Transport: retry.NewTransport(base, oursOptions(p)...)}
}

// oursOptions are the options of policy p.
func oursOptions(p Policy) []retry.Option {
	if p != Comparable {
		return nil
	}
	return []retry.Option{
		retry.WithMaxAttempts(PolicyAttempts),
		retry.WithBackoff(backoff.FullJitter(PolicyBase, PolicyCap)),
	}
}

// newOursBounded is newOurs with WithAttemptTimeout(d).
func newOursBounded(p Policy, base http.RoundTripper, d time.Duration) Client {
	return &http.Client{Transport: retry.NewTransport(base, append(oursOptions(p), retry.WithAttemptTimeout(d))...)}
}
