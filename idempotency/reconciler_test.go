package idempotency_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/idempotency"
)

// dependency is a fake payment provider that deduplicates by downstream
// key: one effect per key however often it is called.
type dependency struct {
	mu      sync.Mutex
	calls   int
	effects map[string]string
}

func (d *dependency) charge(_ context.Context, key string) ([]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls++
	if d.effects == nil {
		d.effects = map[string]string{}
	}
	id, ok := d.effects[key]
	if !ok {
		id = fmt.Sprintf("ch_%d", len(d.effects)+1)
		d.effects[key] = id
	}
	return []byte(id), nil
}

func (d *dependency) count() (calls, effects int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls, len(d.effects)
}

// fleet is two instances (Runners) sharing one MemoryStore and one clock.
type fleet struct {
	clock *clock.Mock
	store *idempotency.MemoryStore
	heard chan idempotency.Observation
}

func newFleet(t *testing.T) *fleet {
	mock := clock.NewMock()
	mock.Set(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	return &fleet{clock: mock, store: idempotency.NewMemoryStore(mock), heard: make(chan idempotency.Observation, 100)}
}

func (f *fleet) runner() *idempotency.Runner {
	return idempotency.NewRunner(f.store, idempotency.WithClock(f.clock), idempotency.WithLease(testLease),
		idempotency.WithObserver(func(_ context.Context, o idempotency.Observation) {
			if o.Outcome == idempotency.OutcomeReconciled || o.Outcome == idempotency.OutcomeParked {
				f.heard <- o
			}
		}))
}

// quiet is a ReconcilerConfig whose log goes to buf.
func quiet(buf *bytes.Buffer) idempotency.ReconcilerConfig {
	return idempotency.ReconcilerConfig{Logger: slog.New(slog.NewTextHandler(buf, nil))}
}

// chargeWork charges the amount in its input through dep in a step, then
// waits for hang (a crash: it never completes) unless hang is nil.
func chargeWork(dep *dependency, stepped chan<- struct{}, hang <-chan struct{}) idempotency.Work {
	return func(ctx context.Context, e *idempotency.Execution) ([]byte, error) {
		id, err := e.Step(ctx, "charge", dep.charge)
		if err != nil {
			return nil, err
		}
		if stepped != nil {
			stepped <- struct{}{}
		}
		if hang != nil {
			<-hang
		}
		return []byte("order paid with " + string(id) + " for " + string(e.Input())), nil
	}
}

// A crash after the external step and before completion, with no retry:
// another instance's Reconciler completes the order once its lease ran out,
// the charge happened once, and the client that comes back late gets the
// completed outcome. The crashed execution can no longer write.
func TestReconcilerFinishesWhatCrashedAfterItsStep(t *testing.T) {
	f := newFleet(t)
	dep := &dependency{}
	stepped, hang := make(chan struct{}), make(chan struct{})
	crashed := f.runner()
	crashed.Register("charge", chargeWork(dep, nil, nil))
	req := idempotency.Request{Caller: "shop", Key: "order-1", Fingerprint: "v1:x", Work: "charge", Input: []byte("10 EUR")}
	lost := make(chan error, 1)
	go func() {
		_, err := crashed.Do(context.Background(), req, chargeWork(dep, stepped, hang))
		lost <- err
	}()
	<-stepped // charged; the process "dies" here (the work never completes)

	survivor := f.runner()
	survivor.Register("charge", chargeWork(dep, nil, nil))
	var log bytes.Buffer
	n, err := survivor.Reconcile(context.Background(), quiet(&log))
	require.NoError(t, err)
	assert.Zero(t, n, "nothing is stalled while the lease holds")

	f.clock.Add(testLease + time.Second)
	n, err = survivor.Reconcile(context.Background(), quiet(&log))
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	o := <-f.heard
	assert.Equal(t, idempotency.OutcomeReconciled, o.Outcome)
	assert.NoError(t, o.Err)
	assert.Equal(t, int64(2), o.Attempt)
	assert.Contains(t, log.String(), "resumed a stalled execution")

	res, err := survivor.Do(context.Background(), req, nil) // the client, late
	require.NoError(t, err)
	assert.True(t, res.Replayed)
	assert.Equal(t, "order paid with ch_1 for 10 EUR", string(res.Response))
	calls, effects := dep.count()
	assert.Equal(t, 1, calls, "the completed step was not called again")
	assert.Equal(t, 1, effects)

	close(hang) // the stalled execution wakes up: it is fenced out
	assert.ErrorIs(t, <-lost, idempotency.ErrLeaseLost)
}

// A crash after the execution began and before any step: it runs whole,
// once, under the Reconciler.
func TestReconcilerRunsWhatCrashedBeforeAnyStep(t *testing.T) {
	f := newFleet(t)
	dep := &dependency{}
	marked, hang := make(chan struct{}), make(chan struct{})
	crashed := f.runner()
	req := idempotency.Request{Caller: "shop", Key: "order-2", Work: "charge", Input: []byte("5 EUR")}
	lost := make(chan error, 1)
	go func() {
		_, err := crashed.Do(context.Background(), req, func(ctx context.Context, e *idempotency.Execution) ([]byte, error) {
			e.MarkStarted() // saved: the Reconciler knows it began
			marked <- struct{}{}
			<-hang
			return nil, errors.New("never gets here in time")
		})
		lost <- err
	}()
	<-marked
	survivor := f.runner()
	survivor.Register("charge", chargeWork(dep, nil, nil))
	f.clock.Add(testLease + time.Second)
	var log bytes.Buffer
	n, err := survivor.Reconcile(context.Background(), quiet(&log))
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	rec, err := f.store.Get(context.Background(), "shop", "order-2")
	require.NoError(t, err)
	assert.Equal(t, idempotency.StateCompleted, rec.State)
	assert.Equal(t, "order paid with ch_1 for 5 EUR", string(rec.Response))
	calls, _ := dep.count()
	assert.Equal(t, 1, calls)
	close(hang)
	assert.Error(t, <-lost)
	rec, err = f.store.Get(context.Background(), "shop", "order-2")
	require.NoError(t, err)
	assert.Equal(t, "order paid with ch_1 for 5 EUR", string(rec.Response), "the stalled execution changed nothing")
}

// An execution that never began is not the Reconciler's: nothing happened,
// and its client decides whether to send it again.
func TestReconcilerLeavesWhatNeverBegan(t *testing.T) {
	f := newFleet(t)
	hang := make(chan struct{})
	claimed := make(chan struct{})
	r := f.runner()
	r.Register("charge", chargeWork(&dependency{}, nil, nil))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = r.Do(context.Background(), idempotency.Request{Caller: "shop", Key: "k", Work: "charge"},
			func(context.Context, *idempotency.Execution) ([]byte, error) {
				close(claimed)
				<-hang
				return nil, nil
			})
	}()
	<-claimed
	f.clock.Add(testLease + time.Second)
	var log bytes.Buffer
	n, err := r.Reconcile(context.Background(), quiet(&log))
	require.NoError(t, err)
	assert.Zero(t, n)
	close(hang)
	<-done
}

