// Package retry makes network operations safe to retry: it retries only
// what is safe, at one layer, within a deadline and a budget, and gives
// every attempt of a non-idempotent request the same idempotency key.
//
// # HTTP: wrap the client
//
// Most programs start here:
//
//	client := retry.NewClient(retry.WithTotalTimeout(5 * time.Second))
//	resp, err := client.Post(url, "application/json", bytes.NewReader(payload))
//
// or, around a transport of their own, NewTransport(base, opts...). The
// Transport retries GET, HEAD, OPTIONS, TRACE, PUT and DELETE, and any
// request that carries an idempotency key, on transient failures (timeouts,
// resets, refused connections, 502, 503, 504 and 429). A POST or PATCH gets
// an Idempotency-Key, the same on every attempt, sent as the IETF draft's
// Structured Field string ("8e03978e-...") or, with WithTokenKeys, as a
// plain token; a key the caller set is kept. A key makes a resend safe only
// where the server deduplicates it: until a host has shown it does (an
// answer that echoes the key, as the idempotency middleware's do, or says
// Idempotent-Replayed: true) or WithKeysHonoured names it, its keyed POSTs
// and PATCHes are retried as unkeyed ones are, except that one that may have
// reached it waits for the answers of the other keyed requests out to it to
// show whether it does. Other requests are retried
// only when they provably never reached the server. Retry-After (seconds or an
// HTTP-date) is a floor for the next wait; one longer than
// WithMaxRetryAfter, or ending past the deadline, hands the response back at
// once. When retrying stops on a response, the response is returned as it
// is, body intact; a transport failure ends in an *Error.
//
// A single request can have its own policy through its context:
//
//	ctx = retry.NewContext(ctx, retry.WithoutRetries())       // a charge that must not repeat
//	ctx = retry.NewContext(ctx, retry.WithReport(&report))    // what happened, when it returns
//
// # Any operation: Do
//
// Do and DoValue run any operation until it succeeds, fails permanently or
// the policy gives up:
//
//	balance, err := retry.DoValue(ctx, account.Balance, retry.WithMaxAttempts(5))
//
// An operation can say more with the Permanent and RetryAfter markers.
// Errors are classified by type (IsPermanent, IsTransient), never by message.
// When the loop gives up, the error is an *Error with the number of
// attempts, the reason (ErrAttemptsExhausted, ErrDeadline, ErrBudgetDenied,
// ...) and the operation's last error; errors.Is and errors.As find each.
//
// # Policy and defaults
//
//   - Attempts: 4 in all (1 + 3 retries); WithMaxAttempts.
//   - Backoff: full jitter from 100 ms, capped at 10 s; WithBackoff, with
//     the backoffs of package github.com/exactlyonce/retry/backoff.
//   - Deadline: the context's, or WithTotalTimeout's, whichever is sooner
//     (none by default); no wait ever ends past it. WithAttemptTimeout
//     bounds each attempt that another can follow (else it runs to the
//     deadline); a Transport bounds an attempt that nothing else bounds to
//     30 s for its response's headers, and WithAdaptiveTimeout learns a
//     bound from each host's latency. WithHedging sends a second copy of a
//     slow request.
//   - Budget: every Transport has a budget of its own, NewBudget(0.1, 1,
//     20): retries held to 10% of successful traffic, 20 tokens to start,
//     1 retry/s when empty; Do uses one only WithBudget. Share one Budget
//     among the callers of one dependency.
//   - Riding through outages (on; WithRideThrough, WithoutRideThrough): a
//     dependency that keeps failing is waited for, within each request's
//     deadline (10 s without one), instead of being hammered, and requests
//     are let go by what it shows it can take when it answers again (a
//     window that grows with each success, as TCP's slow start); a wait in
//     vain hands back the last response; an outage longer than 10 s fails
//     requests at once.
//   - One layer: a loop inside another loop (found through the context)
//     makes a single attempt; package
//     github.com/exactlyonce/retry/pushback's Middleware and the
//     Retry-Pushback header stop retries across services.
//   - Observing: WithLogger (log/slog), WithTrace (hooks, for tracing and
//     metrics; module otelretry fills them for OpenTelemetry), WithReport,
//     Budget.Stats and Transport.Dependencies.
//
// # Other protocols
//
// Package github.com/exactlyonce/retry/protocol runs the calls of another
// protocol on the same loop, from the same Options (its Caller, Call and
// Verdict are for the authors of integrations, as database/sql/driver is
// beside database/sql): module github.com/exactlyonce/retry/grpcretry
// builds its gRPC client interceptors on it, and its server interceptors
// on package pushback and package idempotency.
//
// The server half, which turns a repeated request into a replay of the first
// outcome, is package github.com/exactlyonce/retry/idempotency.
package retry
