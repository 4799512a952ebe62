// Package retry makes network operations safe to retry.
//
// Networks deliver at least once or not at all; an exactly-once effect comes
// only from an idempotent operation plus retries. This package is the client
// half: it retries only what is safe, at one layer, within a deadline.
//
//   - Do and DoValue run any operation until it succeeds, fails permanently or
//     the policy gives up, with full-jitter exponential backoff by default.
//   - Errors are classified by type (timeouts, resets, refused connections are
//     transient; cancelled contexts and certificate errors are not), never by
//     message text. Permanent and RetryAfter let an operation say more.
//   - One total deadline bounds every attempt and wait, and no wait is ever
//     started that would end past it.
//   - A loop running inside another loop (found through the context) makes a
//     single attempt, so nested layers never multiply their load.
//   - When the loop gives up, the error is an *Error that keeps the number of
//     attempts, the reason (ErrAttemptsExhausted, ErrDeadline, ...) and the last
//     error of the operation; errors.Is and errors.As find all of them.
//
// The server half, which turns a repeated request into a replay of the first
// outcome, is package github.com/exactlyonce/retry/idempotency.
package retry
