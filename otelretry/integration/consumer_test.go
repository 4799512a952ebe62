package integration_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"reflect"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/consumer"
	"github.com/exactlyonce/retry/otelretry"
)

// testDelivery is a delivery of the test's own broker.
type testDelivery struct {
	msg  *consumer.Message
	once sync.Once
	done chan struct{}
}

func newTestDelivery(key string, published time.Time) *testDelivery {
	return &testDelivery{msg: &consumer.Message{Key: key, Subject: "orders", Body: []byte(key), Delivery: 1, Published: published},
		done: make(chan struct{})}
}

func (d *testDelivery) Message() (*consumer.Message, error)      { return d.msg, nil }
func (d *testDelivery) settle() error                            { d.once.Do(func() { close(d.done) }); return nil }
func (d *testDelivery) Ack(context.Context) error                { return d.settle() }
func (d *testDelivery) Nak(context.Context, time.Duration) error { return d.settle() }
func (d *testDelivery) Term(context.Context, string) error       { return d.settle() }
func (d *testDelivery) InProgress(context.Context) error         { return nil }
func (d *testDelivery) Last() bool                               { return false }

// testSource hands out its deliveries in one fetch, then waits for the
// context's end.
type testSource struct{ ds []*testDelivery }

func (s *testSource) Fetch(ctx context.Context, n int, deliver func(consumer.Delivery)) error {
	for _, d := range s.ds[:min(n, len(s.ds))] {
		deliver(d)
	}
	if len(s.ds) == 0 {
		<-ctx.Done()
		return ctx.Err()
	}
	s.ds = s.ds[min(n, len(s.ds)):]
	return nil
}

// The consumer's Observer records deliveries by outcome, the handler's
// durations, the fetches' sizes and the broker's wait; ObserveConsumer
// reports every count of the Stats; no key is recorded.
func TestConsumerMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness()
		c, err := consumer.New(consumer.Config{Runner: idempotency.NewRunner(nil), Name: "ship",
			Observer: h.tel.ConsumerObserver(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Handler: func(_ context.Context, m *consumer.Message) error {
				switch m.Key {
				case "order-ok":
					time.Sleep(2 * time.Second)
				case "order-bad":
					return idempotency.Reject(errors.New("malformed"))
				case "order-flaky":
					time.Sleep(time.Second)
					return errors.New("flaky")
				}
				return nil
			}})
		require.NoError(t, err)
		unregister, err := h.tel.ObserveConsumer("ship", c.Stats)
		require.NoError(t, err)
		defer unregister()

		ds := []*testDelivery{newTestDelivery("order-ok", time.Now().Add(-5*time.Second)),
			newTestDelivery("order-bad", time.Time{}), newTestDelivery("order-flaky", time.Time{})}
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- c.Run(ctx, &testSource{ds: ds}) }()
		for _, d := range ds {
			<-d.done
		}
		cancel()
		require.ErrorIs(t, <-errc, context.Canceled)

		ship := otelretry.AttrConsumer.String("ship")
		for out, want := range map[consumer.DeliveryOutcome]int64{consumer.DeliveryExecuted: 1, consumer.DeliveryTerminated: 1,
			consumer.DeliveryRetried: 1, consumer.DeliveryReplayed: 0} {
			assert.Equal(t, want, h.count(t, otelretry.MetricConsumerDeliveries, ship, otelretry.AttrConsumerOutcome.String(string(out))), out)
		}
		n, sum := h.histogram(t, otelretry.MetricConsumerHandlerDuration, ship, otelretry.AttrOutcome.String("success"))
		assert.Equal(t, uint64(1), n)
		assert.Equal(t, 2.0, sum)
		n, sum = h.histogram(t, otelretry.MetricConsumerHandlerDuration, ship, otelretry.AttrOutcome.String("failure"))
		assert.Equal(t, uint64(2), n)
		assert.Equal(t, 1.0, sum)
		n, _ = h.histogram(t, otelretry.MetricConsumerHandlerDuration, attribute.String("error.type", "errors.errorString"))
		assert.Equal(t, uint64(1), n, "the flaky failure's error.type")
		n, sum = h.histogram(t, otelretry.MetricConsumerFetchSize, ship)
		assert.GreaterOrEqual(t, n, uint64(1))
		assert.Equal(t, 3.0, sum, "deliveries fetched")
		n, sum = h.histogram(t, otelretry.MetricConsumerBrokerWait, ship, otelretry.AttrFirstDelivery.Bool(true))
		assert.Equal(t, uint64(1), n, "only the message whose broker said when it took it")
		assert.Equal(t, 5.0, sum)

		st := reflect.ValueOf(c.Stats())
		for i := range st.NumField() {
			name := otelretry.MetricConsumerStatsPrefix + snake(st.Type().Field(i).Name)
			assert.Equal(t, int64(st.Field(i).Uint()), h.count(t, name, ship), name)
		}
		assert.Equal(t, int64(1), h.count(t, otelretry.MetricConsumerStatsPrefix+"executed", ship))
		assert.Contains(t, h.metricNames(t), "exactlyonce.consumer.stats.in_progress")
		h.noKeyRecorded(t, "order-")
	})
}

// snake is the test's own snake case of a Go name.
func snake(name string) string {
	out := []rune{}
	for i, r := range name {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				out = append(out, '_')
			}
			r += 'a' - 'A'
		}
		out = append(out, r)
	}
	return string(out)
}

// noKeyRecorded fails the test when an attribute of a metric holds
// something with prefix.
func (h *harness) noKeyRecorded(t *testing.T, prefix string) {
	var rm metricdata.ResourceMetrics
	require.NoError(t, h.reader.Collect(context.Background(), &rm))
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			var sets []attribute.Set
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					sets = append(sets, p.Attributes)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					sets = append(sets, p.Attributes)
				}
			}
			for _, s := range sets {
				for _, kv := range s.ToSlice() {
					assert.NotContains(t, kv.Value.Emit(), prefix, "%s: %s", m.Name, kv.Key)
				}
			}
		}
	}
}

// metricNames returns the names of the metrics collected.
func (h *harness) metricNames(t *testing.T) []string {
	var rm metricdata.ResourceMetrics
	require.NoError(t, h.reader.Collect(context.Background(), &rm))
	var out []string
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out = append(out, m.Name)
		}
	}
	return out
}
