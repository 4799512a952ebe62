package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/pgstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// instance is an order service in this process on schema, its store's
// clock shifted by shift.
func instance(t *testing.T, schema, dep string, shift time.Duration) (*idempotency.Runner, http.Handler) {
	t.Helper()
	ts := new(pgstore.TimeShift)
	ts.Advance(shift)
	store, err := pgstore.New(newPool(t), pgstore.WithSchema(schema), pgstore.WithTimeShift(ts))
	require.NoError(t, err)
	runner := idempotency.NewRunner(store, idempotency.WithLease(time.Hour))
	c := &childServer{store: store, schema: schema, dep: dep, out: io.Discard}
	return runner, c.handler(runner)
}

// crashAt starts a server process on schema, posts key to it, and kills it
// (SIGKILL) once the request reached gate; it returns what the client got.
// Before gateAfterStart the provider has been called once.
func crashAt(t *testing.T, schema string, prov *provider, client *http.Client, gate, key string) result {
	t.Helper()
	first := startChild(t, schema, prov.URL, 0, gate)
	sent := make(chan result, 1)
	go func() { sent <- post(client, first.url, key) }()
	if gate != gateAfterStart {
		first.expect(t, "called 1")
	}
	first.expect(t, gate+" 1")
	first.kill(t)
	return <-sent
}

func quietConfig() idempotency.ReconcilerConfig {
	return idempotency.ReconcilerConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// A server process is killed (SIGKILL) after charging and before
// completing, and its client never retries. Another instance's Reconciler,
// once the lease ran out, serves the stored request again: the completed
// step is skipped (no second call), the order is written and completed,
// and the client that comes back late gets that response.
func TestReconcilerFinishesAfterSIGKILL(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	schema := newSchema(t, pool)
	prov := newProvider(t)
	client := newClient(t)

	require.Error(t, crashAt(t, schema, prov, client, gateAfterStep, "order-9").err, "the client goes away with its server")

	// Another instance, two hours on: the one-hour lease has run out.
	runner, handler := instance(t, schema, prov.URL, 2*time.Hour)
	n, err := runner.Reconcile(context.Background(), quietConfig())
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	calls, effects := prov.stats()
	assert.Equal(t, 1, calls, "the charge's result was saved: not called again")
	assert.Equal(t, 1, effects)
	assert.True(t, written(t, pool, schema, "order-9#2"))
	assert.Equal(t, 1, countRows(t, pool, schema, "outbox"))

	server := httptest.NewServer(handler)
	defer server.Close()
	late := post(client, server.URL, "order-9")
	require.NoError(t, late.err)
	assert.Equal(t, http.StatusCreated, late.status)
	assert.True(t, late.replayed)
	assert.Equal(t, "order order-9#2 charge ch_1", late.body)
	var resume []byte
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT resume FROM "+table(schema, "idempotency_keys")).Scan(&resume))
	assert.Nil(t, resume, "the stored request goes when the record completes")
}

// A server process is killed after the request began and before any step:
// another instance's Reconciler runs the whole request once.
func TestReconcilerRunsWhatDiedBeforeAnyStep(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	schema := newSchema(t, pool)
	prov := newProvider(t)
	client := newClient(t)

	crashAt(t, schema, prov, client, gateAfterStart, "order-11")
	var point []byte
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT recovery_point FROM "+table(schema, "idempotency_keys")).Scan(&point))
	assert.Equal(t, "started", string(point), "the started mark is saved")

	runner, handler := instance(t, schema, prov.URL, 2*time.Hour)
	n, err := runner.Reconcile(context.Background(), quietConfig())
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	calls, effects := prov.stats()
	assert.Equal(t, 1, calls)
	assert.Equal(t, 1, effects)
	assert.True(t, written(t, pool, schema, "order-11#2"))

	server := httptest.NewServer(handler)
	defer server.Close()
	late := post(client, server.URL, "order-11")
	require.NoError(t, late.err)
	assert.True(t, late.replayed)
	assert.Equal(t, "order order-11#2 charge ch_1", late.body)
}

// Two instances' Reconcilers and the client's retry race for one stalled
// execution: one runs it, one charge, one order.
func TestReconcilersRaceOnPostgres(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	schema := newSchema(t, pool)
	prov := newProvider(t)
	client := newClient(t)
	crashAt(t, schema, prov, client, gateAfterCall, "order-10")

	a, _ := instance(t, schema, prov.URL, 2*time.Hour)
	b, _ := instance(t, schema, prov.URL, 2*time.Hour)
	_, handler := instance(t, schema, prov.URL, 2*time.Hour)
	server := httptest.NewServer(handler)
	defer server.Close()
	var wg sync.WaitGroup
	var resumed atomic.Int32
	for _, r := range []*idempotency.Runner{a, b} {
		wg.Go(func() {
			n, err := r.Reconcile(context.Background(), quietConfig())
			assert.NoError(t, err)
			resumed.Add(int32(n))
		})
	}
	var retry result
	wg.Go(func() { retry = post(client, server.URL, "order-10") })
	wg.Wait()
	require.NoError(t, retry.err)
	assert.Contains(t, []int{http.StatusCreated, http.StatusConflict}, retry.status, retry.body)
	assert.LessOrEqual(t, resumed.Load(), int32(1))
	if retry.status == http.StatusConflict {
		assert.Equal(t, int32(1), resumed.Load(), "a reconciler held it")
	}
	_, effects := prov.stats()
	assert.Equal(t, 1, effects)
	assert.True(t, written(t, pool, schema, "order-10#2"), "one execution took it over and completed")
	assert.Equal(t, 1, countRows(t, pool, schema, "outbox"))
	assert.Equal(t, 1, countRows(t, pool, schema, "local_writes"))
}

// BenchmarkReconcileStalled measures how fast a Reconciler works through
// 10,000 stalled executions of a Runner's registered work on PostgreSQL
// (each: a takeover in a batch, a transaction that completes it), in
// batches of DefaultReconcileBatch.
func BenchmarkReconcileStalled(b *testing.B) {
	const stalled = 10_000
	store, _, shift := newStore(b)
	ctx := context.Background()
	runner := idempotency.NewRunner(store, idempotency.WithLease(time.Minute))
	errCrash := errors.New("crashed")
	runner.Register("job", func(ctx context.Context, e *idempotency.Execution) ([]byte, error) {
		return append([]byte("done "), e.Input()...), nil
	})
	b.ResetTimer()
	var resumed, seconds float64
	for i := range b.N {
		b.StopTimer()
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for j := w; j < stalled; j += 8 {
					req := idempotency.Request{Caller: "c", Key: fmt.Sprintf("%d-%d", i, j), Work: "job", Input: []byte("input")}
					_, err := runner.Do(ctx, req, func(ctx context.Context, e *idempotency.Execution) ([]byte, error) {
						e.MarkStarted()
						return nil, errCrash // its lease is cut short: stalled
					})
					if !errors.Is(err, errCrash) {
						b.Errorf("setup: %v", err)
						return
					}
				}
			})
		}
		wg.Wait()
		shift.Advance(time.Second)
		b.StartTimer()
		start := time.Now()
		n, err := runner.Reconcile(ctx, quietConfig())
		seconds += time.Since(start).Seconds()
		require.NoError(b, err)
		require.Equal(b, stalled, n)
		resumed += float64(n)
	}
	b.ReportMetric(resumed/seconds, "resumed/s")
}