// Two reconcilers and the client's retry race for one stalled execution:
// one of them runs it, the others are fenced out or told it is in
// progress, and the charge happens once.
func TestReconcilersAndARetryRaceForOneStalledExecution(t *testing.T) {
	for range 20 {
		f := newFleet(t)
		dep := &dependency{}
		var runs atomic.Int32
		work := func(ctx context.Context, e *idempotency.Execution) ([]byte, error) {
			runs.Add(1)
			if _, err := e.Step(ctx, "charge", dep.charge); err != nil {
				return nil, err
			}
			return []byte("paid"), nil
		}
		req := idempotency.Request{Caller: "shop", Key: "order-3", Work: "charge"}
		// The first execution began and stalled.
		stalled := stall(t, f, req)
		f.clock.Add(testLease + time.Second)

		instances := []*idempotency.Runner{f.runner(), f.runner(), f.runner()}
		for _, r := range instances {
			r.Register("charge", work)
		}
		var wg sync.WaitGroup
		var log bytes.Buffer
		var logMu sync.Mutex
		for _, r := range instances[:2] {
			wg.Go(func() {
				var buf bytes.Buffer
				_, err := r.Reconcile(context.Background(), quiet(&buf))
				assert.NoError(t, err)
				logMu.Lock()
				log.Write(buf.Bytes())
				logMu.Unlock()
			})
		}
		var retry error
		wg.Go(func() { _, retry = instances[2].Do(context.Background(), req, work) })
		wg.Wait()
		if retry != nil {
			assert.True(t, errors.As(retry, new(*idempotency.InProgressError)), "the retry lost the race: %v", retry)
		}
		assert.Equal(t, int32(1), runs.Load(), "one of them ran it")
		_, effects := dep.count()
		assert.Equal(t, 1, effects)
		rec, err := f.store.Get(context.Background(), "shop", "order-3")
		require.NoError(t, err)
		assert.Equal(t, idempotency.StateCompleted, rec.State)
		assert.ErrorIs(t, stalled(), idempotency.ErrLeaseLost)
	}
}

