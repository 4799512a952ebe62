package consumer_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/consumer"
)

// The broker's ack wait is shorter than the lease: an earlier delivery's
// consumer claims the message and is killed, and the broker's last
// delivery reaches another consumer while that lease still runs. Its
// claim cannot take the execution over, but it hands the message to the
// store (the started mark, on the record the dead consumer holds), so the
// consumer, stopping while it holds the delivery, acks it as the store's;
// once the lease runs out a Reconciler runs it, once. (Before, the claim
// wrote nothing, the stopping consumer terminated the delivery, and the
// record, never marked started, was run by nothing: the message was lost.)
func TestLastDeliveryHeldBehindADeadClaimIsKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
		store := idempotency.NewMemoryStore(clock.New())
		const lease = 30 * time.Second
		dead := make(chan struct{})
		first, err := consumer.New(consumer.Config{Runner: idempotency.NewRunner(store, idempotency.WithLease(lease)),
			Name: "ship", Logger: quiet,
			Clock: clock.NewMock(), // stopped: no keep-alive, as after a kill
			Handler: func(context.Context, *consumer.Message) error {
				<-dead // the process is killed here
				return errors.New("killed")
			}})
		require.NoError(t, err)
		runner := idempotency.NewRunner(store, idempotency.WithLease(lease))
		var effects atomic.Int32
		last, err := consumer.New(consumer.Config{Runner: runner, Name: "ship", Logger: quiet, StopGrace: 5 * time.Second,
			Handler: func(context.Context, *consumer.Message) error {
				effects.Add(1)
				return nil
			}})
		require.NoError(t, err)

		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		firstDone := make(chan error, 1)
		go func() { firstDone <- first.Run(ctx, &source{ds: []*delivery{newDelivery("k", 1, false)}}) }()
		synctest.Wait() // the first delivery claimed the message; its consumer is dead

		lastCtx, stop := context.WithCancel(context.Background())
		lastDone := make(chan error, 1)
		d := newDelivery("k", 3, true)
		go func() { lastDone <- last.Run(lastCtx, &source{ds: []*delivery{d}}) }()
		synctest.Wait()
		require.GreaterOrEqual(t, last.Stats().Held, uint64(1), "the last delivery is held behind the live lease")
		stop() // the consumer holding the last delivery stops
		require.ErrorIs(t, <-lastDone, context.Canceled)
		<-d.done
		assert.Equal(t, "ack", d.settled, "the store owns the last delivery (%s)", d.reason)

		time.Sleep(lease) // the dead consumer's lease runs out
		n, err := runner.Reconcile(context.Background(), idempotency.ReconcilerConfig{Logger: quiet})
		require.NoError(t, err)
		assert.Equal(t, 1, n, "a Reconciler runs the message")
		assert.Equal(t, int32(1), effects.Load())

		close(dead) // end of the test: the dead consumer's handler returns
		cancel()
		require.ErrorIs(t, <-firstDone, context.Canceled)
		rec, err := store.Get(context.Background(), "ship", "k")
		require.NoError(t, err)
		assert.Equal(t, idempotency.StateCompleted, rec.State)
	})
}
