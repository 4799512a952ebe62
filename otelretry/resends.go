package otelretry

import (
	"net/http"

	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Resends returns a RoundTripper for below otelhttp's Transport, itself
// below the retry Transport: it marks the span otelhttp made for each
// attempt after the first with http.request.resend_count, taken from the
// attempt number the retry Transport's Telemetry put in the request's
// context. Requests without one pass untouched.
func Resends(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return resends{base}
}

type resends struct{ base http.RoundTripper }

func (r resends) RoundTrip(req *http.Request) (*http.Response, error) {
	if n, _ := req.Context().Value(attemptNumKey{}).(int); n > 1 {
		trace.SpanFromContext(req.Context()).SetAttributes(semconv.HTTPRequestResendCount(n - 1))
	}
	return r.base.RoundTrip(req)
}
