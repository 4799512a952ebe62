package integration_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/otelretry"
)

const (
	outcomeKey = attribute.Key("exactlyonce.idempotency.outcome")
	attemptKey = attribute.Key("exactlyonce.idempotency.attempt")
	errTypeKey = attribute.Key("error.type")
	// secretKey is the Idempotency-Key of the tests: it must never show in
	// an attribute.
	secretKey = "key-4f9c2a"
)

// server is the idempotency Middleware, with the Telemetry's Observer on
// its Runner, behind otelhttp's Handler, in front of app.
func (h *harness) server(app http.HandlerFunc) http.Handler {
	runner := idempotency.NewRunner(nil, h.tel.RunnerOption())
	return otelhttp.NewHandler(idempotency.Middleware(runner, idempotency.SingleTenant)(app), "charges",
		otelhttp.WithTracerProvider(h.tp))
}

// post serves a POST /charges with key and body to srv and returns the
// response. The server span has ended when it returns.
func post(srv http.Handler, key, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/charges", strings.NewReader(body))
	r.Header.Set("Idempotency-Key", key)
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, r)
	return w
}

// charge is a handler that performs the charge and answers 201.
func charge(w http.ResponseWriter, r *http.Request) {
	idempotency.MarkStarted(r.Context())
	w.WriteHeader(http.StatusCreated)
	w.Write([]byte(`{"id":"ch_1"}`))
}

// serverSpans returns the ended server spans, in the order they ended.
func (h *harness) serverSpans() []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range h.spans.GetSpans() {
		if s.SpanKind == trace.SpanKindServer {
			out = append(out, s)
		}
	}
	return out
}

// assertOutcome checks that span carries outcome as its attribute and in
// exactly one outcome event, with the attempt and the error.type (none
// when errType is empty).
func assertOutcome(t *testing.T, span tracetest.SpanStub, outcome string, attempt int64, errType string) {
	t.Helper()
	got, ok := attr(span, outcomeKey)
	assert.True(t, ok, "the span has no outcome attribute")
	assert.Equal(t, outcome, got.AsString(), "the span's outcome")
	var events []attribute.Set
	for _, ev := range span.Events {
		if ev.Name == "exactlyonce.idempotency.outcome" {
			events = append(events, attribute.NewSet(ev.Attributes...))
		}
	}
	require.Len(t, events, 1, "one outcome event per call")
	ev := events[0]
	v, _ := ev.Value(outcomeKey)
	assert.Equal(t, outcome, v.AsString(), "the event's outcome")
	v, _ = ev.Value(attemptKey)
	assert.Equal(t, attempt, v.AsInt64(), "the event's attempt")
	v, ok = ev.Value(errTypeKey)
	if errType == "" {
		assert.False(t, ok, "no error.type without an error, got %q", v.AsString())
	} else {
		assert.Equal(t, errType, v.AsString(), "the event's error.type")
	}
}

// assertNoSecrets checks that no attribute of a span, an event or a metric
// point names the caller or the key, and that the outcome counter is split
// by nothing but the outcome and error.type.
func (h *harness) assertNoSecrets(t *testing.T, secrets ...string) {
	t.Helper()
	check := func(where string, kvs []attribute.KeyValue) {
		for _, kv := range kvs {
			for _, s := range secrets {
				assert.NotContains(t, kv.Value.Emit(), s, "%s: attribute %s", where, kv.Key)
			}
		}
	}
	for _, s := range h.spans.GetSpans() {
		check("span "+s.Name, s.Attributes)
		for _, ev := range s.Events {
			check("event "+ev.Name, ev.Attributes)
		}
	}
	var rm metricdata.ResourceMetrics
	require.NoError(t, h.reader.Collect(context.Background(), &rm))
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != otelretry.MetricOutcomes {
				continue
			}
			assert.Equal(t, "{request}", m.Unit)
			assert.NotEmpty(t, m.Description)
			for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
				check(m.Name, p.Attributes.ToSlice())
				for _, kv := range p.Attributes.ToSlice() {
					assert.Contains(t, []attribute.Key{outcomeKey, errTypeKey}, kv.Key, "the counter's attributes")
				}
			}
		}
	}
}