// stall starts an execution of req that marks its start, makes steps and
// hangs, as one whose process died; the returned func wakes it and returns
// its error.
func stall(t *testing.T, f *fleet, req idempotency.Request, steps ...string) (wake func() error) {
	t.Helper()
	marked, hang, lost := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		_, err := f.runner().Do(context.Background(), req, func(ctx context.Context, e *idempotency.Execution) ([]byte, error) {
			e.MarkStarted()
			for _, step := range steps {
				if _, err := e.Step(ctx, step, (&dependency{}).charge); err != nil {
					return nil, err
				}
			}
			close(marked)
			<-hang
			return []byte("too late"), nil
		})
		lost <- err
	}()
	<-marked
	var (
		once sync.Once
		err  error
	)
	wake = func() error {
		once.Do(func() { close(hang); err = <-lost })
		return err
	}
	t.Cleanup(func() { _ = wake() })
	return wake
}

// A work that fails every time is parked after MaxAttempts executions in
// all, with its reason, reported once; it is tried once per pass, never
// in a hot loop.
func TestReconcilerParksWhatKeepsFailing(t *testing.T) {
	f := newFleet(t)
	var runs atomic.Int32
	failing := func(ctx context.Context, e *idempotency.Execution) ([]byte, error) {
		runs.Add(1)
		return nil, errors.New("the ledger is read-only")
	}
	req := idempotency.Request{Caller: "shop", Key: "order-4", Work: "ledger"}
	stalled := stall(t, f, req)
	r := f.runner()
	r.Register("ledger", failing)
	cfg := idempotency.ReconcilerConfig{MaxAttempts: 3}
	var log bytes.Buffer
	cfg.Logger = slog.New(slog.NewTextHandler(&log, nil))
	for pass := 1; pass <= 4; pass++ {
		f.clock.Add(testLease + time.Second)
		n, err := r.Reconcile(context.Background(), cfg)
		require.NoError(t, err)
		if pass <= 3 {
			assert.Equal(t, pass/3, n, "a failed resumption is not counted; the parked one is (pass %d)", pass)
			assert.Equal(t, int32(min(pass, 2)), runs.Load(), "one run per pass, pass %d", pass)
		}
	}
	// Executions 2 and 3 ran and failed; the 4th takeover parked it.
	assert.Equal(t, int32(2), runs.Load())
	var reconciled, parked []idempotency.Observation
	for len(f.heard) > 0 {
		o := <-f.heard
		if o.Outcome == idempotency.OutcomeParked {
			parked = append(parked, o)
		} else {
			reconciled = append(reconciled, o)
		}
	}
	require.Len(t, parked, 1)
	assert.ErrorIs(t, parked[0].Err, idempotency.ErrNotResumable)
	assert.Len(t, reconciled, 2)
	for _, o := range reconciled {
		assert.Error(t, o.Err)
	}
	rec, err := f.store.Get(context.Background(), "shop", "order-4")
	require.NoError(t, err)
	assert.Contains(t, rec.Parked, "did not complete it")
	assert.Contains(t, log.String(), "parked a stalled execution")
	n, err := r.Reconcile(context.Background(), cfg)
	require.NoError(t, err)
	assert.Zero(t, n, "a parked execution is left to its client")
	assert.ErrorIs(t, stalled(), idempotency.ErrLeaseLost)
}

