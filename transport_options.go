package retry

import "net/http"

// Defaults of the Transport.
const (
	// DefaultBodyBufferLimit is the largest request body without GetBody that
	// the Transport buffers (while sending it) to replay it on a retry. A
	// larger body is sent once and not retried: memory per request stays
	// bounded. Bodies with GetBody (all bytes, strings and bytes.Buffer
	// bodies given to http.NewRequest) are replayed at any size.
	DefaultBodyBufferLimit = 1 << 20
	// DefaultDrainLimit is how much of a retried response's body is read and
	// discarded so its connection can be reused; past it (or past a second)
	// the connection is closed instead. Error bodies are usually far smaller.
	DefaultDrainLimit = 64 << 10
)

// httpConfig is the part of the policy only the Transport uses.
type httpConfig struct {
	keyHeader  string
	tokenKeys  bool
	noKeys     bool
	bodyLimit  int64
	drainLimit int64
	retry500   bool
}

func defaultHTTPConfig() httpConfig {
	return httpConfig{
		keyHeader:  DefaultIdempotencyKeyHeader,
		bodyLimit:  DefaultBodyBufferLimit,
		drainLimit: DefaultDrainLimit,
	}
}

// WithIdempotencyKeyHeader sets the header that carries the key (default
// DefaultIdempotencyKeyHeader). An empty name restores the default.
func WithIdempotencyKeyHeader(name string) Option {
	return func(c *config) {
		if name == "" {
			name = DefaultIdempotencyKeyHeader
		}
		c.http.keyHeader = http.CanonicalHeaderKey(name)
	}
}

// WithTokenKeys sends generated keys as plain tokens (Idempotency-Key: 8e03...),
// the form Stripe-style servers expect, instead of the IETF draft's quoted
// Structured Field string (Idempotency-Key: "8e03...").
func WithTokenKeys() Option {
	return func(c *config) { c.http.tokenKeys = true }
}

// WithoutIdempotencyKeys stops the Transport from adding keys. A POST or
// PATCH without a key of its own is then retried only when it provably never
// reached the server.
func WithoutIdempotencyKeys() Option {
	return func(c *config) { c.http.noKeys = true }
}

// WithBodyBufferLimit sets the largest body without GetBody that is buffered
// for replay (default DefaultBodyBufferLimit). n <= 0 buffers nothing: such
// bodies are never retried.
func WithBodyBufferLimit(n int64) Option {
	if n < 0 {
		n = 0
	}
	return func(c *config) { c.http.bodyLimit = n }
}

// WithDrainLimit sets how much of a retried response's body is drained for
// connection reuse (default DefaultDrainLimit). n <= 0 closes without reading.
// A drain is also bounded in time: a body that has not ended within a second
// (or by the deadline) is closed where it stands and its connection dropped,
// so a stalled error body never holds a retry. The drain takes place during
// the wait before the retry.
func WithDrainLimit(n int64) Option {
	if n < 0 {
		n = 0
	}
	return func(c *config) { c.http.drainLimit = n }
}

// WithRetryOn500 retries 500 Internal Server Error like 502, 503 and 504. It
// is off by default: a 500 is more often a bug than a blip.
func WithRetryOn500() Option {
	return func(c *config) { c.http.retry500 = true }
}
