package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/storetest"
)

// txStore is a fake TxStore: a MemoryStore plus a table of local writes,
// which a transaction buffers and applies only when its Complete succeeds.
type txStore struct {
	*idempotency.MemoryStore
	mu        sync.Mutex
	committed map[string]bool
}

func newTxStore(clk clock.Clock) *txStore {
	return &txStore{MemoryStore: idempotency.NewMemoryStore(clk), committed: map[string]bool{}}
}

type fakeTx struct {
	s      *txStore
	f      idempotency.Fence
	writes []string
	closed bool
	failed error
}

var errFakeStatement = errors.New("statement failed")

// failWrite makes a statement through the transaction ctx carries that fails.
func failWrite(ctx context.Context) error {
	tx, ok := ctx.Value(txKey{}).(*fakeTx)
	if !ok || tx.closed {
		return errors.New("no open transaction in context")
	}
	if tx.failed == nil {
		tx.failed = errFakeStatement
	}
	return errFakeStatement
}

func (tx *fakeTx) Err() error { return tx.failed }

type txKey struct{}

func (s *txStore) Begin(_ context.Context, f idempotency.Fence) (idempotency.Tx, error) {
	return &fakeTx{s: s, f: f}, nil
}

func (tx *fakeTx) Context(ctx context.Context) context.Context {
	return context.WithValue(ctx, txKey{}, tx)
}

func (tx *fakeTx) Complete(ctx context.Context, response []byte) error {
	if tx.closed {
		return errors.New("tx closed")
	}
	tx.closed = true
	if tx.failed != nil {
		return fmt.Errorf("%w: %w", idempotency.ErrTxFailed, tx.failed)
	}
	// The fake is not atomic across the two steps; good enough in one goroutine.
	if err := tx.s.MemoryStore.Complete(ctx, tx.f, response); err != nil {
		return err
	}
	tx.s.mu.Lock()
	defer tx.s.mu.Unlock()
	for _, w := range tx.writes {
		tx.s.committed[w] = true
	}
	return nil
}

func (tx *fakeTx) Rollback(context.Context) error {
	tx.closed = true
	tx.writes = nil
	return nil
}

// localWrite records a local write in the transaction ctx carries.
func localWrite(ctx context.Context, name string) error {
	tx, ok := ctx.Value(txKey{}).(*fakeTx)
	if !ok || tx.closed {
		return errors.New("no open transaction in context")
	}
	if tx.failed != nil {
		// As a database does once a statement failed: nothing more runs.
		return fmt.Errorf("%w: %w", idempotency.ErrTxFailed, tx.failed)
	}
	tx.writes = append(tx.writes, name)
	return nil
}

func (s *txStore) written(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.committed[name]
}

func TestFakeTxStoreConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		mock := clock.NewMock()
		s := newTxStore(mock)
		return storetest.Harness{
			Store: s, Advance: mock.Add, TxWrite: localWrite, TxFail: failWrite,
			TxWritten: func(_ *testing.T, name string) bool { return s.written(name) },
		}
	})
}

// The fault matrix on the fake TxStore: its statement failures stand for
// every database error of a transaction.
func TestFakeTxStoreFaults(t *testing.T) {
	t.Parallel()
	storetest.RunFaults(t, func(t *testing.T) (storetest.Harness, storetest.Faults) {
		mock := clock.NewMock()
		s := newTxStore(mock)
		return storetest.Harness{
				Store: s, Advance: mock.Add, TxWrite: localWrite,
				TxWritten: func(_ *testing.T, name string) bool { return s.written(name) },
			}, storetest.Faults{Tx: func(ctx context.Context, _ *testing.T, _ storetest.Fault) error {
				return failWrite(ctx)
			}}
	})
}

func TestDoRunsInsideTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mock := clock.NewMock()
	s := newTxStore(mock)
	r := idempotency.NewRunner(s, idempotency.WithClock(mock), idempotency.WithLease(testLease))

	t.Run("complete commits", func(t *testing.T) {
		_, err := r.Do(ctx, req("ok"), func(ctx context.Context, _ *idempotency.Execution) ([]byte, error) {
			return []byte("done"), localWrite(ctx, "ok")
		})
		require.NoError(t, err)
		assert.True(t, s.written("ok"))
	})
	t.Run("error rolls back", func(t *testing.T) {
		_, err := r.Do(ctx, req("err"), func(ctx context.Context, _ *idempotency.Execution) ([]byte, error) {
			require.NoError(t, localWrite(ctx, "err"))
			return nil, errors.New("failed")
		})
		require.Error(t, err)
		assert.False(t, s.written("err"))
	})
	t.Run("panic rolls back", func(t *testing.T) {
		require.Panics(t, func() {
			_, _ = r.Do(ctx, req("panic"), func(ctx context.Context, _ *idempotency.Execution) ([]byte, error) {
				require.NoError(t, localWrite(ctx, "panic"))
				panic("boom")
			})
		})
		assert.False(t, s.written("panic"))
	})
	t.Run("Abort rolls back and stores", func(t *testing.T) {
		res, err := r.Do(ctx, req("abort"), func(ctx context.Context, _ *idempotency.Execution) ([]byte, error) {
			require.NoError(t, localWrite(ctx, "abort"))
			return nil, idempotency.Abort([]byte("declined"), nil)
		})
		require.ErrorIs(t, err, idempotency.ErrAborted)
		assert.Equal(t, "declined", string(res.Response))
		assert.False(t, s.written("abort"))
	})
	t.Run("lost lease rolls back", func(t *testing.T) {
		inside := make(chan struct{})
		release := make(chan struct{})
		done := make(chan error)
		go func() {
			_, err := r.Do(ctx, req("lost"), func(ctx context.Context, _ *idempotency.Execution) ([]byte, error) {
				if err := localWrite(ctx, "stale"); err != nil {
					return nil, err
				}
				close(inside)
				<-release
				return []byte("stale"), nil
			})
			done <- err
		}()
		<-inside
		mock.Add(testLease + time.Second)
		res, err := r.Do(ctx, req("lost"), func(ctx context.Context, _ *idempotency.Execution) ([]byte, error) {
			return []byte("fresh"), localWrite(ctx, "fresh")
		})
		require.NoError(t, err)
		close(release)
		require.ErrorIs(t, <-done, idempotency.ErrLeaseLost)
		assert.False(t, s.written("stale"))
		assert.True(t, s.written("fresh"))
		assert.Equal(t, "fresh", string(res.Response))
	})
}

func TestMiddlewareHandlerGetsTransaction(t *testing.T) {
	t.Parallel()
	mock := clock.NewMock()
	s := newTxStore(mock)
	h := idempotency.Middleware(idempotency.NewRunner(s, idempotency.WithClock(mock)), idempotency.SingleTenant)(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			require.NoError(t, localWrite(r.Context(), r.Header.Get("Idempotency-Key")))
			switch r.Header.Get("Idempotency-Key") {
			case "panic":
				panic("boom")
			case "reject":
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			w.WriteHeader(http.StatusCreated)
		}))
	require.Equal(t, http.StatusCreated, do(h, "x", withKey("ok")).Code)
	assert.True(t, s.written("ok"))
	require.Equal(t, http.StatusBadRequest, do(h, "x", withKey("reject")).Code)
	assert.False(t, s.written("reject"), "a rejection rolls back local writes")
	assert.Equal(t, 1, s.Len(), "and frees the key: only \"ok\" is stored")
	require.Panics(t, func() { do(h, "x", withKey("panic")) })
	assert.False(t, s.written("panic"), "a panic rolls back local writes")
	problem(t, do(h, "x", withKey("panic")), http.StatusInternalServerError)
}

