package retry

import "net/http"

// drainLimit is how much of a retried response's body is read and
// discarded so its connection can be reused; past it (or past a second) the
// connection is closed instead. Error bodies are usually far smaller.
const drainLimit = 64 << 10

// httpConfig is the part of the policy only the Transport uses.
type httpConfig struct {
	keyHeader  string
	tokenKeys  bool
	noKeys     bool
	honoured   honouredHosts // the hosts WithKeysHonoured names
	idempotent bool          // requests are safe to repeat, whatever their method
	bodyLimit  int64
	statuses   statusSet // the statuses retried (zero: the defaults)
	noYield    bool      // the SDKs' headers are ignored (see WithoutYielding)
}

func defaultHTTPConfig() httpConfig {
	return httpConfig{keyHeader: defaultKeyHeader, bodyLimit: defaultBodyBufferLimit}
}

// WithKeyHeader sets the header that carries the idempotency key (default
// Idempotency-Key). An empty name restores the default.
func WithKeyHeader(name string) Option {
	return optionFunc(func(c *config) {
		if name == "" {
			name = defaultKeyHeader
		}
		c.http.keyHeader = http.CanonicalHeaderKey(name)
	})
}

// WithTokenKeys sends generated keys as plain tokens (Idempotency-Key: 8e03...),
// the form Stripe-style servers expect, instead of the IETF draft's quoted
// Structured Field string (Idempotency-Key: "8e03..."), the default.
func WithTokenKeys() Option {
	return optionFunc(func(c *config) { c.http.tokenKeys = true })
}

// WithoutKeys stops the Transport from adding idempotency keys. A POST or
// PATCH without a key of its own is then retried only when it provably
// never reached the server.
func WithoutKeys() Option {
	return optionFunc(func(c *config) { c.http.noKeys = true })
}

// WithoutRetries sends each request once, whatever comes back, and adds no
// idempotency key: for a deliberately non-idempotent call, usually given to
// one request through NewContext.
func WithoutRetries() Option {
	return optionFunc(func(c *config) {
		c.maxAttempts = 1
		c.http.noKeys = true
	})
}

// WithIdempotent marks requests as safe to repeat although their method is
// not (a POST that only queries, say): they are retried like a GET, without
// a key. Usually given to one request through NewContext.
func WithIdempotent() Option {
	return optionFunc(func(c *config) {
		c.http.idempotent = true
		c.http.noKeys = true
	})
}

// WithBodyBufferLimit sets the largest body without GetBody that is buffered
// for replay (default 1 MiB). n <= 0 buffers nothing: such
// bodies are never retried.
func WithBodyBufferLimit(n int64) Option {
	n = max(n, 0)
	return optionFunc(func(c *config) { c.http.bodyLimit = n })
}