// An execution with nothing to resume it with (no Request.Work, or work
// nobody registered) is parked with that reason at once.
func TestReconcilerParksWhatItCannotResume(t *testing.T) {
	f := newFleet(t)
	// Without Request.Work only a step marks the execution as begun.
	noWork := stall(t, f, idempotency.Request{Caller: "shop", Key: "plain"}, "charge")
	unknown := stall(t, f, idempotency.Request{Caller: "shop", Key: "unknown", Work: "refund"})
	f.clock.Add(testLease + time.Second)
	var log bytes.Buffer
	n, err := f.runner().Reconcile(context.Background(), quiet(&log))
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	reasons := map[string]string{}
	for range 2 {
		o := <-f.heard
		assert.Equal(t, idempotency.OutcomeParked, o.Outcome)
		assert.ErrorIs(t, o.Err, idempotency.ErrNotResumable)
		reasons[o.Key] = o.Err.Error()
	}
	assert.Contains(t, reasons["plain"], "no stored request or work")
	assert.Contains(t, reasons["unknown"], `no work registered as "refund"`)
	assert.ErrorIs(t, noWork(), idempotency.ErrLeaseLost)
	assert.ErrorIs(t, unknown(), idempotency.ErrLeaseLost)
}

// A Reconciler given a Caller (a message consumer's, say) takes over only
// that caller's stalled executions: another service's, sharing the store,
// for whose work it has nothing registered, is neither parked as not
// resumable nor taken over (its Attempt unchanged), and its own caller's
// Reconciler resumes it later.
func TestReconcilerForOneCallerLeavesTheOthersAlone(t *testing.T) {
	f := newFleet(t)
	dep := &dependency{}
	mine := stall(t, f, idempotency.Request{Caller: "orders", Key: "order-1", Work: "charge", Input: []byte("3 EUR")})
	theirs := stall(t, f, idempotency.Request{Caller: "billing", Key: "invoice-1", Work: "invoice"})
	f.clock.Add(testLease + time.Second)
	before, err := f.store.Get(context.Background(), "billing", "invoice-1")
	require.NoError(t, err)

	consumer := f.runner()
	consumer.Register("charge", chargeWork(dep, nil, nil))
	var log bytes.Buffer
	cfg := quiet(&log)
	cfg.Caller = "orders"
	n, err := consumer.Reconcile(context.Background(), cfg)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "only the caller's own execution")
	o := <-f.heard
	assert.Equal(t, idempotency.OutcomeReconciled, o.Outcome)
	assert.Equal(t, "order-1", o.Key)
	assert.NoError(t, o.Err)
	rec, err := f.store.Get(context.Background(), "orders", "order-1")
	require.NoError(t, err)
	assert.Equal(t, idempotency.StateCompleted, rec.State)

	other, err := f.store.Get(context.Background(), "billing", "invoice-1")
	require.NoError(t, err)
	assert.Equal(t, idempotency.StateInProgress, other.State)
	assert.Empty(t, other.Parked, "another caller's execution is not parked")
	assert.Equal(t, before.Attempt, other.Attempt, "nor taken over")
	assert.Equal(t, before.LockedUntil, other.LockedUntil)
	parked, err := f.store.ListParked(context.Background(), "", "", 0)
	require.NoError(t, err)
	assert.Empty(t, parked)
	assert.Empty(t, f.heard, "nothing else was resumed or parked")
	assert.NotContains(t, log.String(), "invoice-1")
	n, err = consumer.Reconcile(context.Background(), cfg)
	require.NoError(t, err)
	assert.Zero(t, n, "a second pass leaves it alone too")

	// Its own service's Reconciler resumes it.
	billing := f.runner()
	billing.Register("invoice", func(context.Context, *idempotency.Execution) ([]byte, error) { return []byte("invoiced"), nil })
	cfg.Caller = "billing"
	n, err = billing.Reconcile(context.Background(), cfg)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	o = <-f.heard
	assert.Equal(t, idempotency.OutcomeReconciled, o.Outcome)
	assert.Equal(t, "invoice-1", o.Key)
	assert.Equal(t, before.Attempt+1, o.Attempt)
	assert.ErrorIs(t, mine(), idempotency.ErrLeaseLost)
	assert.ErrorIs(t, theirs(), idempotency.ErrLeaseLost)
}

