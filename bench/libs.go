package bench

import (
	"net/http"
	"time"

	"github.com/exactlyonce/retry/pushback"
)

// Policy chooses how a library is configured.
type Policy int

const (
	// Defaults is each library as its constructor returns it (loggers
	// silenced); libraries with no default policy have none.
	Defaults Policy = iota
	// Comparable is one policy given to every library: 4 attempts in all,
	// exponential backoff from 10 ms capped at 100 ms (with each library's
	// own jitter, if any).
	Comparable
)

// String names the policy for tables.
func (p Policy) String() string {
	if p == Comparable {
		return "4-attempt policy"
	}
	return "defaults"
}

// The comparable policy.
const (
	PolicyAttempts = 4
	PolicyBase     = 10 * time.Millisecond
	PolicyCap      = 100 * time.Millisecond
)

// Client sends one logical request, retrying as its library does.
type Client interface {
	Do(req *http.Request) (*http.Response, error)
}

// Library is one way of sending HTTP requests under comparison.
type Library struct {
	// Name is the short name used in tables and charts.
	Name string
	// HasDefaults is false for a library that has no default policy (its
	// caller must choose a backoff); Defaults then means Comparable.
	HasDefaults bool
	// Retries is false for a client that never retries (the plain client).
	Retries bool
	// QuickDefaults is true when the default policy gives up within a few
	// seconds under a total outage, so nesting it three deep stays quick.
	QuickDefaults bool
	// Idiomatic is true when the HTTP wrapper is ours, written as the
	// library's documentation shows for a generic operation: it closes a
	// failed response without draining it and does not parse Retry-After.
	Idiomatic bool
	// New returns a client over base with policy p.
	New func(p Policy, base http.RoundTripper) Client
	// Bounded, if set, returns the library's client with policy p and
	// each attempt bounded by its own option (see NewBounded).
	Bounded func(p Policy, base http.RoundTripper, attemptTimeout time.Duration) Client
	// Middleware, if set, wraps the handlers of services that call out with
	// the library (ours: pushback.Middleware).
	Middleware func(http.Handler) http.Handler
}

// Libraries returns every library under comparison: ours first, then the
// plain client, the naive loop and the peers.
func Libraries() []Library {
	return []Library{
		{Name: "exactlyonce", HasDefaults: true, Retries: true, QuickDefaults: true, New: newOurs, Bounded: newOursBounded, Middleware: pushback.Middleware},
		{Name: "plain http.Client", HasDefaults: true, QuickDefaults: true, New: newPlain},
		{Name: "naive loop", HasDefaults: true, Retries: true, QuickDefaults: true, New: newNaive},
		{Name: "go-retryablehttp", HasDefaults: true, Retries: true, New: newRetryableHTTP},
		{Name: "failsafe-go http", HasDefaults: true, Retries: true, QuickDefaults: true, New: newFailsafe},
		{Name: "cenkalti/backoff v5", HasDefaults: true, Retries: true, Idiomatic: true, New: newCenkalti},
		{Name: "avast/retry-go", HasDefaults: true, Retries: true, Idiomatic: true, New: newRetryGo},
		{Name: "sethvargo/go-retry", Retries: true, Idiomatic: true, New: newSethvargo},
	}
}

// LibraryNamed returns the library called name, or false.
func LibraryNamed(name string) (Library, bool) {
	for _, l := range Libraries() {
		if l.Name == name {
			return l, true
		}
	}
	return Library{}, false
}
