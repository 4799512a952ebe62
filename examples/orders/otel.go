package main

import (
	"context"
	"errors"
	"io"
	"sync"

	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/exactlyonce/retry/idempotency/consumer"
	"github.com/exactlyonce/retry/otelretry"
)

// otelStdout is the value of -otel that exports the metrics with the
// stdout exporter.
const otelStdout = "stdout"

// telemetry is the demo's OpenTelemetry for -otel=stdout: our consumers'
// metrics (otelretry's ConsumerObserver and ObserveConsumer), exported
// once, as JSON, when the run ends. A nil *telemetry records nothing.
type telemetry struct {
	tel     *otelretry.Telemetry
	mp      *sdkmetric.MeterProvider
	reader  *sdkmetric.ManualReader
	metrics sdkmetric.Exporter

	mu         sync.Mutex
	unregister []func() error
}

// newTelemetry returns the setup for mode (nil for ""), exporting to w.
func newTelemetry(mode string, w io.Writer) (*telemetry, error) {
	if mode != otelStdout {
		return nil, nil
	}
	metrics, err := stdoutmetric.New(stdoutmetric.WithWriter(w))
	if err != nil {
		return nil, err
	}
	t := &telemetry{reader: sdkmetric.NewManualReader(), metrics: metrics}
	t.mp = sdkmetric.NewMeterProvider(sdkmetric.WithResource(resource.NewSchemaless(semconv.ServiceName("orders-demo"))),
		sdkmetric.WithReader(t.reader))
	t.tel = otelretry.New(otelretry.WithMeterProvider(t.mp))
	return t, nil
}

// observer returns the Observer of our consumers on broker, or nil: the
// consumer is named by the broker and its own name ("NATS JetStream/ship").
func (t *telemetry) observer(broker string) consumer.Observer {
	if t == nil {
		return nil
	}
	obs := t.tel.ConsumerObserver()
	return func(ctx context.Context, e consumer.Event) {
		e.Consumer = broker + "/" + e.Consumer
		obs(ctx, e)
	}
}

// observeStats reports the Stats of c, one instance's consumer, under
// name until shutdown.
func (t *telemetry) observeStats(name string, c statser) error {
	if t == nil {
		return nil
	}
	unregister, err := t.tel.ObserveConsumer(name, c.Stats)
	if err != nil {
		return err
	}
	t.mu.Lock()
	t.unregister = append(t.unregister, unregister)
	t.mu.Unlock()
	return nil
}

// shutdown exports the metrics once and shuts the provider down.
func (t *telemetry) shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	var errs []error
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
