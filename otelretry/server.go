package otelretry

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/exactlyonce/retry/idempotency"
)

// Attributes and the event of the server side. The caller and the key of
// an Observation are never recorded: they are unbounded, and keys are
// secrets of a kind (within its caller, a key fetches the stored response).
const (
	attrIdempotencyOutcome  = attribute.Key("exactlyonce.idempotency.outcome")
	attrIdempotencyAttempt  = attribute.Key("exactlyonce.idempotency.attempt")
	eventIdempotencyOutcome = "exactlyonce.idempotency.outcome"
)

// Observer returns a function for idempotency.WithObserver that records what became of each
// call of a Runner's Do (and so of each keyed request behind
// idempotency.Middleware): it counts the outcome in the counter
// exactlyonce.idempotency.outcomes and, when the span in the call's context
// is recording (otelhttp's server span, for Middleware), sets the attribute
// exactlyonce.idempotency.outcome on that span and adds an event of the same
// name. Use it to combine with an Observer of one's own; RunnerOption
// installs it alone.
func (t *Telemetry) Observer() func(context.Context, idempotency.Observation) { return t.observe }

// RunnerOption returns idempotency.WithObserver(t.Observer()), for
// idempotency.NewRunner.
func (t *Telemetry) RunnerOption() idempotency.Option {
	return idempotency.WithObserver(t.observe)
}

// observe records one Observation.
func (t *Telemetry) observe(ctx context.Context, o idempotency.Observation) {
	outcome := attrIdempotencyOutcome.String(string(o.Outcome))
	attrs := make([]attribute.KeyValue, 1, 3)
	attrs[0] = outcome
	if o.Err != nil {
		attrs = append(attrs, semconv.ErrorTypeKey.String(idempotencyErrorType(o.Err)))
	}
	add(ctx, t.m.outcomes, attrs...)
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(outcome)
	if o.Attempt > 0 {
		attrs = append(attrs, attrIdempotencyAttempt.Int64(o.Attempt))
	}
	span.AddEvent(eventIdempotencyOutcome, trace.WithAttributes(attrs...))
}

// idempotencyErrorType is error.type for an Observation's error: the
// package's own failures by name, any other error as errorType names it.
func idempotencyErrorType(err error) string {
	var inProgress *idempotency.InProgressError
	switch {
	case errors.Is(err, idempotency.ErrLeaseLost):
		return "lease_lost"
	case errors.As(err, &inProgress):
		return "in_progress"
	case errors.Is(err, idempotency.ErrFingerprintMismatch):
		return "fingerprint_mismatch"
	case errors.Is(err, idempotency.ErrTxFailed):
		return "tx_failed"
	case errors.Is(err, idempotency.ErrRejected):
		return "rejected"
	case errors.Is(err, idempotency.ErrAborted):
		return "aborted"
	case errors.Is(err, idempotency.ErrNotResumable):
		return "not_resumable"
	}
	return errorType(err)
}