// Behind the Middleware with WithResume, a stalled request is served again
// to the same handler chain of another instance, as the same caller with
// the same key, without its credentials; the stored response is what the
// client gets when it comes back.
func TestReconcilerServesAStoredRequestAgain(t *testing.T) {
	f := newFleet(t)
	dep := &dependency{}
	type seen struct{ method, uri, contentType, auth, caller, key, keyHeader, body string }
	saw := make(chan seen, 2)
	stepped, hang := make(chan struct{}), make(chan struct{})
	handler := func(crash bool) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			e := idempotency.FromContext(r.Context())
			body, _ := io.ReadAll(r.Body)
			saw <- seen{r.Method, r.URL.RequestURI(), r.Header.Get("Content-Type"), r.Header.Get("Authorization"),
				e.Caller(), e.Key(), r.Header.Get("Idempotency-Key"), string(body)}
			id, err := e.Step(r.Context(), "charge", dep.charge)
			if err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
			if crash {
				stepped <- struct{}{}
				<-hang
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, `{"charge":%q}`, id)
		})
	}
	opts := []idempotency.Option{idempotency.WithResume("orders", "Content-Type")}
	crashed := idempotency.Middleware(f.runner(), byTenant, opts...)(handler(true))
	request := func() *http.Request {
		r := httptest.NewRequest("POST", "/orders?currency=EUR", strings.NewReader(`{"amount":10}`))
		r.Header.Set("Idempotency-Key", `"order-5"`)
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Authorization", "Bearer secret")
		r.Header.Set(tenantHeader, "shop")
		return r
	}
	served := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		w := httptest.NewRecorder()
		crashed.ServeHTTP(w, request())
		served <- w
	}()
	<-stepped
	first := <-saw

	survivor := f.runner()
	resumed := idempotency.Middleware(survivor, byTenant, opts...)(handler(false))
	f.clock.Add(testLease + time.Second)
	var log bytes.Buffer
	n, err := survivor.Reconcile(context.Background(), quiet(&log))
	require.NoError(t, err)
	require.Equal(t, 1, n)
	again := <-saw
	assert.Equal(t, seen{"POST", "/orders?currency=EUR", "application/json", "Bearer secret", "shop", "order-5", `"order-5"`, `{"amount":10}`}, first)
	assert.Equal(t, seen{"POST", "/orders?currency=EUR", "application/json", "", "shop", "order-5", `"order-5"`, `{"amount":10}`}, again,
		"the same request, caller and key; never the credentials")

	w := httptest.NewRecorder()
	resumed.ServeHTTP(w, request()) // the client comes back
	assert.Equal(t, http.StatusCreated, w.Code)
	assert.Equal(t, `{"charge":"ch_1"}`, w.Body.String())
	assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
	_, effects := dep.count()
	assert.Equal(t, 1, effects)

	close(hang)
	late := <-served
	assert.Equal(t, http.StatusConflict, late.Code, "the stalled attempt lost its lease")
	rec, err := f.store.Get(context.Background(), "shop", "order-5")
	require.NoError(t, err)
	assert.Empty(t, rec.Resume, "the stored request goes when the record completes")
}

func TestWithResumeNeverStoresCredentials(t *testing.T) {
	for _, h := range []string{"Authorization", "cookie", "Proxy-Authorization"} {
		assert.Panics(t, func() { idempotency.WithResume("orders", h) }, h)
	}
	r := idempotency.NewRunner(nil)
	mw := idempotency.Middleware(r, idempotency.SingleTenant, idempotency.WithResume("orders"))
	mw(http.NotFoundHandler())
	assert.Panics(t, func() { mw(http.NotFoundHandler()) }, "one name per handler of a Runner")
}

