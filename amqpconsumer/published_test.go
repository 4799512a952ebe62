package amqpconsumer_test

import (
	"context"
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

// A message published with the timestamp property says when
// (Message.Published), and the consumer's Observer hears how long it
// waited in the queue; one without it says nothing.
func TestMessageSaysWhenItWasPublished(t *testing.T) {
	conn := amqptest.Connect(t)
	queue, _ := amqptest.NewQueue(t, conn, 0)
	ch := amqptest.Channel(t, conn)
	stamp := time.Now().Add(-time.Minute).Truncate(time.Second) // AMQP timestamps are in seconds
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, ch.PublishWithContext(ctx, "", queue, false, false, amqp.Publishing{MessageId: "stamped", Timestamp: stamp, Body: []byte("x")}))
	amqptest.Publish(t, ch, queue, "unstamped", "y")
	published := make(chan *consumer.Message, 2)
	delivered := make(chan consumer.Event, 2)
	cfg := amqptest.Config(idempotency.NewRunner(nil), func(_ context.Context, m *consumer.Message) error {
		published <- m
		return nil
	})
	cfg.Observer = func(_ context.Context, e consumer.Event) {
		if e.Kind == consumer.EventDelivered {
			delivered <- e
		}
	}
	c, err := amqpconsumer.New(conn, queue, cfg)
	require.NoError(t, err)
	amqptest.Start(t, c)
	for range 2 {
		m := <-published
		e := <-delivered
		if m.Key == "stamped" {
			assert.True(t, m.Published.Equal(stamp), "Published %v, want %v", m.Published, stamp)
		} else {
			assert.True(t, m.Published.IsZero())
		}
		if e.Key == "stamped" {
			assert.True(t, e.WaitKnown)
			assert.GreaterOrEqual(t, e.Waited, time.Minute)
		} else {
			assert.False(t, e.WaitKnown)
		}
	}
}
