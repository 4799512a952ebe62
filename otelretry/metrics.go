package otelretry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Metric names. Where the OpenTelemetry semantic conventions name nothing
// for a figure, the name is ours, under "exactlyonce.", and stable.
const (
	MetricRequests      = "exactlyonce.retry.requests"
	MetricAttempts      = "exactlyonce.retry.attempts"
	MetricRetries       = "exactlyonce.retry.retries"
	MetricGiveUps       = "exactlyonce.retry.give_ups"
	MetricBudgetTokens  = "exactlyonce.retry.budget.tokens"
	MetricBudgetDenials = "exactlyonce.retry.budget.denials"
	MetricHedges        = "exactlyonce.retry.hedges"
	MetricWait          = "exactlyonce.retry.wait.duration"
	MetricOutcomes      = "exactlyonce.idempotency.outcomes"
)

// Attribute keys of ours.
const (
	// AttrOutcome is an attempt's outcome: "success" or "failure". (What
	// became of a keyed request on the server is
	// exactlyonce.idempotency.outcome: see Telemetry.Observer.)
	AttrOutcome = attribute.Key("exactlyonce.outcome")
	// AttrReason is why a loop stopped without success: "attempts_exhausted",
	// "deadline", "budget_denied", "permanent", "cancelled", "pushback",
	// "retry_after_too_long", "not_idempotent", "body_not_replayable",
	// "dependency_down".
	AttrReason = attribute.Key("exactlyonce.retry.reason")
	// AttrAttempts is the number of attempts of a logical request.
	AttrAttempts = attribute.Key("exactlyonce.retry.attempts")
	// AttrWaitCause is why the loop waited: "backoff", "retry-after" or
	// "dependency".
	AttrWaitCause = attribute.Key("exactlyonce.retry.wait.cause")
	// AttrWon tells a hedge that won from one that lost.
	AttrWon = attribute.Key("exactlyonce.retry.hedge.won")
	// AttrBudget names a budget observed with ObserveBudget.
	AttrBudget = attribute.Key("exactlyonce.retry.budget")
)

// instruments are the Telemetry's metrics.
type instruments struct {
	requests, attempts, retries, giveUps, denials, hedges, outcomes metric.Int64Counter
	wait                                                            metric.Float64Histogram
}

func newInstruments(m metric.Meter) instruments {
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, _ := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		return c
	}
	wait, _ := m.Float64Histogram(MetricWait, metric.WithUnit("s"),
		metric.WithDescription("Waits of retry loops between attempts, by cause."),
		metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))
	return instruments{
		requests: counter(MetricRequests, "{request}", "Logical requests that ended, by reason (none: success)."),
		attempts: counter(MetricAttempts, "{attempt}", "Attempts made, by outcome and error.type."),
		retries:  counter(MetricRetries, "{retry}", "Retries decided, by the error.type of the attempt retried."),
		giveUps:  counter(MetricGiveUps, "{request}", "Logical requests that stopped without success, by reason."),
		denials:  counter(MetricBudgetDenials, "{retry}", "Retries the retry budget denied."),
		hedges:   counter(MetricHedges, "{hedge}", "Hedges sent, by whether they won."),
		outcomes: counter(MetricOutcomes, "{request}", "Keyed requests (calls of an idempotency Runner), by outcome and error.type."),
		wait:     wait,
	}
}

func add(ctx context.Context, c metric.Int64Counter, attrs ...attribute.KeyValue) {
	if c != nil {
		c.Add(ctx, 1, metric.WithAttributes(attrs...))
	}
}
