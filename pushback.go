package retry

import (
	"context"
	"net/http"
	"sync/atomic"
)

// PushbackHeader is the response header by which a service says "my own
// retries gave up; do not retry me". A Transport never retries a response
// that carries it, whatever its status, so retries stay at one layer across
// processes. Its value names why the service gave up: "exhausted" (attempts
// ran out), "budget" (the retry budget denied), "deadline", "retry-after"
// (its upstream asked for a longer wait than it allows), "dependency-down"
// (it waited for its upstream to come back, in vain) or "pushback" (its own
// upstream pushed back); any value counts.
const PushbackHeader = "Retry-Pushback"

// isGiveUp reports whether a loop's reason means its layer gave up on a
// failing dependency, which the service should pass on to its callers.
func isGiveUp(reason error) bool {
	switch reason {
	case ErrAttemptsExhausted, ErrBudgetDenied, ErrDeadline, ErrPushback, ErrRetryAfterTooLong, ErrDependencyDown:
		return true
	}
	return false
}

// pushbackValue names a give-up reason in the header.
func pushbackValue(reason error) string {
	switch reason {
	case ErrAttemptsExhausted:
		return "exhausted"
	case ErrBudgetDenied:
		return "budget"
	case ErrDeadline:
		return "deadline"
	case ErrRetryAfterTooLong:
		return "retry-after"
	case ErrDependencyDown:
		return "dependency-down"
	default:
		return "pushback"
	}
}

type giveUpKey struct{}

// giveUp records, for one incoming request, that an outgoing call made while
// serving it gave up.
type giveUp struct{ reason atomic.Pointer[error] }

// noteGiveUp marks the incoming request whose context ctx derives from.
func noteGiveUp(ctx context.Context, reason error) {
	if g, _ := ctx.Value(giveUpKey{}).(*giveUp); g != nil {
		g.reason.CompareAndSwap(nil, &reason)
	}
}

// GaveUp returns the reason a retry loop (Do or a Transport) running with
// ctx, or a context derived from it, gave up on a failing dependency while
// the request behind ctx was served by PushbackMiddleware; nil when none
// did.
func GaveUp(ctx context.Context) error {
	if g, _ := ctx.Value(giveUpKey{}).(*giveUp); g != nil {
		if r := g.reason.Load(); r != nil {
			return *r
		}
	}
	return nil
}

// NewPushbackContext returns a context in which the retry loops running
// with it, or with a context derived from it (Do, a Transport, a Caller),
// record that they gave up on a failing dependency, for GaveUp and
// PushbackValue to tell. PushbackMiddleware gives every request one; an
// integration of another protocol (module grpcretry) does the same for its
// own servers.
func NewPushbackContext(ctx context.Context) context.Context {
	return context.WithValue(ctx, giveUpKey{}, &giveUp{})
}

// PushbackValue returns the value of PushbackHeader for the answer to the
// request behind ctx (a context from NewPushbackContext): why a retry loop
// running with it gave up ("exhausted", "budget", "deadline",
// "retry-after", "dependency-down" or "pushback"), or "" when none did.
func PushbackValue(ctx context.Context) string {
	if r := GaveUp(ctx); r != nil {
		return pushbackValue(r)
	}
	return ""
}

// PushbackMiddleware tells a service's callers not to retry when the
// service's own retries gave up. It gives each request a context in which Do
// and Transport record that they gave up (attempts exhausted, budget denied,
// deadline, or pushback from further down); a 5xx response written after
// that carries PushbackHeader, and a Transport receiving it does not retry.
// Three layers under a total outage then cost about one attempt per request
// at the bottom, instead of 4 x 4 x 4.
//
// Outgoing calls must use the request's context (r.Context() or one derived
// from it). The handler needs no other change.
func PushbackMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g := &giveUp{}
		r = r.WithContext(context.WithValue(r.Context(), giveUpKey{}, g))
		next.ServeHTTP(&pushbackWriter{ResponseWriter: w, g: g}, r)
	})
}

// pushbackWriter adds PushbackHeader to a 5xx when an outgoing call gave up.
type pushbackWriter struct {
	http.ResponseWriter
	g           *giveUp
	wroteHeader bool
}

// WriteHeader marks a 5xx written after a give-up.
func (w *pushbackWriter) WriteHeader(code int) {
	if !w.wroteHeader && code >= 500 {
		if r := w.g.reason.Load(); r != nil {
			w.Header().Set(PushbackHeader, pushbackValue(*r))
		}
	}
	if code >= 200 {
		w.wroteHeader = true
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write writes the body, with an implicit 200.
func (w *pushbackWriter) Write(p []byte) (int, error) {
	w.wroteHeader = true
	return w.ResponseWriter.Write(p)
}

// Unwrap gives http.ResponseController the underlying writer (Flush, Hijack, ...).
func (w *pushbackWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
