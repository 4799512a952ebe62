package amqpconsumer_test

import (
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/amqpconsumer"
	"github.com/exactlyonce/retry/amqpconsumer/internal/amqptest"
	"github.com/exactlyonce/retry/idempotency/consumer"
	"github.com/exactlyonce/retry/idempotency/consumer/consumertest"
)

// The consumers' fault matrix, against the real RabbitMQ (quorum queues).
func TestFaultMatrix(t *testing.T) { consumertest.Run(t, matrixBroker{}) }

// matrixBroker gives the matrix quorum queues of its own: a limit of n
// delivers a message n+1 times.
type matrixBroker struct{}

func (matrixBroker) Queue(t *testing.T, deliveries int) consumertest.Queue {
	conn := amqptest.Connect(t)
	queue, _ := amqptest.NewQueue(t, conn, deliveries-1)
	return &matrixQueue{conn: conn, ch: amqptest.Channel(t, conn), queue: queue, limit: deliveries - 1}
}

type matrixQueue struct {
	conn  *amqp.Connection
	ch    *amqp.Channel
	queue string
	limit int
}

func (q *matrixQueue) Publish(t *testing.T, key, body string) {
	amqptest.Publish(t, q.ch, q.queue, key, body)
}

func (q *matrixQueue) Consumer(t *testing.T, cfg consumer.Config) consumertest.Consumer {
	conn := amqptest.Connect(t)
	c, err := amqpconsumer.New(conn, q.queue, cfg, amqpconsumer.WithDeliveryLimit(q.limit))
	require.NoError(t, err)
	return matrixConsumer{Consumer: c, conn: conn}
}

// Idle: no message ready. (AMQP does not tell the unacked ones; the
// matrix's other checks find a message that a consumer holds unsettled.
// A last delivery whose consumer died is dead-lettered by the queue as
// well as finished from the store: the copy in the dead-letter queue is
// not counted.)
func (q *matrixQueue) Idle(t *testing.T) bool { return amqptest.Count(t, q.conn, q.queue) == 0 }

type matrixConsumer struct {
	*amqpconsumer.Consumer
	conn *amqp.Connection
}

func (c matrixConsumer) Core() *consumer.Consumer { return c.Consumer.Consumer }
func (c matrixConsumer) Drop()                    { _ = c.conn.Close() }
