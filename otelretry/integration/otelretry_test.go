package integration_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/backoff"
	"github.com/exactlyonce/retry/otelretry"
)

// harness is a Telemetry on in-memory SDK providers.
type harness struct {
	tel    *otelretry.Telemetry
	spans  *tracetest.InMemoryExporter
	open   *openSpans
	reader *sdkmetric.ManualReader
	tp     *sdktrace.TracerProvider
}

func newHarness(opts ...otelretry.Option) *harness {
	h := &harness{spans: tracetest.NewInMemoryExporter(), open: &openSpans{}, reader: sdkmetric.NewManualReader()}
	h.tp = sdktrace.NewTracerProvider(sdktrace.WithSyncer(h.spans), sdktrace.WithSpanProcessor(h.open))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(h.reader))
	h.tel = otelretry.New(append([]otelretry.Option{otelretry.WithTracerProvider(h.tp), otelretry.WithMeterProvider(mp)}, opts...)...)
	return h
}

// openSpans is a span processor that knows the spans started and not
// ended yet.
type openSpans struct {
	mu   sync.Mutex
	open map[trace.SpanID]string
}

func (o *openSpans) OnStart(_ context.Context, s sdktrace.ReadWriteSpan) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.open == nil {
		o.open = map[trace.SpanID]string{}
	}
	o.open[s.SpanContext().SpanID()] = s.Name()
}

func (o *openSpans) OnEnd(s sdktrace.ReadOnlySpan) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.open, s.SpanContext().SpanID())
}

func (o *openSpans) Shutdown(context.Context) error   { return nil }
func (o *openSpans) ForceFlush(context.Context) error { return nil }

// names returns the names of the spans started and not ended.
func (o *openSpans) names() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var names []string
	for _, name := range o.open {
		names = append(names, name)
	}
	return names
}

// span returns the ended spans with name.
func (h *harness) named(name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range h.spans.GetSpans() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// count is the sum of the counter name's points whose attributes include want.
func (h *harness) count(t *testing.T, name string, want ...attribute.KeyValue) int64 {
	var rm metricdata.ResourceMetrics
	require.NoError(t, h.reader.Collect(context.Background(), &rm))
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
				if hasAll(p.Attributes, want) {
					n += p.Value
				}
			}
		}
	}
	return n
}

// histogram returns the count and sum of the histogram name's points whose
// attributes include want.
func (h *harness) histogram(t *testing.T, name string, want ...attribute.KeyValue) (uint64, float64) {
	var rm metricdata.ResourceMetrics
	require.NoError(t, h.reader.Collect(context.Background(), &rm))
	var n uint64
	var sum float64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			for _, p := range m.Data.(metricdata.Histogram[float64]).DataPoints {
				if hasAll(p.Attributes, want) {
					n += p.Count
					sum += p.Sum
				}
			}
		}
	}
	return n, sum
}

