package idempotency_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
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
}

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
			Store: s, Advance: mock.Add, TxWrite: localWrite,
			TxWritten: func(_ *testing.T, name string) bool { return s.written(name) },
		}
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