func outcome(o idempotency.Outcome) attribute.KeyValue { return outcomeKey.String(string(o)) }

func TestServerExecutedThenReplayed(t *testing.T) {
	h := newHarness()
	srv := h.server(charge)
	first := post(srv, secretKey, `{"amount":100}`)
	require.Equal(t, http.StatusCreated, first.Code)
	again := post(srv, secretKey, `{"amount":100}`)
	require.Equal(t, http.StatusCreated, again.Code)
	require.Equal(t, "true", again.Header().Get("Idempotent-Replayed"))

	spans := h.serverSpans()
	require.Len(t, spans, 2, "one otelhttp server span per request")
	assertOutcome(t, spans[0], "executed", 1, "")
	assertOutcome(t, spans[1], "replayed", 1, "")
	assert.Equal(t, int64(1), h.count(t, otelretry.MetricOutcomes, outcome(idempotency.OutcomeExecuted)))
	assert.Equal(t, int64(1), h.count(t, otelretry.MetricOutcomes, outcome(idempotency.OutcomeReplayed)))
	assert.Equal(t, int64(2), h.count(t, otelretry.MetricOutcomes))
	h.assertNoSecrets(t, secretKey)
}

// A repeat while the first request's handler still runs gets 409: the
// outcome in_progress.
func TestServerInProgress(t *testing.T) {
	h := newHarness()
	entered, release := make(chan struct{}), make(chan struct{})
	srv := h.server(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
		charge(w, r)
	})
	firstDone := make(chan *httptest.ResponseRecorder)
	go func() { firstDone <- post(srv, secretKey, `{"amount":100}`) }()
	<-entered
	second := post(srv, secretKey, `{"amount":100}`)
	close(release)
	first := <-firstDone
	require.Equal(t, http.StatusConflict, second.Code)
	require.Equal(t, http.StatusCreated, first.Code)

	spans := h.serverSpans()
	require.Len(t, spans, 2)
	assertOutcome(t, spans[0], "in_progress", 1, "in_progress") // the second ended first
	assertOutcome(t, spans[1], "executed", 1, "")
	assert.Equal(t, int64(1), h.count(t, otelretry.MetricOutcomes,
		outcome(idempotency.OutcomeInProgress), errTypeKey.String("in_progress")))
	assert.Equal(t, int64(1), h.count(t, otelretry.MetricOutcomes, outcome(idempotency.OutcomeExecuted)))
	h.assertNoSecrets(t, secretKey)
}

// The same key with another body gets 422: the outcome mismatch.
func TestServerMismatch(t *testing.T) {
	h := newHarness()
	srv := h.server(charge)
	require.Equal(t, http.StatusCreated, post(srv, secretKey, `{"amount":100}`).Code)
	require.Equal(t, http.StatusUnprocessableEntity, post(srv, secretKey, `{"amount":999}`).Code)

	spans := h.serverSpans()
	require.Len(t, spans, 2)
	assertOutcome(t, spans[1], "mismatch", 1, "fingerprint_mismatch")
	assert.Equal(t, int64(1), h.count(t, otelretry.MetricOutcomes,
		outcome(idempotency.OutcomeMismatch), errTypeKey.String("fingerprint_mismatch")))
	h.assertNoSecrets(t, secretKey)
}

// A 4xx written before MarkStarted is a rejection: nothing is stored, and
// a corrected retry with the same key executes.
func TestServerRejected(t *testing.T) {
	h := newHarness()
	srv := h.server(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Valid") == "" {
			http.Error(w, "the card number is secret-4711 and invalid", http.StatusBadRequest)
			return
		}
		charge(w, r)
	})
	require.Equal(t, http.StatusBadRequest, post(srv, secretKey, `{}`).Code)
	r := httptest.NewRequest(http.MethodPost, "/charges", strings.NewReader(`{}`))
	r.Header.Set("Idempotency-Key", secretKey)
	r.Header.Set("X-Valid", "1")
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, r)
	require.Equal(t, http.StatusCreated, w.Code)

	spans := h.serverSpans()
	require.Len(t, spans, 2)
	assertOutcome(t, spans[0], "rejected", 1, "rejected")
	assertOutcome(t, spans[1], "executed", 1, "")
	assert.Equal(t, int64(1), h.count(t, otelretry.MetricOutcomes,
		outcome(idempotency.OutcomeRejected), errTypeKey.String("rejected")))
	h.assertNoSecrets(t, secretKey, "secret-4711")
}