func hasAll(set attribute.Set, want []attribute.KeyValue) bool {
	for _, kv := range want {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

func attr(s tracetest.SpanStub, key attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// scripted answers with the statuses of script in turn (the last repeats).
func scripted(t *testing.T, script []int, header http.Header) *httptest.Server {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		i := int(n.Add(1)) - 1
		if i == 0 {
			for k, v := range header {
				w.Header()[k] = v
			}
		}
		w.WriteHeader(script[min(i, len(script)-1)])
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestRetriedTwiceThenSuccessful(t *testing.T) {
	h := newHarness()
	srv := scripted(t, []int{503, 502, 200}, nil)
	tr := retry.NewTransport(nil, h.tel.Option(), retry.WithBackoff(backoff.Constant(time.Millisecond)))
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
	require.NoError(t, err)
	resp.Body.Close()

	logical := h.named("retry GET")
	require.Len(t, logical, 1)
	attempts, _ := attr(logical[0], otelretry.AttrAttempts)
	assert.Equal(t, int64(3), attempts.AsInt64())
	_, hasReason := attr(logical[0], otelretry.AttrReason)
	assert.False(t, hasReason, "it succeeded")
	assert.Len(t, logical[0].Events, 2, "one event per failed attempt")

	clients := h.named("GET")
	require.Len(t, clients, 3, "one HTTP client span per attempt")
	for i, s := range clients {
		assert.Equal(t, trace.SpanKindClient, s.SpanKind)
		assert.Equal(t, logical[0].SpanContext.SpanID(), s.Parent.SpanID(), "under the logical request's span")
		resend, ok := attr(s, "http.request.resend_count")
		if i == 0 {
			assert.False(t, ok, "the first attempt is no resend")
		} else {
			assert.Equal(t, int64(i), resend.AsInt64())
		}
	}
	status, _ := attr(clients[0], "http.response.status_code")
	assert.Equal(t, int64(503), status.AsInt64())

	assert.Equal(t, int64(2), h.count(t, otelretry.MetricAttempts, otelretry.AttrOutcome.String("failure")))
	assert.Equal(t, int64(1), h.count(t, otelretry.MetricAttempts, otelretry.AttrOutcome.String("success")))
	assert.Equal(t, int64(1), h.count(t, otelretry.MetricRetries, attribute.String("error.type", "503")))
	assert.Equal(t, int64(1), h.count(t, otelretry.MetricRequests))
	assert.Zero(t, h.count(t, otelretry.MetricGiveUps))
}

func TestBudgetDenial(t *testing.T) {
	h := newHarness()
	srv := scripted(t, []int{503}, nil)
	budget := retry.NewBudget(0, 0, 1)
	tr := retry.NewTransport(nil, h.tel.Option(), retry.WithBudget(budget), retry.WithoutRideThrough(),
		retry.WithBackoff(backoff.Constant(time.Millisecond)))
	defer tr.CloseIdleConnections()
	unregister, err := h.tel.ObserveBudget("dependency", budget)
	require.NoError(t, err)
	defer unregister()
	resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
	require.NoError(t, err)
	resp.Body.Close()

	assert.Equal(t, int64(1), h.count(t, otelretry.MetricBudgetDenials))
	assert.Equal(t, int64(1), h.count(t, otelretry.MetricGiveUps, otelretry.AttrReason.String("budget_denied")))
	logical := h.named("retry GET")
	require.Len(t, logical, 1)
	reason, _ := attr(logical[0], otelretry.AttrReason)
	assert.Equal(t, "budget_denied", reason.AsString())

	var rm metricdata.ResourceMetrics
	require.NoError(t, h.reader.Collect(context.Background(), &rm))
	found := false
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == otelretry.MetricBudgetTokens {
				p := m.Data.(metricdata.Gauge[float64]).DataPoints[0]
				assert.Zero(t, p.Value, "the only token was spent")
				found = true
			}
		}
	}
	assert.True(t, found, "the budget's tokens are a gauge")
}

func TestRetryAfterWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness()
		var n atomic.Int32
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			code, header := 200, http.Header{}
			if n.Add(1) == 1 {
				code, header = 503, http.Header{"Retry-After": {"2"}}
			}
			return &http.Response{StatusCode: code, Header: header, Body: http.NoBody, Request: r}, nil
		})
		tr := retry.NewTransport(base, h.tel.Option(), retry.WithBackoff(backoff.Constant(time.Millisecond)))
		resp, err := (&http.Client{Transport: tr}).Get("http://mem.test/")
		require.NoError(t, err)
		resp.Body.Close()
		count, sum := h.histogram(t, otelretry.MetricWait, otelretry.AttrWaitCause.String("retry-after"))
		assert.Equal(t, uint64(1), count)
		assert.Equal(t, 2.0, sum, "the server's 2 s")
	})
}

// isHedge reports whether r is the hedge of a hedged attempt, from the
// attempt span the Telemetry put in its context.
func isHedge(r *http.Request) bool {
	span, ok := trace.SpanFromContext(r.Context()).(sdktrace.ReadOnlySpan)
	if !ok {
		return false
	}
	for _, kv := range span.Attributes() {
		if kv.Key == "exactlyonce.retry.hedge" {
			return kv.Value.AsBool()
		}
	}
	return false
}

