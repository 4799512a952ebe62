package otelretry

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/exactlyonce/retry"
)

// ScopeName is the instrumentation scope of the tracer and the meter.
const ScopeName = "github.com/exactlyonce/retry/otelretry"

// Telemetry traces and measures retry loops and idempotent executions. Make
// one with New and share it: it is safe for concurrent use.
type Telemetry struct {
	tracer       trace.Tracer
	meter        metric.Meter
	attemptSpans bool
	m            instruments
	trace        *retry.Trace
	// known are the HTTP methods spans name as they are (see method).
	known map[string]bool
}

// Option configures New.
type Option func(*settings)

type settings struct {
	tp           trace.TracerProvider
	mp           metric.MeterProvider
	attemptSpans bool
}

// WithTracerProvider sets the TracerProvider (default: the global one).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(s *settings) { s.tp = tp }
}

// WithMeterProvider sets the MeterProvider (default: the global one).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(s *settings) { s.mp = mp }
}

// WithoutAttemptSpans stops the Telemetry from making an HTTP client span
// for each attempt of a Transport: use it when otelhttp's Transport, below
// the retry Transport, makes them (see Resends).
func WithoutAttemptSpans() Option {
	return func(s *settings) { s.attemptSpans = false }
}

// New returns a Telemetry on the given (or the global) providers.
func New(opts ...Option) *Telemetry {
	s := settings{attemptSpans: true}
	for _, o := range opts {
		if o != nil {
			o(&s)
		}
	}
	if s.tp == nil {
		s.tp = otel.GetTracerProvider()
	}
	if s.mp == nil {
		s.mp = otel.GetMeterProvider()
	}
	t := &Telemetry{
		tracer:       s.tp.Tracer(ScopeName),
		meter:        s.mp.Meter(ScopeName),
		attemptSpans: s.attemptSpans,
		known:        knownMethods(),
	}
	t.m = newInstruments(t.meter)
	t.trace = t.clientTrace()
	return t
}

// Trace returns the hooks to install in a retry loop (retry.WithTrace).
func (t *Telemetry) Trace() *retry.Trace { return t.trace }

// Option returns retry.WithTrace(t.Trace()), for NewClient, NewTransport,
// Do and WithRequestOptions.
func (t *Telemetry) Option() retry.Option { return retry.WithTrace(t.trace) }