// A started Reconciler makes a pass every interval and stops cleanly.
func TestStartReconciler(t *testing.T) {
	f := newFleet(t)
	dep := &dependency{}
	req := idempotency.Request{Caller: "shop", Key: "order-6", Work: "charge", Input: []byte("1 EUR")}
	stalled := stall(t, f, req)
	r := f.runner()
	r.Register("charge", chargeWork(dep, nil, nil))
	var log bytes.Buffer
	cfg := quiet(&log)
	cfg.Clock, cfg.Interval = f.clock, time.Minute
	rc := idempotency.StartReconciler(r, cfg)
	defer rc.Stop()
	// The lease ran out, and the first pass is due. The clock stops there
	// while the pass runs: moved on past the resumed execution's own lease
	// while it runs, it would end that execution. (It was moved on one
	// lease further, and the execution failed when the machine was slow.)
	f.clock.Add(time.Minute)
	o := <-f.heard
	assert.Equal(t, idempotency.OutcomeReconciled, o.Outcome)
	assert.NoError(t, o.Err)
	rc.Stop()
	rc.Stop()
	assert.ErrorIs(t, stalled(), idempotency.ErrLeaseLost)
}

// A registered work that panics when the Reconciler resumes it does not
// take the process down: the panic is recovered and reported as the
// failure of that execution, which is tried again on a later pass and
// parked once it reached MaxAttempts, as a work that returns an error is.
// (The panic used to escape the Reconciler's goroutine: exit status 2, on
// every instance that took the record over next.)
func TestReconcilerRecoversAPanickingWork(t *testing.T) {
	f := newFleet(t)
	var runs atomic.Int32
	explode := func(ctx context.Context, e *idempotency.Execution) ([]byte, error) {
		runs.Add(1)
		if e.Resumed() {
			panic("the ledger's client is nil")
		}
		return []byte("paid"), nil
	}
	req := idempotency.Request{Caller: "shop", Key: "order-7", Work: "ledger"}
	stalled := stall(t, f, req)
	r := f.runner()
	r.Register("ledger", explode)
	var log bytes.Buffer
	cfg := idempotency.ReconcilerConfig{MaxAttempts: 3, Logger: slog.New(slog.NewTextHandler(&log, nil))}
	for pass := 1; pass <= 3; pass++ {
		f.clock.Add(testLease + time.Second)
		assert.NotPanics(t, func() {
			_, err := r.Reconcile(context.Background(), cfg)
			assert.NoError(t, err)
		}, "pass %d", pass)
	}
	assert.Equal(t, int32(2), runs.Load(), "resumed on two passes, then parked")
	var outcomes []idempotency.Outcome
	for len(f.heard) > 0 {
		o := <-f.heard
		outcomes = append(outcomes, o.Outcome)
		if o.Outcome == idempotency.OutcomeReconciled {
			require.Error(t, o.Err)
			assert.Contains(t, o.Err.Error(), "the ledger's client is nil")
		}
	}
	assert.Equal(t, []idempotency.Outcome{idempotency.OutcomeReconciled, idempotency.OutcomeReconciled, idempotency.OutcomeParked}, outcomes)
	rec, err := f.store.Get(context.Background(), "shop", "order-7")
	require.NoError(t, err)
	assert.Contains(t, rec.Parked, "did not complete it")
	assert.Contains(t, log.String(), "panicked")
	assert.Contains(t, log.String(), "the ledger's client is nil")
	assert.ErrorIs(t, stalled(), idempotency.ErrLeaseLost)
}

// Reconcile counts the executions it resumed or parked, never those whose
// resumption failed. (It used to count every execution it took over.)
func TestReconcileCountsOnlyWhatItFinished(t *testing.T) {
	f := newFleet(t)
	dep := &dependency{}
	okReq := idempotency.Request{Caller: "shop", Key: "fine", Work: "charge", Input: []byte("2 EUR")}
	badReq := idempotency.Request{Caller: "shop", Key: "broken", Work: "ledger"}
	wakeOK, wakeBad := stall(t, f, okReq), stall(t, f, badReq)
	r := f.runner()
	r.Register("charge", chargeWork(dep, nil, nil))
	r.Register("ledger", func(context.Context, *idempotency.Execution) ([]byte, error) {
		return nil, errors.New("the ledger is read-only")
	})
	f.clock.Add(testLease + time.Second)
	var log bytes.Buffer
	n, err := r.Reconcile(context.Background(), quiet(&log))
	require.NoError(t, err)
	assert.Equal(t, 1, n, "one resumed, one failed")
	rec, err := f.store.Get(context.Background(), "shop", "fine")
	require.NoError(t, err)
	assert.Equal(t, idempotency.StateCompleted, rec.State)
	rec, err = f.store.Get(context.Background(), "shop", "broken")
	require.NoError(t, err)
	assert.Equal(t, idempotency.StateInProgress, rec.State, "left for the next pass or its client")
	assert.ErrorIs(t, wakeOK(), idempotency.ErrLeaseLost)
	assert.ErrorIs(t, wakeBad(), idempotency.ErrLeaseLost)
}