// A hedged GET: the first send is slow, the hedge answers; both sends have
// spans that end, and each is an attempt. Which send is slow is decided by
// the request (the hedge is fast), never by the order the sends arrive in:
// on a loaded machine the hedge may arrive first. (It was decided by
// arrival order, and failed under load.)
func TestHedge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness()
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if !isHedge(r) {
				<-r.Context().Done() // slow: cancelled once the hedge won
				return nil, r.Context().Err()
			}
			return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("fast")), Request: r}, nil
		})
		tr := retry.NewTransport(base, h.tel.Option(), retry.WithHedging(retry.Hedging{MinDelay: time.Millisecond}))
		resp, err := (&http.Client{Transport: tr}).Get("http://mem.test/")
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, "fast", string(body))
		synctest.Wait() // the losing send ends once it is cancelled
		assert.Equal(t, int64(1), h.count(t, otelretry.MetricHedges, otelretry.AttrWon.Bool(true)))
		require.Len(t, h.named("GET"), 2, "a span per send, both ended")
		assert.Empty(t, h.open.names())
		hedges := 0
		for _, s := range h.named("GET") {
			if v, ok := attr(s, "exactlyonce.retry.hedge"); ok && v.AsBool() {
				hedges++
				resend, _ := attr(s, "http.request.resend_count")
				assert.Equal(t, int64(1), resend.AsInt64(), "a hedge is a resend")
			}
		}
		assert.Equal(t, 1, hedges)
		logical := h.named("retry GET")
		require.Len(t, logical, 1)
		attempts, _ := attr(logical[0], otelretry.AttrAttempts)
		assert.Equal(t, int64(2), attempts.AsInt64())
		assert.Equal(t, int64(2), h.count(t, otelretry.MetricAttempts),
			"both sends reached the server: the load multiplier counts them")
	})
}

// With otelhttp below the Transport, each attempt is otelhttp's client
// span, marked as a resend by Resends, under the logical request's span.
func TestComposesWithOtelhttp(t *testing.T) {
	h := newHarness(otelretry.WithoutAttemptSpans())
	srv := scripted(t, []int{503, 200}, nil)
	netTr := http.DefaultTransport.(*http.Transport).Clone()
	defer netTr.CloseIdleConnections()
	base := otelhttp.NewTransport(otelretry.Resends(netTr), otelhttp.WithTracerProvider(h.tp))
	tr := retry.NewTransport(base, h.tel.Option(), retry.WithBackoff(backoff.Constant(time.Millisecond)))
	resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
	require.NoError(t, err)
	resp.Body.Close()

	logical := h.named("retry GET")
	require.Len(t, logical, 1)
	var attempts []tracetest.SpanStub
	for _, s := range h.spans.GetSpans() {
		if s.SpanKind == trace.SpanKindClient {
			attempts = append(attempts, s)
		}
	}
	require.Len(t, attempts, 2, "otelhttp's spans, one per attempt, and none of ours")
	for i, s := range attempts {
		assert.Equal(t, logical[0].SpanContext.SpanID(), s.Parent.SpanID())
		resend, ok := attr(s, "http.request.resend_count")
		assert.Equal(t, i > 0, ok)
		if ok {
			assert.Equal(t, int64(1), resend.AsInt64())
		}
	}
}

func TestDo(t *testing.T) {
	h := newHarness()
	calls := 0
	err := retry.Do(context.Background(), func(ctx context.Context) error {
		calls++
		assert.True(t, trace.SpanFromContext(ctx).SpanContext().IsValid(), "the operation runs in the request's span")
		if calls < 3 {
			return errFlaky
		}
		return nil
	}, h.tel.Option(), retry.WithBackoff(backoff.Constant(time.Millisecond)))
	require.NoError(t, err)
	logical := h.named("retry")
	require.Len(t, logical, 1)
	attempts, _ := attr(logical[0], otelretry.AttrAttempts)
	assert.Equal(t, int64(3), attempts.AsInt64())
	assert.Equal(t, int64(2), h.count(t, otelretry.MetricRetries))
}

var errFlaky = io.ErrUnexpectedEOF

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
