package amqpconsumer_test

import (
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/exactlyonce/retry/amqpconsumer"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/consumer"
)

// The consumer guide's reconnecting Conn: a consumer and a publisher that
// outlive a broker restart, the caller's topology declared on every new
// channel. (Compiled, not run: ExampleDial runs the same against the
// test's broker.)
func Example_reconnecting() {
	cfg := consumer.Config{Runner: idempotency.NewRunner(nil), Handler: nil /* the handler */}

	conn, err := amqpconsumer.Dial("amqp://guest:guest@rabbit:5672/", amqpconsumer.WithSetup(
		func(ch *amqp.Channel) error { // the caller's topology, declared on every new channel
			_, err := ch.QueueDeclare("orders", true, false, false, false, amqp.Table{"x-queue-type": "quorum"})
			return err
		}))
	defer conn.Close()
	c, err := conn.NewConsumer("orders", cfg)
	pub, err := conn.NewPublisher("") // pub.Publish(ctx, id, "orders", body): a pgstore.Relay's Deliver

	_, _, _ = c, pub, err
}
