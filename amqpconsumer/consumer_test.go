package amqpconsumer_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	retry "github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/amqpconsumer"
	"github.com/exactlyonce/retry/amqpconsumer/internal/amqptest"
	"github.com/exactlyonce/retry/backoff"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/consumer"
)

var errFlaky = errors.New("the warehouse answered 503")

// Every message is handled once and acked after its outcome is stored;
// one a publisher sent twice with the same message_id, and one the store
// had completed before, are acked without running.
func TestEachMessageOnceAndDuplicatesAcked(t *testing.T) {
	conn := amqptest.Connect(t)
	queue, _ := amqptest.NewQueue(t, conn, 0)
	ch := amqptest.Channel(t, conn)
	runner := idempotency.NewRunner(nil)
	var fx amqptest.Effects
	c, err := amqpconsumer.New(conn, queue, amqptest.Config(runner, func(ctx context.Context, m *consumer.Message) error {
		fx.Add(m.Key)
		return nil
	}))
	require.NoError(t, err)
	_, err = runner.Do(context.Background(), idempotency.Request{Caller: c.Caller(), Key: amqptest.KeyOf(0),
		Fingerprint: idempotency.Fingerprint("MESSAGE", queue, "", []byte(amqptest.BodyOf(0)))},
		func(context.Context, *idempotency.Execution) ([]byte, error) { return nil, nil })
	require.NoError(t, err)
	const n = 30
	for i := range n {
		amqptest.Publish(t, ch, queue, amqptest.KeyOf(i), amqptest.BodyOf(i))
	}
	amqptest.Publish(t, ch, queue, amqptest.KeyOf(7), amqptest.BodyOf(7)) // the publisher's retry
	amqptest.Start(t, c)
	amqptest.Eventually(t, "every message handled", func() bool { st := c.Stats(); return st.Executed+st.Duplicates == n+1 })
	all, distinct := fx.Total()
	assert.Equal(t, n-1, all)
	assert.Equal(t, n-1, distinct)
	assert.Equal(t, 1, fx.Count(amqptest.KeyOf(7)))
	assert.Equal(t, uint64(2), c.Stats().Duplicates)
	assert.Zero(t, amqptest.Count(t, conn, queue))
}

// A transient failure is redelivered (held for a full-jitter backoff, then
// requeued) until the handler succeeds.
func TestTransientFailureRedelivered(t *testing.T) {
	conn := amqptest.Connect(t)
	queue, _ := amqptest.NewQueue(t, conn, 5)
	ch := amqptest.Channel(t, conn)
	var fx amqptest.Effects
	var calls atomic.Int32
	cfg := amqptest.Config(idempotency.NewRunner(nil), func(ctx context.Context, m *consumer.Message) error {
		calls.Add(1)
		if m.Delivery < 3 {
			return errFlaky
		}
		fx.Add(m.Key)
		return nil
	})
	cfg.Backoff = backoff.FullJitter(time.Millisecond, 10*time.Millisecond)
	c, err := amqpconsumer.New(conn, queue, cfg, amqpconsumer.WithDeliveryLimit(5))
	require.NoError(t, err)
	const n = 10
	for i := range n {
		amqptest.Publish(t, ch, queue, amqptest.KeyOf(i), amqptest.BodyOf(i))
	}
	amqptest.Start(t, c)
	amqptest.Eventually(t, "every message handled", func() bool { return c.Stats().Executed == n })
	all, distinct := fx.Total()
	assert.Equal(t, n, all)
	assert.Equal(t, n, distinct)
	assert.Equal(t, int32(3*n), calls.Load())
	assert.Equal(t, uint64(2*n), c.Stats().Retried)
}

// A permanent failure parks the execution and dead-letters the message;
// RetryParked runs it again from the store once mended.
func TestPermanentFailureParkedAndDeadLettered(t *testing.T) {
	conn := amqptest.Connect(t)
	queue, dlq := amqptest.NewQueue(t, conn, 0)
	ch := amqptest.Channel(t, conn)
	var mended atomic.Bool
	var fx amqptest.Effects
	c, err := amqpconsumer.New(conn, queue, amqptest.Config(idempotency.NewRunner(nil), func(ctx context.Context, m *consumer.Message) error {
		if !mended.Load() {
			return retry.Permanent(errors.New("no such product"))
		}
		fx.Add(m.Key + " " + string(m.Body))
		return nil
	}))
	require.NoError(t, err)
	amqptest.Publish(t, ch, queue, "order-1", "2 chairs")
	amqptest.Start(t, c)
	amqptest.Eventually(t, "the message dead-lettered", func() bool { return amqptest.Count(t, conn, dlq) == 1 })
	assert.Equal(t, uint64(1), c.Stats().Parked)
	parked, err := c.ListParked(context.Background(), "", 0)
	require.NoError(t, err)
	require.Len(t, parked, 1)
	assert.Equal(t, "no such product", parked[0].Parked)
	mended.Store(true)
	require.NoError(t, c.RetryParked(context.Background(), "order-1"))
	assert.Equal(t, 1, fx.Count("order-1 2 chairs"))
}

