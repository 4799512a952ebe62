package otelretry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/exactlyonce/retry"
)

type (
	requestKey    struct{}
	attemptKey    struct{}
	attemptNumKey struct{}
)

// request is what the loop's context carries: the logical request's span,
// and its attempts' spans not ended yet, which a panic ends.
type request struct {
	span trace.Span
	mu   sync.Mutex
	open []trace.Span
}

// requestOf returns the request of the loop that ctx belongs to, or nil.
func requestOf(ctx context.Context) *request {
	r, _ := ctx.Value(requestKey{}).(*request)
	return r
}

// started notes an attempt's span, until ended.
func (r *request) started(span trace.Span) {
	r.mu.Lock()
	r.open = append(r.open, span)
	r.mu.Unlock()
}

// ended forgets an attempt's span.
func (r *request) ended(span trace.Span) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, s := range r.open {
		if s == span {
			r.open = slices.Delete(r.open, i, i+1)
			return
		}
	}
}

// attempt is what the context of an attempt with a span carries: the span,
// and the URL the request went to, whose credentials an error's message
// may repeat.
type attempt struct {
	span trace.Span
	url  *url.URL
}

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
		Panicked:     t.panicked,
	}
}

// start begins the span of a logical request.
func (t *Telemetry) start(ctx context.Context, req *http.Request) context.Context {
	name := "retry"
	var attrs []attribute.KeyValue
	if req != nil {
		method, methodAttrs := t.method(req)
		name += " " + method
		attrs = append(methodAttrs, semconv.URLFull(fullURL(req.URL)))
	}
	ctx, span := t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	return context.WithValue(ctx, requestKey{}, &request{span: span})
}

// attemptStart begins the HTTP client span of attempt n, unless otelhttp
// makes them; either way the attempt's number goes in the context.
func (t *Telemetry) attemptStart(ctx context.Context, n int, hedge bool, req *http.Request) context.Context {
	ctx = context.WithValue(ctx, attemptNumKey{}, n)
	if req == nil || !t.attemptSpans {
		return ctx
	}
	name, attrs := t.method(req)
	attrs = append(attrs,
		semconv.URLFull(fullURL(req.URL)),
		semconv.ServerAddress(req.URL.Hostname()),
	)
	if port := portOf(req.URL.Port(), req.URL.Scheme); port > 0 {
		attrs = append(attrs, semconv.ServerPort(port))
	}
	if n > 1 {
		attrs = append(attrs, semconv.HTTPRequestResendCount(n-1))
	}
	if hedge {
		attrs = append(attrs, attribute.Bool("exactlyonce.retry.hedge", true))
	}
	ctx, span := t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	if r := requestOf(ctx); r != nil {
		r.started(span)
	}
	return context.WithValue(ctx, attemptKey{}, attempt{span: span, url: req.URL})
}

// attemptEnd counts the attempt (every request sent: retries, hedges, and
// the waits for a keyed request's first copy) with its outcome, and ends
// its span with its status or error.
func (t *Telemetry) attemptEnd(ctx context.Context, _ int, resp *http.Response, err error) {
	outcome, errType := "success", ""
	switch {
	case err != nil:
		outcome, errType = "failure", errorType(err)
	case resp != nil && resp.StatusCode >= 400:
		outcome, errType = "failure", strconv.Itoa(resp.StatusCode)
	}
	if errType == "" {
		add(ctx, t.m.attempts, AttrOutcome.String(outcome))
	} else {
		add(ctx, t.m.attempts, AttrOutcome.String(outcome), semconv.ErrorTypeKey.String(errType))
	}
	a, _ := ctx.Value(attemptKey{}).(attempt)
	if a.span == nil {
		return
	}
	if resp != nil && err == nil {
		a.span.SetAttributes(semconv.HTTPResponseStatusCode(resp.StatusCode))
	}
	if errType != "" {
		a.span.SetAttributes(semconv.ErrorTypeKey.String(errType))
		description := ""
		if err != nil {
			description = errorText(err, a.url)
		}
		a.span.SetStatus(codes.Error, description)
	}
	a.span.End()
	if r := requestOf(ctx); r != nil {
		r.ended(a.span)
	}
}

