package amqpconsumer_test

import (
	"context"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/exactlyonce/retry/amqpconsumer"
	"github.com/exactlyonce/retry/amqpconsumer/internal/amqptest"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/consumer"
)

// A RabbitMQ consumer that ships an order once although the publisher sent
// it twice (its first confirm was lost, say): RabbitMQ keeps both copies,
// and the consumer acks the second without running.
func ExampleNew() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := amqp.Dial(amqptest.URL())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()
	ch, _ := conn.Channel()
	queue := amqptest.UniqueName("example")
	if _, err := ch.QueueDeclare(queue, false, true, false, false, nil); err != nil {
		fmt.Println(err)
		return
	}
	pub, _ := amqpconsumer.NewPublisher(ch, "")
	for range 2 {
		_ = pub.Publish(ctx, "order-1", queue, []byte("2 chairs"))
	}

	replayed := make(chan struct{}, 1)
	runner := idempotency.NewRunner(nil, idempotency.WithObserver(func(_ context.Context, o idempotency.Observation) {
		if o.Outcome == idempotency.OutcomeReplayed {
			replayed <- struct{}{}
		}
	}))
	c, err := amqpconsumer.New(conn, queue, consumer.Config{
		Runner:      runner,
		MaxInFlight: 1, // one at a time, for the example's output

		Handler: func(ctx context.Context, m *consumer.Message) error {
			fmt.Println("shipping", m.Key, string(m.Body))
			return nil
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(rctx) }()
	<-replayed
	stop()
	<-done
	fmt.Printf("%+v\n", c.Stats())
	// Output:
	// shipping order-1 2 chairs
	// {Executed:1 Duplicates:1 InProgress:0 Retried:0 Held:0 Parked:0 HandedOver:0 Terminated:0 Outages:0 Reconnects:0}
}
