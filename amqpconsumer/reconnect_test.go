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

// The documented recovery works: the connection closes while a handler
// runs, Run returns, and a new Consumer of the same name on a new
// connection (on the service's one Runner) takes over the queue; every
// message's effect happens once.
func TestNewConsumerOnANewConnection(t *testing.T) {
	setup := amqptest.Connect(t)
	queue, _ := amqptest.NewQueue(t, setup, 5)
	ch := amqptest.Channel(t, setup)
	const n = 20
	for i := range n {
		amqptest.Publish(t, ch, queue, amqptest.KeyOf(i), amqptest.BodyOf(i))
	}
	first, err := amqp.Dial(amqptest.URL())
	require.NoError(t, err)
	defer first.Close()
	runner := idempotency.NewRunner(nil)
	var fx amqptest.Effects
	inHandler, dropped := make(chan struct{}), make(chan struct{})
	var once sync.Once
	cfg := amqptest.Config(runner, func(ctx context.Context, m *consumer.Message) error {
		if m.Key == amqptest.KeyOf(3) {
			once.Do(func() {
				close(inHandler)
				<-dropped
			})
		}
		fx.Add(m.Key)
		return nil
	})
	c1, err := amqpconsumer.New(first, queue, cfg, amqpconsumer.WithDeliveryLimit(5))
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() { errc <- c1.Run(context.Background()) }()
	<-inHandler
	require.NoError(t, first.Close())
	close(dropped)
	select {
	case err := <-errc:
		require.Error(t, err, "Run ends with the connection")
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its connection closed")
	}

	c2, err := amqpconsumer.New(amqptest.Connect(t), queue, cfg, amqpconsumer.WithDeliveryLimit(5))
	require.NoError(t, err, "a new Consumer of the name on a new connection")
	amqptest.Start(t, c2)
	amqptest.Eventually(t, "every message handled once", func() bool {
		all, distinct := fx.Total()
		return distinct == n && amqptest.Count(t, setup, queue) == 0 && all >= n
	})
	for i := range n {
		assert.Equal(t, 1, fx.Count(amqptest.KeyOf(i)), amqptest.KeyOf(i))
	}
}
