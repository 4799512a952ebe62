package otelretry_test

import (
	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/otelretry"
)

// The telemetry guide's wiring: both halves traced and measured with the
// application's OpenTelemetry providers. (Compiled, not run.)
func Example() {
	store := idempotency.NewMemoryStore(nil)

	tel := otelretry.New()                                     // the global providers
	client := retry.NewClient(tel.Option())                    // a span per request, per attempt; metrics
	runner := idempotency.NewRunner(store, tel.RunnerOption()) // outcomes: executed, replayed, 409, 422, ...

	_, _ = client, runner
}
