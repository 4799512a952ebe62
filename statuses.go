package retry

import (
	"net/http"
	"strings"
)

// statusSet is a set of HTTP status codes from 400 to 655; the zero value
// is the default set (429, 502, 503 and 504).
type statusSet struct {
	set  bool
	bits [4]uint64 // bit c-400 for status c
}

// newStatusSet returns the set of codes; codes outside 400-599 are ignored.
func newStatusSet(codes []int) statusSet {
	s := statusSet{set: true}
	for _, c := range codes {
		if c >= 400 && c <= 599 {
			s.bits[(c-400)/64] |= 1 << uint((c-400)%64)
		}
	}
	return s
}

// has reports whether code is in the set.
func (s *statusSet) has(code int) bool {
	if !s.set {
		switch code {
		case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true
		}
		return false
	}
	if code < 400 || code > 599 {
		return false
	}
	return s.bits[(code-400)/64]&(1<<uint((code-400)%64)) != 0
}

// WithRetryStatuses sets the response statuses a Transport retries, on a
// request that is safe to repeat, in place of the default 429, 502, 503
// and 504: add 500 for a service whose 500s are known to be blips, 408
// for one that times requests out, leave 429 out never to retry a rate
// limit. Codes outside 400-599 are ignored; no code at all retries no
// status (transport errors still are). The 409 "still in progress" of a
// keyed request is not a status of this set: it is waited out whatever
// the set. Per request, give it with NewContext. A server's own hint
// (x-should-retry, Stripe-Should-Retry) overrules the set for its
// response.
func WithRetryStatuses(codes ...int) Option {
	s := newStatusSet(codes)
	return optionFunc(func(c *config) { c.http.statuses = s })
}

// shouldRetryHeaders are the headers by which servers say whether a
// failed request is worth repeating: OpenAI's and Anthropic's APIs, and
// Stripe's.
var shouldRetryHeaders = [...]string{"X-Should-Retry", "Stripe-Should-Retry"}

// serverHint reads a server's hint: +1 "retry it", -1 "do not", 0 none.
func serverHint(h http.Header) int {
	for _, name := range shouldRetryHeaders {
		v := h[name]
		if len(v) == 0 {
			continue
		}
		switch strings.ToLower(strings.TrimSpace(v[0])) {
		case "true":
			return 1
		case "false":
			return -1
		}
	}
	return 0
}
