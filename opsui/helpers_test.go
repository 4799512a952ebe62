package opsui_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/opsui"
)

const lease = 30 * time.Second

// world is a Runner on a memory store with a mock clock, and the page on it.
type world struct {
	clock  *clock.Mock
	store  *idempotency.MemoryStore
	runner *idempotency.Runner
	// broken makes the registered work "ledger" fail while set.
	mu     sync.Mutex
	broken bool
}

func newWorld(t testing.TB) *world {
	w := &world{clock: clock.NewMock()}
	w.clock.Set(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	w.store = idempotency.NewMemoryStore(w.clock)
	w.runner = idempotency.NewRunner(w.store, idempotency.WithClock(w.clock), idempotency.WithLease(lease))
	w.runner.Register("ledger", func(ctx context.Context, e *idempotency.Execution) ([]byte, error) {
		if _, err := e.Step(ctx, "charge", func(context.Context, string) ([]byte, error) {
			return []byte(`{"charge":"ch_1","card_number":"4242424242424242"}`), nil
		}); err != nil {
			return nil, err
		}
		w.mu.Lock()
		broken := w.broken
		w.mu.Unlock()
		if broken {
			return nil, idempotency.Park(errors.New("ledger refused: Authorization: Bearer sk_live_abc123"))
		}
		return []byte("paid " + string(e.Input())), nil
	})
	return w
}

// park runs the ledger work for key while it is broken: the execution is
// parked after its charge step.
func (w *world) park(t *testing.T, key string) {
	t.Helper()
	w.mu.Lock()
	w.broken = true
	w.mu.Unlock()
	defer func() { w.mu.Lock(); w.broken = false; w.mu.Unlock() }()
	_, err := w.runner.Do(context.Background(), idempotency.Request{Caller: "shop", Key: key, Work: "ledger", Input: []byte("7 EUR")}, nil)
	require.ErrorIs(t, err, idempotency.ErrParked)
}

// stall begins the ledger work for key and leaves it hanging past its
// lease; the hung execution ends when the test does.
func (w *world) stall(t *testing.T, key string) {
	t.Helper()
	started, hang, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		_, _ = w.runner.Do(context.Background(), idempotency.Request{Caller: "shop", Key: key, Work: "ledger", Input: []byte("9 EUR")},
			func(ctx context.Context, e *idempotency.Execution) ([]byte, error) {
				if err := e.SaveStarted(ctx); err != nil {
					return nil, err
				}
				close(started)
				<-hang
				return nil, errors.New("crashed")
			})
	}()
	<-started
	w.clock.Add(lease + time.Second)
	t.Cleanup(func() { close(hang); <-done })
}

// complete runs the ledger work for key to its end.
func (w *world) complete(t testing.TB, caller, key string) {
	t.Helper()
	_, err := w.runner.Do(context.Background(), idempotency.Request{Caller: caller, Key: key, Work: "ledger", Input: []byte("1 EUR")}, nil)
	require.NoError(t, err)
}

func allowAll(*http.Request, opsui.Action) error { return nil }

func (w *world) page(opts opsui.Config) *opsui.Handler {
	opts.Runner = w.runner
	return opsui.New(opts)
}

// get asks h for target with the given Accept header.
func get(h http.Handler, target, accept string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, target, nil)
	if accept != "" {
		r.Header.Set("Accept", accept)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

// post sends an action form to h, with extra request headers.
func post(h http.Handler, action, caller, key string, header map[string]string) *httptest.ResponseRecorder {
	form := url.Values{"caller": {caller}, "key": {key}}
	r := httptest.NewRequest(http.MethodPost, opsui.DefaultPath+"/execution/"+action, strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range header {
		r.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

func decode[T any](t *testing.T, rec *httptest.ResponseRecorder) T {
	t.Helper()
	var v T
	b, _ := io.ReadAll(rec.Body)
	require.NoError(t, json.Unmarshal(b, &v), "body: %s", b)
	return v
}

func requireProblem(t *testing.T, rec *httptest.ResponseRecorder, status int, code string) opsui.Problem {
	t.Helper()
	require.Equal(t, status, rec.Code, rec.Body.String())
	require.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
	p := decode[opsui.Problem](t, rec)
	require.Equal(t, status, p.Status)
	require.Equal(t, code, p.Code)
	return p
}