// A transaction in which a statement failed never commits, and the attempt
// fails whatever the work made of it: an outcome, an Abort or a panic is not
// stored, the key is freed, and Do's error says the retry is safe.
func TestFailedStatementFailsTheAttempt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mock := clock.NewMock()
	s := newTxStore(mock)
	r := idempotency.NewRunner(s, idempotency.WithClock(mock), idempotency.WithLease(testLease))
	works := map[string]idempotency.Work{
		"outcome": func(ctx context.Context, _ *idempotency.Execution) ([]byte, error) {
			return []byte("500 after the failure"), nil
		},
		"abort": func(ctx context.Context, _ *idempotency.Execution) ([]byte, error) {
			return nil, idempotency.Abort([]byte("stored anyway?"), errors.New("declined"))
		},
	}
	for name, then := range works {
		_, err := r.Do(ctx, req(name), func(ctx context.Context, x *idempotency.Execution) ([]byte, error) {
			require.NoError(t, localWrite(ctx, name+"-before"))
			require.Error(t, failWrite(ctx))
			return then(ctx, x)
		})
		require.ErrorIs(t, err, idempotency.ErrTxFailed, name)
		require.ErrorIs(t, err, errFakeStatement, name)
		assert.False(t, s.written(name+"-before"), name)
		_, gerr := s.Get(ctx, "consumer", name)
		require.ErrorIs(t, gerr, idempotency.ErrNotFound, "%s: the key is free", name)
	}
	require.Panics(t, func() {
		_, _ = r.Do(ctx, req("panic"), func(ctx context.Context, _ *idempotency.Execution) ([]byte, error) {
			require.Error(t, failWrite(ctx))
			panic("boom")
		})
	})
	_, err := s.Get(ctx, "consumer", "panic")
	require.ErrorIs(t, err, idempotency.ErrNotFound)

	// After a recovery point the key is left for the retry to resume at once.
	_, err = r.Do(ctx, req("step"), func(ctx context.Context, x *idempotency.Execution) ([]byte, error) {
		if _, err := x.Step(ctx, "charge", func(context.Context, string) ([]byte, error) { return []byte("ch_1"), nil }); err != nil {
			return nil, err
		}
		require.Error(t, failWrite(ctx))
		return []byte("half"), nil
	})
	require.ErrorIs(t, err, idempotency.ErrTxFailed)
	mock.Add(time.Millisecond) // past the cut-short lease
	res, err := r.Do(ctx, req("step"), func(ctx context.Context, x *idempotency.Execution) ([]byte, error) {
		assert.True(t, x.Resumed())
		charge, err := x.Step(ctx, "charge", func(context.Context, string) ([]byte, error) {
			t.Error("the completed step ran again")
			return nil, nil
		})
		return charge, err
	})
	require.NoError(t, err)
	assert.Equal(t, "ch_1", string(res.Response))

	// A rejection is still a rejection.
	_, err = r.Do(ctx, req("reject"), func(ctx context.Context, _ *idempotency.Execution) ([]byte, error) {
		require.Error(t, failWrite(ctx))
		return nil, idempotency.Reject(errors.New("bad input"))
	})
	require.ErrorIs(t, err, idempotency.ErrRejected)
	require.NotErrorIs(t, err, idempotency.ErrTxFailed)
}

// Behind the Middleware, the client of an attempt whose transaction failed
// gets a problem that says a retry is safe, and the retry runs cleanly.
func TestMiddlewareFailedTransactionIsRetryable(t *testing.T) {
	t.Parallel()
	mock := clock.NewMock()
	s := newTxStore(mock)
	var runs atomic.Int64
	h := idempotency.Middleware(idempotency.NewRunner(s, idempotency.WithClock(mock)), idempotency.SingleTenant)(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			idempotency.MarkStarted(r.Context())
			require.NoError(t, localWrite(r.Context(), "debit"))
			if runs.Add(1) == 1 {
				if err := failWrite(r.Context()); err != nil {
					http.Error(w, err.Error(), http.StatusInternalServerError)
					return
				}
			}
			require.NoError(t, localWrite(r.Context(), "credit"))
			w.WriteHeader(http.StatusCreated)
		}))
	w := do(h, "x", withKey("k"))
	p := problem(t, w, http.StatusServiceUnavailable)
	assert.Equal(t, "transaction_rolled_back", p.Code)
	assert.Equal(t, "1", w.Header().Get("Retry-After"))
	assert.False(t, s.written("debit"))
	assert.Zero(t, s.Len(), "nothing stored")
	require.Equal(t, http.StatusCreated, do(h, "x", withKey("k")).Code)
	assert.True(t, s.written("debit"))
	assert.True(t, s.written("credit"))
}
