package amqpconsumer_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/amqpconsumer"
	"github.com/exactlyonce/retry/amqpconsumer/internal/amqptest"
	"github.com/exactlyonce/retry/backoff"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/consumer"
)

func TestDialRejectsABadURL(t *testing.T) {
	_, err := amqpconsumer.Dial("http://not-amqp")
	require.Error(t, err)
}

// While the broker refuses connections, a Conn's users (consumers and a
// publisher) wait for one dial at a time, never several at once; once it
// answers, all of them go on.
func TestConnDialsOneAtATime(t *testing.T) {
	setup := amqptest.Connect(t)
	queue, _ := amqptest.NewQueue(t, setup, 5)
	proxy, via := viaProxy(t)
	proxy.Refuse(true)
	var dialing, most, dials atomic.Int32
	conn := amqpconsumer.NewConn(func(ctx context.Context) (*amqp.Connection, error) {
		n := dialing.Add(1)
		defer dialing.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		dials.Add(1)
		return amqp.Dial(via)
	}, amqpconsumer.WithRedialBackoff(backoff.FullJitter(time.Millisecond, 10*time.Millisecond)),
		amqpconsumer.WithConnLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	t.Cleanup(func() { _ = conn.Close() })
	var fx amqptest.Effects
	for i := range 3 {
		c, err := conn.NewConsumer(queue, amqptest.Config(idempotency.NewRunner(nil), func(ctx context.Context, m *consumer.Message) error {
			fx.Add(m.Key)
			return nil
		}), amqpconsumer.WithConsumerTag(amqptest.UniqueName("tag")))
		require.NoError(t, err, i)
		amqptest.Start(t, c)
	}
	pub, err := conn.NewPublisher("")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	published := make(chan error, 1)
	go func() { published <- pub.Publish(ctx, amqptest.KeyOf(0), queue, []byte(amqptest.BodyOf(0))) }()
	amqptest.Eventually(t, "several dials refused", func() bool { return proxy.Refused() >= 5 })
	proxy.Refuse(false)
	require.NoError(t, <-published)
	amqptest.Eventually(t, "the message handled", func() bool { return fx.Count(amqptest.KeyOf(0)) == 1 })
	assert.Equal(t, int32(1), most.Load(), "one dial at a time")
	assert.GreaterOrEqual(t, dials.Load(), int32(5))
}

// Closing a Conn while it redials ends the dial, and its users' waits:
// Run returns an error matching ErrConnClosed.
func TestConnClosedWhileRedialing(t *testing.T) {
	setup := amqptest.Connect(t)
	queue, _ := amqptest.NewQueue(t, setup, 5)
	proxy, via := viaProxy(t)
	proxy.Refuse(true)
	conn := dial(t, via)
	c, err := conn.NewConsumer(queue, amqptest.Config(idempotency.NewRunner(nil), func(context.Context, *consumer.Message) error { return nil }))
	require.NoError(t, err)
	done := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() { done <- c.Run(context.Background()) })
	amqptest.Eventually(t, "the Conn redials", func() bool { return proxy.Refused() >= 2 })
	require.NoError(t, conn.Close())
	wg.Wait()
	err = <-done
	assert.True(t, errors.Is(err, amqpconsumer.ErrConnClosed), "Run returned %v", err)
}

// A Conn's consumer of a queue that does not exist stops at once with the
// broker's refusal, rather than reconnecting for ever.
func TestConnConsumerOfAMissingQueueStops(t *testing.T) {
	conn := dial(t, amqptest.URL())
	c, err := conn.NewConsumer(amqptest.UniqueName("missing"), amqptest.Config(idempotency.NewRunner(nil), func(context.Context, *consumer.Message) error { return nil }))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = c.Run(ctx)
	var ae *amqp.Error
	require.True(t, errors.As(err, &ae), "Run returned %v", err)
	assert.Equal(t, amqp.NotFound, ae.Code)
	assert.NoError(t, ctx.Err(), "Run returned before its context ended")
}
