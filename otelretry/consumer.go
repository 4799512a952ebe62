package otelretry

import (
	"context"
	"reflect"
	"strings"
	"unicode"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/exactlyonce/retry/idempotency/consumer"
)

// Metric names of the consumers (idempotency/consumer and its broker
// adapters).
const (
	// MetricConsumerDeliveries counts what became of deliveries, by
	// consumer and outcome (consumer.DeliveryOutcome: executed, replayed,
	// in_progress, retried, given_back, parked, terminated; held counts
	// the times a delivery was held before its end).
	MetricConsumerDeliveries = "exactlyonce.consumer.deliveries"
	// MetricConsumerHandlerDuration is how long the handler ran, by
	// consumer and outcome ("success" or "failure", with error.type).
	MetricConsumerHandlerDuration = "exactlyonce.consumer.handler.duration"
	// MetricConsumerFetchSize is how many deliveries each fetch from the
	// broker gave, by consumer.
	MetricConsumerFetchSize = "exactlyonce.consumer.fetch.size"
	// MetricConsumerBrokerWait is how long a message waited at the broker
	// before a delivery, where the broker says when it took it
	// (consumer.Message.Published), by consumer and whether it was the
	// first delivery.
	MetricConsumerBrokerWait = "exactlyonce.consumer.broker.wait"
	// MetricConsumerStatsPrefix prefixes the observable counters that
	// ObserveConsumer makes of a consumer's Stats, one per count, named
	// by its field in snake case: exactlyonce.consumer.stats.outages,
	// exactlyonce.consumer.stats.reconnects where the Stats count them.
	MetricConsumerStatsPrefix = "exactlyonce.consumer.stats."
)

// Attribute keys of the consumers' metrics.
const (
	// AttrConsumer is the consumer's name (consumer.Config.Name).
	AttrConsumer = attribute.Key("exactlyonce.consumer")
	// AttrConsumerOutcome is what became of a delivery (consumer.DeliveryOutcome).
	AttrConsumerOutcome = attribute.Key("exactlyonce.consumer.outcome")
	// AttrFirstDelivery tells a message's first delivery from a
	// redelivery, whose wait includes its earlier handling.
	AttrFirstDelivery = attribute.Key("exactlyonce.consumer.first_delivery")
)

// consumerInstruments are the instruments of ConsumerObserver.
type consumerInstruments struct {
	deliveries          metric.Int64Counter
	handler, wait, size metric.Float64Histogram
}

func newConsumerInstruments(m metric.Meter) consumerInstruments {
	deliveries, _ := m.Int64Counter(MetricConsumerDeliveries, metric.WithUnit("{delivery}"),
		metric.WithDescription("What became of a consumer's deliveries, by outcome."))
	handler, _ := m.Float64Histogram(MetricConsumerHandlerDuration, metric.WithUnit("s"),
		metric.WithDescription("How long a consumer's handler ran, by outcome."),
		metric.WithExplicitBucketBoundaries(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))
	size, _ := m.Float64Histogram(MetricConsumerFetchSize, metric.WithUnit("{delivery}"),
		metric.WithDescription("Deliveries a consumer's fetch from the broker gave."),
		metric.WithExplicitBucketBoundaries(0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024))
	wait, _ := m.Float64Histogram(MetricConsumerBrokerWait, metric.WithUnit("s"),
		metric.WithDescription("How long a message waited at the broker before a delivery, where the broker says."),
		metric.WithExplicitBucketBoundaries(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600))
	return consumerInstruments{deliveries: deliveries, handler: handler, wait: wait, size: size}
}

// ConsumerObserver returns a consumer.Observer (for consumer.Config.Observer)
// that records a consumer's deliveries by outcome, its handler's
// durations, its fetches' sizes and its messages' waits at the broker
// (the Metric* names of the consumers). Keys are never recorded.
func (t *Telemetry) ConsumerObserver() consumer.Observer {
	m := newConsumerInstruments(t.meter)
	return func(ctx context.Context, e consumer.Event) {
		name := AttrConsumer.String(e.Consumer)
		switch e.Kind {
		case consumer.EventSettled:
			add(ctx, m.deliveries, name, AttrConsumerOutcome.String(string(e.Outcome)))
		case consumer.EventHandled:
			attrs := []attribute.KeyValue{name, AttrOutcome.String("success")}
			if e.Err != nil {
				attrs = []attribute.KeyValue{name, AttrOutcome.String("failure"), semconv.ErrorTypeKey.String(errorType(e.Err))}
			}
			record(ctx, m.handler, e.Duration.Seconds(), attrs...)
		case consumer.EventFetched:
			record(ctx, m.size, float64(e.Fetched), name)
		case consumer.EventDelivered:
			if e.WaitKnown {
				record(ctx, m.wait, e.Waited.Seconds(), name, AttrFirstDelivery.Bool(e.Delivery <= 1))
			}
		}
	}
}

func record(ctx context.Context, h metric.Float64Histogram, v float64, attrs ...attribute.KeyValue) {
	if h != nil {
		h.Record(ctx, v, metric.WithAttributes(attrs...))
	}
}

// ObserveConsumer reports every count of a consumer's Stats (stats is its
// Stats method), under name, as an observable counter named
// MetricConsumerStatsPrefix and the field's name in snake case, until
// unregister is called: its outages, its reconnects where the Stats
// count them, and a count the Stats gain later without a change here.
func (t *Telemetry) ObserveConsumer(name string, stats func() consumer.Stats) (unregister func() error, err error) {
	fields := statsFields()
	counters := make([]metric.Int64ObservableCounter, len(fields))
	instruments := make([]metric.Observable, len(fields))
	for i, f := range fields {
		counters[i], err = t.meter.Int64ObservableCounter(MetricConsumerStatsPrefix+f.metric, metric.WithUnit("1"),
			metric.WithDescription("A consumer's "+f.field+" count (consumer.Stats)."))
		if err != nil {
			return nil, err
		}
		instruments[i] = counters[i]
	}
	attrs := metric.WithAttributes(AttrConsumer.String(name))
	reg, err := t.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		v := reflect.ValueOf(stats())
		for i, f := range fields {
			o.ObserveInt64(counters[i], int64(v.Field(f.index).Uint()), attrs)
		}
		return nil
	}, instruments...)
	if err != nil {
		return nil, err
	}
	return reg.Unregister, nil
}

// statsField is a count of consumer.Stats.
type statsField struct {
	field, metric string
	index         int
}

// statsFields returns the unsigned integer fields of consumer.Stats.
func statsFields() []statsField {
	typ := reflect.TypeFor[consumer.Stats]()
	var out []statsField
	for i := range typ.NumField() {
		f := typ.Field(i)
		switch f.Type.Kind() {
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			if f.IsExported() {
				out = append(out, statsField{field: f.Name, metric: snakeCase(f.Name), index: i})
			}
		}
	}
	return out
}

// snakeCase turns a Go name into snake case: InProgress, in_progress.
func snakeCase(name string) string {
	var b strings.Builder
	for i, r := range name {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}
