package consumertest

import (
	"context"
	"testing"

	"github.com/exactlyonce/retry/idempotency/consumer"
)

// Broker is what an adapter gives the kit.
type Broker interface {
	// Queue makes a queue (a stream and its consumer, a queue) of the
	// test's own, removed at the end of the test, whose broker delivers
	// a message at most deliveries times (deliveries >= 2): the
	// deliveries'th is the last (consumer.Delivery.Last); or without a
	// limit when deliveries is 0. Its
	// redeliveries of a delivery left unacknowledged by a consumer that
	// lost its connection must come within a few seconds (a short ack
	// wait).
	Queue(t *testing.T, deliveries int) Queue
}

// Queue is one queue of a Broker.
type Queue interface {
	// Publish publishes a message with id key (the adapter's key) and
	// body. Two publishes of one key are two messages to the broker.
	Publish(t *testing.T, key, body string)
	// Consumer returns a consumer of the queue from cfg, on a connection
	// of its own, closed at the end of the test.
	Consumer(t *testing.T, cfg consumer.Config) Consumer
	// Idle reports whether the broker holds no message of the queue:
	// none waiting, none delivered and not settled.
	Idle(t *testing.T) bool
}

// Consumer is an adapter's consumer.
type Consumer interface {
	// Run runs the consumer (the adapter's Run).
	Run(ctx context.Context) error
	// Core returns the consumer.Consumer the adapter wraps.
	Core() *consumer.Consumer
	// Drop closes the consumer's connection to the broker, as a network
	// failure or the death of its process does.
	Drop()
}
