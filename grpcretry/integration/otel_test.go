package integration_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/backoff"
	"github.com/exactlyonce/retry/grpcretry"
	"github.com/exactlyonce/retry/grpcretry/paymentspb"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/otelretry"
)

// flaky executes every charge; dropFirst loses its first answer.
type flaky struct {
	paymentspb.UnimplementedPaymentsServer
}

func (f *flaky) Charge(ctx context.Context, req *paymentspb.ChargeRequest) (*paymentspb.ChargeReply, error) {
	idempotency.MarkStarted(ctx)
	return &paymentspb.ChargeReply{Id: "ch_1"}, nil
}

// dropFirst fails the first call after the handler ran, as a response lost
// on its way back.
func dropFirst() grpc.UnaryServerInterceptor {
	var n atomic.Int64
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		resp, err := h(ctx, req)
		if n.Add(1) == 1 {
			return nil, status.Error(codes.Unavailable, "response lost")
		}
		return resp, err
	}
}

// Telemetry plugs into both halves as it does for HTTP: the Client's loop
// through Option (a span per call with its attempts, the attempts counter),
// the Runner through RunnerOption (the outcomes counter).
func TestTelemetryOfBothHalves(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	reader := sdkmetric.NewManualReader()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	tel := otelretry.New(otelretry.WithTracerProvider(tp),
		otelretry.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))

	runner := idempotency.NewRunner(nil, tel.RunnerOption())
	dedup := grpcretry.NewServerInterceptor(runner, grpcretry.SingleTenant)
	retrying := grpcretry.NewClient(tel.Option(), retry.WithBackoff(backoff.Constant(0)))
	client := serve(t, &flaky{}, retrying, nil, dropFirst(), dedup.Unary)
	_, err := client.Charge(context.Background(), &paymentspb.ChargeRequest{Account: "acct"})
	require.NoError(t, err)

	var calls []tracetest.SpanStub
	for _, s := range spans.GetSpans() {
		if s.Name == "retry" {
			calls = append(calls, s)
		}
	}
	require.Len(t, calls, 1, "a span for the logical call")
	attempts, ok := attrOf(calls[0].Attributes, "exactlyonce.retry.attempts")
	require.True(t, ok)
	assert.EqualValues(t, 2, attempts.AsInt64())

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	outcomes := map[string]int64{}
	var attemptsCounted int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok {
				continue
			}
			for _, p := range sum.DataPoints {
				switch m.Name {
				case "exactlyonce.idempotency.outcomes":
					o, _ := p.Attributes.Value("exactlyonce.idempotency.outcome")
					outcomes[o.AsString()] += p.Value
				case "exactlyonce.retry.attempts":
					attemptsCounted += p.Value
				}
			}
		}
	}
	assert.Equal(t, map[string]int64{"executed": 1, "replayed": 1}, outcomes)
	assert.EqualValues(t, 2, attemptsCounted)
}

func attrOf(attrs []attribute.KeyValue, key string) (attribute.Value, bool) {
	for _, a := range attrs {
		if string(a.Key) == key {
			return a.Value, true
		}
	}
	return attribute.Value{}, false
}
