// Package pushback is the server half of "retries at one layer" across
// services: a service whose own outgoing retries (package retry's Transport
// or Do, package protocol's Caller) gave up on a failing dependency tells
// its callers not to retry it, with a 5xx that carries Header. The retry
// package's Transport never retries a response that carries it, so three
// services chained in front of a dead dependency cost about one attempt per
// request at the bottom instead of 4 x 4 x 4.
//
// Wrap every HTTP service that calls out with Middleware, and make the
// outgoing calls with the request's context. Module grpcretry's
// PushbackUnary and PushbackStream do the same for gRPC services, on
// NewContext and Value. The package uses the standard library only.
package pushback

import (
	"context"
	"net/http"

	"github.com/exactlyonce/retry/internal/giveup"
)

// Header is the response header by which a service says "my own retries
// gave up; do not retry me". A retry.Transport never retries a response
// that carries it, whatever its status (its reason is then
// retry.ErrPushback), so retries stay at one layer across processes. Its
// value names why the service gave up: "exhausted" (attempts ran out),
// "budget" (the retry budget denied), "deadline", "retry-after" (its
// upstream asked for a longer wait than it allows), "dependency-down" (it
// waited for its upstream to come back, in vain) or "pushback" (its own
// upstream pushed back); any value counts.
const Header = "Retry-Pushback"

// NewContext returns a context in which the retry loops running with it, or
// with a context derived from it (retry.Do, a retry.Transport, a
// protocol.Caller), record that they gave up on a failing dependency, for Value
// to tell. Middleware gives every request one; an integration of another
// protocol (module grpcretry) does the same for its own servers.
func NewContext(ctx context.Context) context.Context {
	ctx, _ = giveup.NewContext(ctx)
	return ctx
}

// Value returns the value of Header for the answer to the request behind
// ctx (a context from NewContext or Middleware): why the first retry loop
// running with it that gave up did ("exhausted", "budget", "deadline",
// "retry-after", "dependency-down" or "pushback"), or "" when none did or
// ctx has no record of it.
func Value(ctx context.Context) string { return giveup.Value(ctx) }

// Middleware tells a service's callers not to retry when the service's own
// retries gave up. It gives each request a context in which retry.Do, a
// retry.Transport and a protocol.Caller record that they gave up (attempts
// exhausted, budget denied, deadline, or pushback from further down); a 5xx
// response written after that carries Header, and a retry.Transport
// receiving it does not retry.
//
// Outgoing calls must use the request's context (r.Context() or one derived
// from it). The handler needs no other change.
func Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, rec := giveup.NewContext(r.Context())
		next.ServeHTTP(&writer{ResponseWriter: w, rec: rec}, r.WithContext(ctx))
	})
}

// writer adds Header to a 5xx when an outgoing call gave up.
type writer struct {
	http.ResponseWriter
	rec         *giveup.Record
	wroteHeader bool
}

// WriteHeader marks a 5xx written after a give-up.
func (w *writer) WriteHeader(code int) {
	if !w.wroteHeader && code >= 500 {
		if v := w.rec.Value(); v != "" {
			w.Header().Set(Header, v)
		}
	}
	if code >= 200 {
		w.wroteHeader = true
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write writes the body, with an implicit 200.
func (w *writer) Write(p []byte) (int, error) {
	w.wroteHeader = true
	return w.ResponseWriter.Write(p)
}

// Unwrap gives http.ResponseController the underlying writer (Flush, Hijack, ...).
func (w *writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }
