package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	retry "github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/consumer"
)

var errDown = fmt.Errorf("the warehouse: %w", retry.ErrDependencyDown)

// A consumer stopped during an outage gives back the deliveries the
// broker will make again and hands its last ones to the store (claimed
// with the message and marked started, then acked, never given back, and
// never parked): the next consumer's own Reconciler finishes them within
// one interval, once, without an operator.
func TestStopHandsLastDeliveriesToTheNextConsumer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		runner := idempotency.NewRunner(nil)
		var up atomic.Bool
		var effects atomic.Int32
		handler := func(context.Context, *consumer.Message) error {
			if !up.Load() {
				return errDown
			}
			effects.Add(1)
			return nil
		}
		c := newConsumer(t, runner, handler)
		last, notLast := newDelivery("last", 5, true), newDelivery("again", 2, false)
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- c.Run(ctx, &source{ds: []*delivery{last, notLast}}) }()
		for c.Stats().Held < 2 {
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
		require.ErrorIs(t, <-errc, context.Canceled)
		assert.Equal(t, "ack", last.settled, "the store owns it")
		assert.Equal(t, "nak", notLast.settled)
		assert.Equal(t, uint64(1), c.Stats().HandedOver)
		assert.Zero(t, c.Stats().Parked)
		parked, err := c.ListParked(context.Background(), "", 0)
		require.NoError(t, err)
		assert.Empty(t, parked, "nothing waits for an operator")
		rec, err := runner.Store().Get(context.Background(), "ship", "last")
		require.NoError(t, err)
		assert.NotEmpty(t, rec.RecoveryPoint, "marked started: a Reconciler's")

		// The next consumer (a rolling restart), its dependency up: its
		// Reconciler runs the message within one interval.
		up.Store(true)
		next := newConsumer(t, runner, handler)
		ctx, cancel = context.WithCancel(context.Background())
		go func() { errc <- next.Run(ctx, &source{}) }()
		time.Sleep(consumer.DefaultReconcileInterval)
		synctest.Wait()
		assert.Equal(t, int32(1), effects.Load())
		rec, err = runner.Store().Get(context.Background(), "ship", "last")
		require.NoError(t, err)
		assert.Equal(t, idempotency.StateCompleted, rec.State)
		cancel()
		require.ErrorIs(t, <-errc, context.Canceled)

		again := newDelivery("last", 1, false) // a duplicate
		run(t, next, again)
		assert.Equal(t, "ack", again.settled)
		assert.Equal(t, int32(1), effects.Load())
	})
}

// A stopping consumer waits for a running handler up to its grace period
// and settles its delivery; past the grace period Run returns without it.
func TestStopWaitsForHandlersWithinGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		runner := idempotency.NewRunner(nil)
		release := make(chan time.Duration)
		c, err := consumer.New(consumer.Config{Runner: runner, Name: "ship", StopGrace: 10 * time.Second,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Handler: func(context.Context, *consumer.Message) error {
				time.Sleep(<-release)
				return nil
			}})
		require.NoError(t, err)
		for _, took := range []time.Duration{9 * time.Second, 11 * time.Second} {
			d := newDelivery("k"+took.String(), 1, false)
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() { errc <- c.Run(ctx, &source{ds: []*delivery{d}}) }()
			release <- took
			cancel()
			start := time.Now()
			require.ErrorIs(t, <-errc, context.Canceled)
			if took < 10*time.Second {
				assert.Equal(t, took, time.Since(start), "Run waited for the handler")
				assert.Equal(t, "ack", d.settled)
			} else {
				assert.Equal(t, 10*time.Second, time.Since(start), "Run returned after the grace period")
				select {
				case <-d.done:
					t.Error("settled before the handler returned")
				default:
				}
				<-d.done
				assert.Equal(t, "ack", d.settled, "the handler went on and settled its delivery")
			}
		}
	})
}

// The broker's last delivery is stored with its claim and marked started
// before the handler runs: a consumer that dies mid-handler (here: its
// handler never returns, and nothing renews its lease) leaves an
// execution that a Reconciler finishes from the stored message.
func TestLastDeliveryResumedByReconcilerAfterAKill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		runner := idempotency.NewRunner(nil, idempotency.WithLease(3*time.Second))
		dead := make(chan struct{})
		var effects atomic.Int32
		var body atomic.Value
		c, err := consumer.New(consumer.Config{Runner: runner, Name: "ship",
			Clock:  clock.NewMock(), // stopped: no keep-alive, as after a kill
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Handler: func(_ context.Context, m *consumer.Message) error {
				if m.Delivery > 0 {
					<-dead // the process is killed here
					return errors.New("killed")
				}
				body.Store(string(m.Body))
				effects.Add(1)
				return nil
			}})
		require.NoError(t, err)
		d := newDelivery("k", 3, true)
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- c.Run(ctx, &source{ds: []*delivery{d}}) }()
		synctest.Wait()
		rec, err := runner.Store().Get(context.Background(), "ship", "k")
		require.NoError(t, err)
		assert.NotEmpty(t, rec.RecoveryPoint, "marked started before the handler")

		time.Sleep(4 * time.Second) // past the lease
		n, err := runner.Reconcile(context.Background(), idempotency.ReconcilerConfig{})
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		assert.Equal(t, int32(1), effects.Load())
		assert.Equal(t, "body of k", body.Load())

		close(dead) // end of the test: the abandoned handler returns
		cancel()
		require.ErrorIs(t, <-errc, context.Canceled)
		assert.Equal(t, "ack", d.settled, "the stopping consumer finds it completed")
		assert.Equal(t, int32(1), effects.Load())
	})
}
