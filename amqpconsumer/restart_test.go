package amqpconsumer_test

import (
	"context"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/amqpconsumer"
	"github.com/exactlyonce/retry/amqpconsumer/internal/amqptest"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/consumer"
)

// A RabbitMQ node stopped and started again on its data directory while a
// Conn's consumer handles a durable queue and its publisher publishes: the
// consumer and the publisher ride the restart through, the setup declares
// the queue on each new channel, and every message has its effect once.
func TestConnRidesThroughBrokerRestart(t *testing.T) {
	node := startRabbitNode(t)
	queue := amqptest.UniqueName("restart")
	declare := func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclare(queue, true, false, false, false, amqp.Table{"x-queue-type": "quorum", "x-delivery-limit": int32(20)})
		return err
	}
	conn := dial(t, node.url(), amqpconsumer.WithSetup(declare))
	pub, err := conn.NewPublisher("")
	require.NoError(t, err)
	var fx amqptest.Effects
	inHandler, restarted := make(chan struct{}), make(chan struct{})
	var once sync.Once
	c, err := conn.NewConsumer(queue, amqptest.Config(idempotency.NewRunner(nil), func(ctx context.Context, m *consumer.Message) error {
		if m.Key == amqptest.KeyOf(30) {
			once.Do(func() {
				close(inHandler)
				<-restarted
			})
		}
		fx.Add(m.Key)
		return nil
	}), amqpconsumer.WithDeliveryLimit(20))
	require.NoError(t, err)
	amqptest.Start(t, c)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const n = 100
	for i := range n / 2 {
		require.NoError(t, pub.Publish(ctx, amqptest.KeyOf(i), queue, []byte(amqptest.BodyOf(i))))
	}
	<-inHandler
	node.stop()
	published := make(chan error, 1)
	go func() {
		// Published while the broker is down: each waits for it.
		for i := n / 2; i < n; i++ {
			if err := pub.Publish(ctx, amqptest.KeyOf(i), queue, []byte(amqptest.BodyOf(i))); err != nil {
				published <- err
				return
			}
		}
		published <- nil
	}()
	node.start()
	close(restarted)
	require.NoError(t, <-published)
	amqptest.Eventually(t, "every message handled", func() bool {
		_, distinct := fx.Total()
		return distinct == n
	})
	check, err := amqp.Dial(node.url())
	require.NoError(t, err)
	defer check.Close()
	amqptest.Eventually(t, "the queue empty", func() bool { return amqptest.Count(t, check, queue) == 0 })
	requireOnce(t, &fx, n)
	assert.GreaterOrEqual(t, c.Stats().Reconnects, uint64(1))
}