// The delivery the quorum queue would dead-letter without a reason is not
// given back: a transient failure on it parks it, then it is dead-lettered.
func TestLastDeliveryParked(t *testing.T) {
	conn := amqptest.Connect(t)
	queue, dlq := amqptest.NewQueue(t, conn, 2)
	ch := amqptest.Channel(t, conn)
	var calls atomic.Int32
	cfg := amqptest.Config(idempotency.NewRunner(nil), func(ctx context.Context, m *consumer.Message) error {
		calls.Add(1)
		return errFlaky
	})
	cfg.Backoff = backoff.FullJitter(time.Millisecond, 10*time.Millisecond)
	c, err := amqpconsumer.New(conn, queue, cfg, amqpconsumer.WithDeliveryLimit(2))
	require.NoError(t, err)
	amqptest.Publish(t, ch, queue, "order-1", "2 chairs")
	amqptest.Start(t, c)
	amqptest.Eventually(t, "the message dead-lettered", func() bool { return amqptest.Count(t, conn, dlq) == 1 })
	assert.Equal(t, int32(3), calls.Load(), "delivered three times: the first and two given back")
	parked, err := c.ListParked(context.Background(), "", 0)
	require.NoError(t, err)
	require.Len(t, parked, 1)
	assert.Contains(t, parked[0].Parked, "last delivery (3) failed")
}

// A message without message_id is never run unkeyed: Run stops with
// ErrNoKey and the message stays in the queue; with WithKey it is keyed.
func TestNoKeyStopsTheConsumer(t *testing.T) {
	conn := amqptest.Connect(t)
	queue, _ := amqptest.NewQueue(t, conn, 0)
	ch := amqptest.Channel(t, conn)
	var calls atomic.Int32
	handler := func(ctx context.Context, m *consumer.Message) error {
		calls.Add(1)
		return nil
	}
	c, err := amqpconsumer.New(conn, queue, amqptest.Config(idempotency.NewRunner(nil), handler))
	require.NoError(t, err)
	amqptest.Publish(t, ch, queue, "", "2 chairs")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = c.Run(ctx)
	require.ErrorIs(t, err, consumer.ErrNoKey)
	assert.ErrorContains(t, err, "no message_id and no WithKey function")
	assert.Zero(t, calls.Load())
	amqptest.Eventually(t, "the message back in the queue", func() bool { return amqptest.Count(t, conn, queue) == 1 })

	c, err = amqpconsumer.New(conn, queue, amqptest.Config(idempotency.NewRunner(nil), handler),
		amqpconsumer.WithKey(func(d *amqp.Delivery) string { return "body:" + string(d.Body) }))
	require.NoError(t, err)
	amqptest.Start(t, c)
	amqptest.Eventually(t, "the message handled", func() bool { return c.Stats().Executed == 1 })
	assert.Equal(t, int32(1), calls.Load())
}

// While the handler's dependency is down, the consumer holds what it has
// and burns no delivery: with a delivery limit of 2, every message is
// handled once when the dependency comes back, nothing dead-lettered.
func TestOutageRiddenThrough(t *testing.T) {
	conn := amqptest.Connect(t)
	queue, dlq := amqptest.NewQueue(t, conn, 2)
	ch := amqptest.Channel(t, conn)
	var down atomic.Bool
	down.Store(true)
	var fx amqptest.Effects
	cfg := amqptest.Config(idempotency.NewRunner(nil), func(ctx context.Context, m *consumer.Message) error {
		if down.Load() {
			return &retry.Error{Reason: retry.ErrDependencyDown, Last: errFlaky}
		}
		fx.Add(m.Key)
		return nil
	})
	cfg.MaxInFlight = 4
	cfg.Backoff = backoff.FullJitter(time.Millisecond, 20*time.Millisecond)
	c, err := amqpconsumer.New(conn, queue, cfg, amqpconsumer.WithDeliveryLimit(2))
	require.NoError(t, err)
	const n = 40
	for i := range n {
		amqptest.Publish(t, ch, queue, amqptest.KeyOf(i), amqptest.BodyOf(i))
	}
	amqptest.Start(t, c)
	amqptest.Eventually(t, "deliveries held through the outage", func() bool { return c.Stats().Held >= 20 })
	assert.GreaterOrEqual(t, amqptest.Count(t, conn, queue), n-4, "no more taken than the prefetch")
	down.Store(false)
	amqptest.Eventually(t, "every message handled", func() bool { return c.Stats().Executed == n })
	all, distinct := fx.Total()
	assert.Equal(t, n, all)
	assert.Equal(t, n, distinct)
	assert.Zero(t, c.Stats().Terminated)
	assert.Zero(t, amqptest.Count(t, conn, dlq))
}

// A delivery whose key another execution holds is held for the hint and
// requeued, not run; its redelivery, once the other completed, is acked.
func TestInProgressElsewhereRedeliveredLater(t *testing.T) {
	conn := amqptest.Connect(t)
	queue, _ := amqptest.NewQueue(t, conn, 0)
	ch := amqptest.Channel(t, conn)
	runner := idempotency.NewRunner(nil)
	var calls atomic.Int32
	c, err := amqpconsumer.New(conn, queue, amqptest.Config(runner, func(ctx context.Context, m *consumer.Message) error {
		calls.Add(1)
		return nil
	}))
	require.NoError(t, err)
	holding, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := runner.Do(context.Background(), idempotency.Request{Caller: c.Caller(), Key: "order-1",
			Fingerprint: idempotency.Fingerprint("MESSAGE", queue, "", []byte("2 chairs"))},
			func(context.Context, *idempotency.Execution) ([]byte, error) {
				close(holding)
				<-release
				return nil, nil
			})
		done <- err
	}()
	<-holding
	amqptest.Publish(t, ch, queue, "order-1", "2 chairs")
	amqptest.Start(t, c)
	amqptest.Eventually(t, "the delivery given back", func() bool { return c.Stats().InProgress >= 1 })
	close(release)
	require.NoError(t, <-done)
	amqptest.Eventually(t, "the redelivery acked", func() bool { return c.Stats().Duplicates == 1 })
	assert.Zero(t, calls.Load())
}
