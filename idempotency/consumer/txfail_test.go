package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/consumer"
)

// txStore is a MemoryStore with a completion transaction whose statements
// fail while failures are queued: the first of them is the transaction's
// Err, as a real store's would be after a statement failed.
type txStore struct {
	*idempotency.MemoryStore
	mu       sync.Mutex
	failures []error
}

func (s *txStore) Begin(_ context.Context, f idempotency.Fence) (idempotency.Tx, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := &failingTx{s: s, f: f}
	if len(s.failures) > 0 {
		t.err, s.failures = s.failures[0], s.failures[1:]
	}
	return t, nil
}

// failingTx is txStore's transaction.
type failingTx struct {
	s   *txStore
	f   idempotency.Fence
	err error
}

type failingTxKey struct{}

func (t *failingTx) Context(ctx context.Context) context.Context {
	return context.WithValue(ctx, failingTxKey{}, t)
}
func (t *failingTx) Err() error { return t.err }
func (t *failingTx) Complete(ctx context.Context, response []byte) error {
	if t.err != nil {
		return fmt.Errorf("%w: %w", idempotency.ErrTxFailed, t.err)
	}
	return t.s.MemoryStore.Complete(ctx, t.f, response)
}
func (t *failingTx) Rollback(context.Context) error { return nil }

// write is the handler's local write through the transaction: it fails
// as the transaction's statement did.
func write(ctx context.Context) error {
	return ctx.Value(failingTxKey{}).(*failingTx).err
}

// A statement of the handler's transaction that failed because the store
// could not be reached (a reset connection) is an outage of the store,
// not a verdict on the message: the delivery is held and run again here,
// never given back to burn the broker's deliveries, and never terminated.
func TestTransactionLostWithTheStoreIsHeld(t *testing.T) {
	for _, last := range []bool{false, true} {
		t.Run(fmt.Sprintf("last=%v", last), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				reset := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
				store := &txStore{MemoryStore: idempotency.NewMemoryStore(nil), failures: []error{reset, reset}}
				var runs atomic.Int32
				c := newConsumer(t, idempotency.NewRunner(store), func(ctx context.Context, m *consumer.Message) error {
					runs.Add(1)
					return write(ctx)
				})
				d := newDelivery("k", 1, last)
				run(t, c, d)
				assert.Equal(t, "ack", d.settled, "held through the store's failures, then acked")
				assert.Equal(t, int32(3), runs.Load())
				rec, err := store.Get(context.Background(), "ship", "k")
				require.NoError(t, err)
				assert.Equal(t, idempotency.StateCompleted, rec.State)
				st := c.Stats()
				assert.Equal(t, uint64(0), st.Retried, "no delivery given back")
				assert.Equal(t, uint64(0), st.Terminated)
				assert.Equal(t, uint64(2), st.Held)
			})
		})
	}
}

// A statement that fails for good (the handler's own write breaks a
// constraint, say) is a verdict on the message, which is parked with the
// reason, so RetryParked can run it once mended: never terminated with
// nothing stored.
func TestTransactionFailedForGoodParks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		violation := retry.Permanent(errors.New("duplicate key value violates unique constraint"))
		store := &txStore{MemoryStore: idempotency.NewMemoryStore(nil), failures: []error{violation}}
		var runs atomic.Int32
		c := newConsumer(t, idempotency.NewRunner(store), func(ctx context.Context, m *consumer.Message) error {
			runs.Add(1)
			return write(ctx)
		})
		d := newDelivery("k", 1, false)
		run(t, c, d)
		assert.Equal(t, "term", d.settled, "parked messages are terminated at the broker")
		assert.Equal(t, int32(1), runs.Load())
		rec, err := store.Get(context.Background(), "ship", "k")
		require.NoError(t, err)
		assert.Contains(t, rec.Parked, "unique constraint", "parked with the reason")
		parked, err := c.ListParked(context.Background(), "", 10)
		require.NoError(t, err)
		require.Len(t, parked, 1)

		// Mended: RetryParked runs it from the stored message.
		require.NoError(t, c.RetryParked(context.Background(), "k"))
		assert.Equal(t, int32(2), runs.Load())
		rec, err = store.Get(context.Background(), "ship", "k")
		require.NoError(t, err)
		assert.Equal(t, idempotency.StateCompleted, rec.State)
	})
}

// A statement the store refused for now (a serialization failure, with
// the store reachable) is the handler's failure: the delivery is given
// back after a backoff, its redelivery counting toward the broker's
// limit, as for any transient failure of the handler.
func TestTransactionRefusedForNowIsGivenBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		conflict := errors.New("could not serialize access due to concurrent update")
		store := &txStore{MemoryStore: idempotency.NewMemoryStore(nil), failures: []error{conflict}}
		c := newConsumer(t, idempotency.NewRunner(store), func(ctx context.Context, m *consumer.Message) error {
			return write(ctx)
		})
		d := newDelivery("k", 1, false)
		run(t, c, d)
		assert.Equal(t, "nak", d.settled)
		assert.Equal(t, uint64(1), c.Stats().Retried)
		assert.Zero(t, c.Stats().Terminated)
	})
}
