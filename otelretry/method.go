package otelretry

import (
	"net/http"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// knownMethodsEnv names the environment variable the semantic conventions
// reserve for the list of HTTP methods an instrumentation knows: a
// comma-separated, case-sensitive list that replaces the default.
const knownMethodsEnv = "OTEL_INSTRUMENTATION_HTTP_KNOWN_METHODS"

// defaultKnownMethods are the methods the conventions know by default:
// those of RFC 9110, PATCH (RFC 5789) and QUERY.
var defaultKnownMethods = []string{
	http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete,
	http.MethodConnect, http.MethodOptions, http.MethodTrace, http.MethodPatch, "QUERY",
}

// knownMethods returns the set of known methods: the environment's list
// (knownMethodsEnv), or the default one.
func knownMethods() map[string]bool {
	list := defaultKnownMethods
	if env := os.Getenv(knownMethodsEnv); strings.TrimSpace(env) != "" {
		list = strings.Split(env, ",")
	}
	known := make(map[string]bool, len(list))
	for _, m := range list {
		if m = strings.TrimSpace(m); m != "" {
			known[m] = true
		}
	}
	return known
}

// method returns the request's method for spans: the method as it is when
// it is known, otherwise _OTHER; name is what names spans (the method, or
// HTTP for one not known, so span names never grow with what clients
// send), and attrs its attributes: http.request.method and, for a method
// not known, http.request.method_original.
func (t *Telemetry) method(req *http.Request) (name string, attrs []attribute.KeyValue) {
	m := req.Method
	if m == "" {
		m = http.MethodGet
	}
	if t.known[m] {
		return m, []attribute.KeyValue{semconv.HTTPRequestMethodKey.String(m)}
	}
	return "HTTP", []attribute.KeyValue{semconv.HTTPRequestMethodOther, semconv.HTTPRequestMethodOriginal(m)}
}
