package otelretry

import (
	"context"

	"go.opentelemetry.io/otel/metric"

	"github.com/exactlyonce/retry"
)

// ObserveBudget reports the tokens b holds, under name, as the observable
// gauge exactlyonce.retry.budget.tokens, until unregister is called. A nil
// b reports nothing.
func (t *Telemetry) ObserveBudget(name string, b *retry.Budget) (unregister func() error, err error) {
	if b == nil {
		return func() error { return nil }, nil
	}
	g, err := t.meter.Float64ObservableGauge(MetricBudgetTokens, metric.WithUnit("{token}"),
		metric.WithDescription("Tokens in a retry budget: retries it can pay for now."))
	if err != nil {
		return nil, err
	}
	reg, err := t.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveFloat64(g, b.Stats().Tokens, metric.WithAttributes(AttrBudget.String(name)))
		return nil
	}, g)
	if err != nil {
		return nil, err
	}
	return reg.Unregister, nil
}
