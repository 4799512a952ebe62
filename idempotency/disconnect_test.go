package idempotency_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/idempotency"
)

// ledger records the effects of a transfer, in order.
type ledger struct {
	mu      sync.Mutex
	effects []string
}

func (l *ledger) add(effect string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.effects = append(l.effects, effect)
}

func (l *ledger) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.effects...)
}

// A client that disconnects while the handler runs does not decide the
// outcome: the handler's context does not end with the client's
// connection, the transfer completes (debit and credit), its response is
// stored, and the client's retry gets it.
func TestClientDisconnectDoesNotCutTheHandlerShort(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var l ledger
	entered := make(chan struct{}, 1)
	clientGone := make(chan struct{})
	transfer := e.handle(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		idempotency.MarkStarted(ctx)
		l.add("debit")
		entered <- struct{}{}
		<-clientGone
		// The credit, as a store call would, fails on a done context.
		if err := ctx.Err(); err != nil {
			http.Error(w, "credit failed: "+err.Error(), http.StatusInternalServerError)
			return
		}
		l.add("credit")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "transferred")
	}))
	var first sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		first.Do(func() {
			// The server's own request context ends when it sees the client go
			// (the handler below cannot return before that).
			go func() { <-r.Context().Done(); close(clientGone) }()
		})
		transfer.ServeHTTP(w, r)
	}))
	defer srv.Close()
	client := srv.Client()
	defer client.CloseIdleConnections()
	send := func(ctx context.Context) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/transfers", strings.NewReader(`{"amount":100}`))
		require.NoError(t, err)
		req.Header.Set("Idempotency-Key", `"transfer-1"`)
		return client.Do(req)
	}

	ctx, cancel := context.WithCancel(context.Background())
	failed := make(chan error, 1)
	go func() {
		res, err := send(ctx)
		if err == nil {
			_ = res.Body.Close()
		}
		failed <- err
	}()
	<-entered
	cancel() // the client goes away mid-handler
	require.Error(t, <-failed)

	// The retry gets the completed transfer (it waits out the first
	// attempt if that is still finishing).
	for {
		res, err := send(context.Background())
		require.NoError(t, err)
		body, err := io.ReadAll(res.Body)
		_ = res.Body.Close()
		require.NoError(t, err)
		if res.StatusCode == http.StatusConflict {
			e.clock.Add(time.Second) // the in-progress hint, on the mock clock
			continue
		}
		require.Equal(t, http.StatusCreated, res.StatusCode, "%s", body)
		require.Equal(t, "transferred", string(body))
		require.Equal(t, "true", res.Header.Get("Idempotent-Replayed"))
		break
	}
	assert.Equal(t, []string{"debit", "credit"}, l.list(), "one whole transfer")
}

type ctxKey struct{}

// The Work's context keeps the values of Do's context, but not its
// cancellation: cancelling it once the work runs does not stop the work.
func TestWorkContextOutlivesTheCaller(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "request value"))
	res, err := e.runner.Do(ctx, req("k"), func(wctx context.Context, _ *idempotency.Execution) ([]byte, error) {
		cancel()
		if err := wctx.Err(); err != nil {
			return nil, err
		}
		return []byte(wctx.Value(ctxKey{}).(string)), nil
	})
	require.NoError(t, err)
	assert.Equal(t, "request value", string(res.Response))
	res, err = e.runner.Do(context.Background(), req("k"), nil)
	require.NoError(t, err)
	assert.True(t, res.Replayed)
}

// The Work's context ends with its lease: its deadline is the end of the
// lease, every recovery point and Extend moves it on, and it ends
// (context.DeadlineExceeded) once the lease runs out, and (context.Canceled)
// when the work returns.
func TestWorkContextFollowsTheLease(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	start := e.clock.Now()
	step := make(chan struct{})
	kept := make(chan context.Context, 1)
	done := make(chan error)
	go func() {
		_, err := e.runner.Do(ctx, req("k"), func(wctx context.Context, x *idempotency.Execution) ([]byte, error) {
			derived, cancel := context.WithCancel(wctx)
			defer cancel()
			dl, ok := wctx.Deadline()
			assert.True(t, ok)
			assert.Equal(t, start.Add(testLease), dl, "the lease's end")
			step <- struct{}{}
			<-step // the clock is near the lease's end
			require.NoError(t, wctx.Err())
			require.NoError(t, x.Extend(wctx))
			dl, _ = wctx.Deadline()
			assert.Equal(t, start.Add(testLease-time.Second+testLease), dl, "moved on by Extend")
			if _, err := x.Step(wctx, "charge", func(context.Context, string) ([]byte, error) { return nil, nil }); err != nil {
				return nil, err
			}
			step <- struct{}{}
			<-step // past the first lease's end, within the renewed one
			require.NoError(t, wctx.Err())
			step <- struct{}{}
			<-step           // past the renewed lease's end
			<-derived.Done() // a context derived from it ends too
			assert.ErrorIs(t, context.Cause(derived), idempotency.ErrLeaseExpired)
			<-wctx.Done()
			assert.ErrorIs(t, wctx.Err(), context.DeadlineExceeded)
			assert.ErrorIs(t, context.Cause(wctx), idempotency.ErrLeaseExpired)
			return nil, wctx.Err()
		})
		done <- err
	}()
	<-step
	e.clock.Add(testLease - time.Second)
	step <- struct{}{}
	<-step
	e.clock.Add(2 * time.Second)
	step <- struct{}{}
	<-step
	e.clock.Add(testLease)
	step <- struct{}{}
	require.ErrorIs(t, <-done, context.DeadlineExceeded)

	// A goroutine the work left behind sees its context end when it returns.
	_, err := e.runner.Do(ctx, req("other"), func(wctx context.Context, _ *idempotency.Execution) ([]byte, error) {
		kept <- wctx
		return nil, nil
	})
	require.NoError(t, err)
	left := <-kept
	<-left.Done()
	assert.ErrorIs(t, left.Err(), context.Canceled)
}