// brokerError is the error of a consumer's failed work. Its message must
// never become an attribute.
type brokerError struct{}

func (brokerError) Error() string { return "broker at 10.0.0.7 refused: secret-token" }

// A queue consumer calls Runner.Do in its own span. A first execution that
// saved a recovery point and failed is taken over by the next delivery
// (attempt 2) once its lease has run out; the delivery after that replays.
func TestConsumerTakeover(t *testing.T) {
	h := newHarness()
	mock := clock.NewMock()
	runner := idempotency.NewRunner(idempotency.NewMemoryStore(mock), idempotency.WithClock(mock),
		idempotency.WithLease(time.Minute), h.tel.RunnerOption())
	tracer := h.tp.Tracer("consumer")
	req := idempotency.Request{Caller: "tenant-9", Key: secretKey}
	consume := func(work idempotency.Work) (idempotency.Result, error) {
		ctx, span := tracer.Start(context.Background(), "consume", trace.WithSpanKind(trace.SpanKindConsumer))
		defer span.End()
		return runner.Do(ctx, req, work)
	}

	_, err := consume(func(ctx context.Context, e *idempotency.Execution) ([]byte, error) {
		if _, err := e.Step(ctx, "reserve", func(context.Context, string) ([]byte, error) { return []byte("r1"), nil }); err != nil {
			return nil, err
		}
		return nil, brokerError{}
	})
	require.ErrorIs(t, err, brokerError{})
	mock.Add(time.Millisecond) // the failed execution's lease (cut to 1µs) has run out
	res, err := consume(func(ctx context.Context, e *idempotency.Execution) ([]byte, error) {
		return []byte("sent"), nil
	})
	require.NoError(t, err)
	require.Equal(t, int64(2), res.Attempt)
	// A delivery outside any span is counted all the same.
	res, err = runner.Do(context.Background(), req, func(context.Context, *idempotency.Execution) ([]byte, error) {
		t.Fatal("the completed work ran again")
		return nil, nil
	})
	require.NoError(t, err)
	require.True(t, res.Replayed)

	spans := h.named("consume")
	require.Len(t, spans, 2)
	assertOutcome(t, spans[0], "executed", 1, "integration_test.brokerError")
	assertOutcome(t, spans[1], "taken_over", 2, "")
	assert.Equal(t, int64(1), h.count(t, otelretry.MetricOutcomes,
		outcome(idempotency.OutcomeExecuted), errTypeKey.String("integration_test.brokerError")))
	assert.Equal(t, int64(1), h.count(t, otelretry.MetricOutcomes, outcome(idempotency.OutcomeTakenOver)))
	assert.Equal(t, int64(1), h.count(t, otelretry.MetricOutcomes, outcome(idempotency.OutcomeReplayed)))
	h.assertNoSecrets(t, secretKey, "tenant-9", "secret-token", "10.0.0.7")
}

// Observer is the same Observer that RunnerOption installs, for combining
// with one's own.
func TestObserverCombines(t *testing.T) {
	h := newHarness()
	var heard []idempotency.Outcome
	obs := h.tel.Observer()
	runner := idempotency.NewRunner(nil, idempotency.WithObserver(func(ctx context.Context, o idempotency.Observation) {
		obs(ctx, o)
		heard = append(heard, o.Outcome)
	}))
	work := func(context.Context, *idempotency.Execution) ([]byte, error) { return []byte("ok"), nil }
	for range 2 {
		_, err := runner.Do(context.Background(), idempotency.Request{Key: "m-1"}, work)
		require.NoError(t, err)
	}
	assert.Equal(t, []idempotency.Outcome{idempotency.OutcomeExecuted, idempotency.OutcomeReplayed}, heard)
	assert.Equal(t, int64(2), h.count(t, otelretry.MetricOutcomes))
}
