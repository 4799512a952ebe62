package otelretry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/exactlyonce/retry"
)

type (
	requestSpanKey struct{}
	attemptSpanKey struct{}
	attemptNumKey  struct{}
)

// clientTrace builds the hooks of a retry loop.
func (t *Telemetry) clientTrace() *retry.Trace {
	return &retry.Trace{
		Start:        t.start,
		AttemptStart: t.attemptStart,
		AttemptEnd:   t.attemptEnd,
		Decided:      t.decided,
		Wait: func(ctx context.Context, d time.Duration, cause string) {
			t.m.wait.Record(ctx, d.Seconds(), metric.WithAttributes(AttrWaitCause.String(cause)))
		},
		BudgetDenied: func(ctx context.Context) { add(ctx, t.m.denials) },
		Hedged:       func(ctx context.Context, won bool) { add(ctx, t.m.hedges, AttrWon.Bool(won)) },
		End:          t.end,
	}
}

// start begins the span of a logical request.
func (t *Telemetry) start(ctx context.Context, req *http.Request) context.Context {
	name := "retry"
	var attrs []attribute.KeyValue
	if req != nil {
		name += " " + method(req)
		attrs = append(attrs, semconv.HTTPRequestMethodKey.String(method(req)), semconv.URLFull(req.URL.Redacted()))
	}
	ctx, span := t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	return context.WithValue(ctx, requestSpanKey{}, span)
}

// attemptStart begins the HTTP client span of attempt n, unless otelhttp
// makes them; either way the attempt's number goes in the context.
func (t *Telemetry) attemptStart(ctx context.Context, n int, hedge bool, req *http.Request) context.Context {
	ctx = context.WithValue(ctx, attemptNumKey{}, n)
	if req == nil || !t.attemptSpans {
		return ctx
	}
	attrs := []attribute.KeyValue{
		semconv.HTTPRequestMethodKey.String(method(req)),
		semconv.URLFull(req.URL.Redacted()),
		semconv.ServerAddress(req.URL.Hostname()),
	}
	if port := portOf(req.URL.Port(), req.URL.Scheme); port > 0 {
		attrs = append(attrs, semconv.ServerPort(port))
	}
	if n > 1 {
		attrs = append(attrs, semconv.HTTPRequestResendCount(n-1))
	}
	if hedge {
		attrs = append(attrs, attribute.Bool("exactlyonce.retry.hedge", true))
	}
	ctx, span := t.tracer.Start(ctx, method(req), trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return context.WithValue(ctx, attemptSpanKey{}, span)
}

// attemptEnd ends the attempt's span with its status or error.
func (t *Telemetry) attemptEnd(ctx context.Context, _ int, resp *http.Response, err error) {
	span, _ := ctx.Value(attemptSpanKey{}).(trace.Span)
	if span == nil {
		return
	}
	switch {
	case err != nil:
		span.SetAttributes(semconv.ErrorTypeKey.String(errorType(err)))
		span.SetStatus(codes.Error, err.Error())
	case resp != nil:
		span.SetAttributes(semconv.HTTPResponseStatusCode(resp.StatusCode))
		if resp.StatusCode >= 400 {
			span.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(resp.StatusCode)))
			span.SetStatus(codes.Error, "")
		}
	}
	span.End()
}

// decided counts an attempt and what the loop made of it, and records it
// as an event of the logical request's span.
func (t *Telemetry) decided(ctx context.Context, a retry.Attempt) {
	outcome, errType := "success", ""
	if a.Err != nil || (a.StatusCode != 0 && (a.Retrying || a.Reason != nil)) {
		outcome = "failure"
		errType = attemptErrorType(a)
	}
	attrs := []attribute.KeyValue{AttrOutcome.String(outcome)}
	if errType != "" {
		attrs = append(attrs, semconv.ErrorTypeKey.String(errType))
	}
	add(ctx, t.m.attempts, attrs...)
	if a.Retrying {
		add(ctx, t.m.retries, semconv.ErrorTypeKey.String(errType))
	}
	if span, _ := ctx.Value(requestSpanKey{}).(trace.Span); span != nil && outcome == "failure" {
		ev := []attribute.KeyValue{attribute.Int("exactlyonce.retry.attempt", a.Number), semconv.ErrorTypeKey.String(errType)}
		if a.Retrying {
			ev = append(ev, attribute.Float64("exactlyonce.retry.delay", a.Delay.Seconds()))
		}
		span.AddEvent("attempt failed", trace.WithAttributes(ev...))
	}
}

// end ends the logical request's span with its attempts and reason.
func (t *Telemetry) end(ctx context.Context, r retry.Report) {
	var attrs []attribute.KeyValue
	if r.Reason != nil {
		attrs = append(attrs, AttrReason.String(reasonName(r.Reason)))
		add(ctx, t.m.giveUps, attrs...)
	}
	add(ctx, t.m.requests, attrs...)
	span, _ := ctx.Value(requestSpanKey{}).(trace.Span)
	if span == nil {
		return
	}
	span.SetAttributes(append(attrs, AttrAttempts.Int(r.Attempts))...)
	if r.StatusCode != 0 {
		span.SetAttributes(semconv.HTTPResponseStatusCode(r.StatusCode))
	}
	if r.Reason != nil {
		span.SetStatus(codes.Error, r.Reason.Error())
	}
	span.End()
}

// reasonName is the attribute value of a give-up reason.
func reasonName(reason error) string {
	for _, r := range []struct {
		err  error
		name string
	}{
		{retry.ErrAttemptsExhausted, "attempts_exhausted"}, {retry.ErrDeadline, "deadline"},
		{retry.ErrBudgetDenied, "budget_denied"}, {retry.ErrPermanent, "permanent"},
		{retry.ErrCancelled, "cancelled"}, {retry.ErrPushback, "pushback"},
		{retry.ErrRetryAfterTooLong, "retry_after_too_long"}, {retry.ErrNotIdempotent, "not_idempotent"},
		{retry.ErrBodyNotReplayable, "body_not_replayable"}, {retry.ErrDependencyDown, "dependency_down"},
	} {
		if errors.Is(reason, r.err) {
			return r.name
		}
	}
	return "_OTHER"
}

// attemptErrorType is error.type for a failed attempt: its status code, or
// its error's type.
func attemptErrorType(a retry.Attempt) string {
	if a.Err != nil {
		return errorType(a.Err)
	}
	return strconv.Itoa(a.StatusCode)
}

// errorType names an error by what it is, never by its message: a
// timeout, a cancellation, or the Go type of the innermost error we know.
func errorType(err error) string {
	var timeout *retry.AttemptTimeoutError
	var netErr net.Error
	switch {
	case errors.As(err, &timeout), errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.As(err, &netErr) && netErr.Timeout():
		return "timeout"
	}
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return strings.TrimPrefix(fmt.Sprintf("%T", err), "*")
		}
		err = next
	}
}

func method(req *http.Request) string {
	if req.Method == "" {
		return http.MethodGet
	}
	return req.Method
}

func portOf(port, scheme string) int {
	if p, err := strconv.Atoi(port); err == nil {
		return p
	}
	switch scheme {
	case "http":
		return 80
	case "https":
		return 443
	}
	return 0
}
