// Package otelretry traces and measures the retry loops of
// github.com/exactlyonce/retry (its Transport, NewClient and Do) and the
// outcomes of github.com/exactlyonce/retry/idempotency with OpenTelemetry.
// It is a module of its own, so that OpenTelemetry never reaches users of
// the others, and depends on the OpenTelemetry API only: the SDK and the
// exporters are the application's.
//
// Wire it in once:
//
//	tel := otelretry.New() // the global TracerProvider and MeterProvider
//	client := retry.NewClient(tel.Option())
//	tel.ObserveBudget("payments", client.Transport.(*retry.Transport).Budget())
//
// Each logical request (a RoundTrip, or a Do call) is a span of its own,
// with the attempts it made and why retrying stopped; each physical attempt
// (retries and hedges included) is an HTTP client span under it, carrying
// http.request.resend_count from the second on. With otelhttp, put
// otelhttp's Transport below the retry Transport, so that its client span
// is the attempt's, and Resends below it to mark resends:
//
//	base := otelhttp.NewTransport(otelretry.Resends(http.DefaultTransport))
//	client := &http.Client{Transport: retry.NewTransport(base, otelretry.New(otelretry.WithoutAttemptSpans()).Option())}
//
// (otelhttp above the retry Transport would make one span for all the
// attempts of a request and hide them.)
//
// Spans follow the HTTP semantic conventions where they name something,
// and never carry a URL's credentials: url.full (and an error message that
// repeats the request's URL) has its user information and the values of
// presigned URLs' signature and credential parameters REDACTED. A method
// the conventions do not know is _OTHER, with http.request.method_original,
// and names no span.
//
// On the server, a Runner with tel.RunnerOption() counts what became of each
// keyed request (executed, replayed, in progress, ...) and, behind
// otelhttp's Handler, records it on the request's server span:
//
//	runner := idempotency.NewRunner(store, tel.RunnerOption())
//	handler := otelhttp.NewHandler(idempotency.Middleware(runner, callerOf)(app), "payments")
//
// The spans, metrics, their units and attributes are listed in the module's
// README.
package otelretry
