package consumer_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/consumer"
)

// failingComplete is a MemoryStore whose next Complete fails.
type failingComplete struct {
	*idempotency.MemoryStore
	fail atomic.Bool
}

func (s *failingComplete) Complete(ctx context.Context, f idempotency.Fence, response []byte) error {
	if s.fail.CompareAndSwap(true, false) {
		return errors.New("store unreachable")
	}
	return s.MemoryStore.Complete(ctx, f, response)
}

// An Abort whose outcome could not be stored is not acked: the delivery
// is held (the store failed) and run again here, and acked once the
// Abort's outcome is stored.
func TestAbortNotStoredNotAcked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &failingComplete{MemoryStore: idempotency.NewMemoryStore(nil)}
		store.fail.Store(true)
		runner := idempotency.NewRunner(store)
		var runs atomic.Int32
		c := newConsumer(t, runner, func(context.Context, *consumer.Message) error {
			runs.Add(1)
			return idempotency.Abort(nil, errors.New("out of stock"))
		})
		d := newDelivery("k", 1, false)
		d.onAck = func() {
			rec, err := store.Get(context.Background(), "ship", "k")
			if assert.NoError(t, err) {
				assert.Equal(t, idempotency.StateCompleted, rec.State, "acked only once stored")
			}
		}
		run(t, c, d)
		assert.Equal(t, "ack", d.settled)
		assert.Equal(t, int32(2), runs.Load())
		st := c.Stats()
		assert.Equal(t, uint64(1), st.Executed)
		assert.Equal(t, uint64(1), st.Held)
	})
}