// slowAndFast is a registered work that returns at once, unless its input
// is "slow": then it waits for release.
func slowAndFast(release <-chan struct{}) idempotency.Work {
	return func(ctx context.Context, e *idempotency.Execution) ([]byte, error) {
		if string(e.Input()) == "slow" {
			<-release
		}
		return append([]byte("done "), e.Input()...), nil
	}
}

// completed reports whether the record of key completed.
func (f *fleet) completed(t *testing.T, key string) bool {
	t.Helper()
	rec, err := f.store.Get(context.Background(), "shop", key)
	require.NoError(t, err)
	return rec.State == idempotency.StateCompleted
}

// One slow execution holds back only its own room: with room for two, the
// pass resumes the third stalled execution as soon as the second ended,
// while the first (the oldest, so taken over first) still runs. (A pass
// used to take over a batch and wait for all of it, so one slow execution
// held back every other stalled one.)
func TestReconcilerSlowExecutionHoldsBackOnlyItsRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t)
		release := make(chan struct{})
		for _, key := range []string{"slow", "fast-1", "fast-2"} {
			stall(t, f, idempotency.Request{Caller: "shop", Key: key, Work: "job", Input: []byte(key)})
			f.clock.Add(time.Second) // their leases run out in this order
		}
		r := f.runner()
		r.Register("job", slowAndFast(release))
		f.clock.Add(testLease)
		var log bytes.Buffer
		cfg := quiet(&log)
		cfg.Batch = 2
		done := make(chan int, 1)
		go func() {
			n, err := r.Reconcile(context.Background(), cfg)
			assert.NoError(t, err)
			done <- n
		}()
		synctest.Wait()
		assert.False(t, f.completed(t, "slow"))
		assert.True(t, f.completed(t, "fast-1"))
		assert.True(t, f.completed(t, "fast-2"), "resumed while the slow one runs")
		close(release)
		assert.Equal(t, 3, <-done)
		assert.True(t, f.completed(t, "slow"))
	})
}

// A started Reconciler's pass does not wait for the executions it resumed:
// the next interval's pass takes over what stalled since, while a slow
// execution of the first still runs. (The first pass used to wait for it,
// and the ticks of the intervals meanwhile were dropped.)
func TestStartedReconcilerKeepsItsIntervalWhileAnExecutionIsSlow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t)
		release := make(chan struct{})
		stall(t, f, idempotency.Request{Caller: "shop", Key: "slow", Work: "job", Input: []byte("slow")})
		// The Reconciler's instance takes over with a lease that the slow
		// execution stays within.
		r := idempotency.NewRunner(f.store, idempotency.WithClock(f.clock), idempotency.WithLease(time.Hour))
		r.Register("job", slowAndFast(release))
		var log bytes.Buffer
		cfg := quiet(&log)
		cfg.Clock, cfg.Interval, cfg.Batch = f.clock, time.Minute, 2
		rc := idempotency.StartReconciler(r, cfg)
		defer rc.Stop()
		defer close(release)

		f.clock.Add(testLease + time.Minute) // the lease ran out, and a pass is due
		synctest.Wait()
		require.False(t, f.completed(t, "slow"))
		rec, err := f.store.Get(context.Background(), "shop", "slow")
		require.NoError(t, err)
		require.Equal(t, int64(2), rec.Attempt, "taken over")
		stall(t, f, idempotency.Request{Caller: "shop", Key: "later", Work: "job", Input: []byte("later")})
		f.clock.Add(testLease + time.Minute)
		synctest.Wait()
		assert.True(t, f.completed(t, "later"), "taken over by the next interval's pass")
		assert.False(t, f.completed(t, "slow"))
	})
}
