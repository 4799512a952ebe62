package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/otelretry"
)

// otelStdout is the value of -otel that exports with the stdout exporters.
const otelStdout = "stdout"

// traceSampleRatio is the share of traces kept: a charge's trace (our
// client's span, its attempts, the service's spans) is kept whole or not
// at all.
const traceSampleRatio = 0.01

// telemetry is the demo's OpenTelemetry setup for -otel=stdout: SDK
// providers whose exporters write JSON to one writer, and the otelretry
// Telemetry on them. otelhttp makes the HTTP spans, but its metrics are left
// out (on the global MeterProvider, which discards them), so that the
// metrics shown are this module's. A nil *telemetry instruments nothing.
type telemetry struct {
	tel     *otelretry.Telemetry
	tp      *sdktrace.TracerProvider
	mp      *sdkmetric.MeterProvider
	reader  *sdkmetric.ManualReader
	metrics sdkmetric.Exporter
	props   propagation.TextMapPropagator

	mu         sync.Mutex
	unregister []func() error
}

// newTelemetry returns the setup for mode (nil for ""), exporting to w:
// spans as they are batched, metrics once, at shutdown.
func newTelemetry(mode string, w io.Writer) (*telemetry, error) {
	if mode != otelStdout {
		return nil, nil
	}
	spans, err := stdouttrace.New(stdouttrace.WithWriter(w))
	if err != nil {
		return nil, err
	}
	metrics, err := stdoutmetric.New(stdoutmetric.WithWriter(w))
	if err != nil {
		return nil, err
	}
	res := resource.NewSchemaless(semconv.ServiceName("payments-demo"))
	t := &telemetry{
		tp: sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithBatcher(spans),
			sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(traceSampleRatio)))),
		reader:  sdkmetric.NewManualReader(),
		metrics: metrics,
		props:   propagation.TraceContext{},
	}
	t.mp = sdkmetric.NewMeterProvider(sdkmetric.WithResource(res), sdkmetric.WithReader(t.reader))
	// otelhttp's Transport, below the retry Transport, makes the attempts'
	// spans and carries the trace to the service.
	t.tel = otelretry.New(otelretry.WithTracerProvider(t.tp), otelretry.WithMeterProvider(t.mp),
		otelretry.WithoutAttemptSpans())
	return t, nil
}

// transport returns base as the retry Transport's base: under otelhttp's
// Transport, which makes a client span per attempt and propagates it.
func (t *telemetry) transport(base http.RoundTripper) http.RoundTripper {
	if t == nil {
		return base
	}
	return otelhttp.NewTransport(otelretry.Resends(base), otelhttp.WithTracerProvider(t.tp),
		otelhttp.WithPropagators(t.props))
}

// retryOptions returns the options that trace and measure a retry loop.
func (t *telemetry) retryOptions() []retry.Option {
	if t == nil {
		return nil
	}
	return []retry.Option{t.tel.Option()}
}

// observeBudget reports b's tokens under name until shutdown.
func (t *telemetry) observeBudget(name string, b *retry.Budget) error {
	if t == nil {
		return nil
	}
	unregister, err := t.tel.ObserveBudget(name, b)
	if err != nil {
		return err
	}
	t.mu.Lock()
	t.unregister = append(t.unregister, unregister)
	t.mu.Unlock()
	return nil
}

// observer returns the Observer that records the outcomes of a Runner, or
// nil.
func (t *telemetry) observer() func(context.Context, idempotency.Observation) {
	if t == nil {
		return nil
	}
	return t.tel.Observer()
}

// handler returns h under otelhttp's Handler, whose server span, a child
// of the client's attempt, carries the outcome of the request.
func (t *telemetry) handler(h http.Handler) http.Handler {
	if t == nil {
		return h
	}
	return otelhttp.NewHandler(h, "payments", otelhttp.WithTracerProvider(t.tp),
		otelhttp.WithPropagators(t.props))
}

// shutdown flushes the spans, exports the metrics once and shuts the
// providers down.
func (t *telemetry) shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	errs := []error{t.tp.Shutdown(ctx)}
	var rm metricdata.ResourceMetrics
	if err := t.reader.Collect(ctx, &rm); err != nil {
		errs = append(errs, err)
	} else {
		errs = append(errs, t.metrics.Export(ctx, &rm))
	}
	t.mu.Lock()
	for _, u := range t.unregister {
		errs = append(errs, u())
	}
	t.unregister = nil
	t.mu.Unlock()
	errs = append(errs, t.mp.Shutdown(ctx), t.metrics.Shutdown(ctx))
	return errors.Join(errs...)
}
