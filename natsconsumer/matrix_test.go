package natsconsumer_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/exactlyonce/retry/idempotency/consumer"
	"github.com/exactlyonce/retry/idempotency/consumer/consumertest"
	"github.com/exactlyonce/retry/natsconsumer"
	"github.com/exactlyonce/retry/natsconsumer/internal/natstest"
)

// The consumers' fault matrix, against the real JetStream.
func TestFaultMatrix(t *testing.T) { consumertest.Run(t, matrixBroker{}) }

// matrixBroker gives the matrix streams of its own with a short AckWait.
type matrixBroker struct{}

func (matrixBroker) Queue(t *testing.T, deliveries int) consumertest.Queue {
	_, js := natstest.Connect(t)
	stream := natstest.NewStream(t, js)
	cons := natstest.NewPullConsumer(t, js, stream, jetstream.ConsumerConfig{MaxDeliver: deliveries, AckWait: time.Second})
	return &matrixQueue{js: js, stream: stream, cons: cons}
}

type matrixQueue struct {
	js     jetstream.JetStream
	stream string
	cons   jetstream.Consumer
}

// Publish publishes with the key as Nats-Msg-Id: within the stream's
// duplicate window a second publish of a key is dropped by the stream.
func (q *matrixQueue) Publish(t *testing.T, key, body string) {
	natstest.Publish(t, q.js, q.stream+".orders", key, body)
}

func (q *matrixQueue) Consumer(t *testing.T, cfg consumer.Config) consumertest.Consumer {
	nc, js := natstest.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, err := js.Consumer(ctx, q.stream, "work")
	if err != nil {
		t.Fatal(err)
	}
	c, err := natsconsumer.New(cons, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return matrixConsumer{Consumer: c, nc: nc}
}

// Idle: nothing pending, nothing waiting for an ack (a message dropped
// at MaxDeliver stays counted in NumRedelivered).
func (q *matrixQueue) Idle(t *testing.T) bool {
	i := natstest.Info(t, q.cons)
	return i.NumPending == 0 && i.NumAckPending == 0
}

type matrixConsumer struct {
	*natsconsumer.Consumer
	nc *nats.Conn
}

func (c matrixConsumer) Core() *consumer.Consumer { return c.Consumer.Consumer }
func (c matrixConsumer) Drop()                    { c.nc.Close() }