// decided tells what the loop made of an attempt: a retry is counted (but
// not the wait for a keyed request's first copy, which is none), and a
// failed attempt is an event of the logical request's span.
func (t *Telemetry) decided(ctx context.Context, a retry.Attempt) {
	if a.Err == nil && (a.StatusCode == 0 || !(a.Retrying || a.Reason != nil)) {
		return // a success
	}
	errType := attemptErrorType(a)
	if a.Retrying && !waitsForFirstCopy(a) {
		add(ctx, t.m.retries, semconv.ErrorTypeKey.String(errType))
	}
	if r := requestOf(ctx); r != nil {
		ev := []attribute.KeyValue{attribute.Int("exactlyonce.retry.attempt", a.Number), semconv.ErrorTypeKey.String(errType)}
		if a.Retrying {
			ev = append(ev, attribute.Float64("exactlyonce.retry.delay", a.Delay.Seconds()))
		}
		r.span.AddEvent("attempt failed", trace.WithAttributes(ev...))
	}
}

// waitsForFirstCopy reports whether the loop waits after a keyed 409 for
// the outcome of the request's first copy, still running on the server:
// neither a retry the budget pays for nor one the attempt limit counts. A
// Transport retries a 409 only then.
func waitsForFirstCopy(a retry.Attempt) bool {
	return a.Retrying && a.Err == nil && a.StatusCode == http.StatusConflict
}

// end ends the logical request's span with its attempts and reason.
func (t *Telemetry) end(ctx context.Context, r retry.Report) {
	var attrs []attribute.KeyValue
	if r.Reason != nil {
		attrs = append(attrs, AttrReason.String(reasonName(r.Reason)))
		add(ctx, t.m.giveUps, attrs...)
	}
	add(ctx, t.m.requests, attrs...)
	req := requestOf(ctx)
	if req == nil {
		return
	}
	span := req.span
	span.SetAttributes(append(attrs, AttrAttempts.Int(r.Attempts))...)
	if r.StatusCode != 0 {
		span.SetAttributes(semconv.HTTPResponseStatusCode(r.StatusCode))
	}
	if r.Reason != nil {
		span.SetStatus(codes.Error, r.Reason.Error())
	}
	span.End()
}

// panicked ends the spans of a logical request that panicked: those of
// its attempts the panic interrupted, and its own, with an error status
// and an exception event (the panic's type, message and stack); the panic
// then goes on. It counts in no metric.
func (t *Telemetry) panicked(ctx context.Context, value any) {
	r := requestOf(ctx)
	if r == nil {
		return
	}
	status := "panic"
	if value == nil {
		status = "the goroutine exited"
	} else {
		r.span.AddEvent(semconv.ExceptionEventName, trace.WithAttributes(
			semconv.ExceptionType(panicType(value)),
			semconv.ExceptionMessage(fmt.Sprint(value)),
			semconv.ExceptionStacktrace(string(debug.Stack())),
		))
	}
	r.mu.Lock()
	open := r.open
	r.open = nil
	r.mu.Unlock()
	for _, span := range open {
		span.SetStatus(codes.Error, status)
		span.End()
	}
	r.span.SetStatus(codes.Error, status)
	r.span.End()
}

// panicType names the type of a panic's value, as the SDK does for a span
// ended during a panic.
func panicType(v any) string {
	t := reflect.TypeOf(v)
	if t.PkgPath() == "" && t.Name() == "" {
		return t.String() // a pointer, slice, ...
	}
	if t.PkgPath() == "" {
		return t.Name()
	}
	return t.PkgPath() + "." + t.Name()
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
