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

// A consumer and a publisher on a Conn, which connects again after a loss:
// the setup function declares the queue on every channel the Conn opens,
// so it is there after a broker restart too.
func ExampleDial() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	queue := amqptest.UniqueName("example")
	conn, err := amqpconsumer.Dial(amqptest.URL(), amqpconsumer.WithSetup(func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclare(queue, false, true, false, false, nil) // auto-deleted after the example
		return err
	}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()
	pub, _ := conn.NewPublisher("")
	if err := pub.Publish(ctx, "order-1", queue, []byte("2 chairs")); err != nil {
		fmt.Println(err)
		return
	}
	shipped := make(chan struct{})
	c, err := conn.NewConsumer(queue, consumer.Config{
		Runner: idempotency.NewRunner(nil),
		Handler: func(ctx context.Context, m *consumer.Message) error {
			fmt.Println("shipping", m.Key, string(m.Body))
			close(shipped)
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
	<-shipped
	stop()
	<-done
	fmt.Println("reconnects:", c.Stats().Reconnects)
	// Output:
	// shipping order-1 2 chairs
	// reconnects: 0
}
