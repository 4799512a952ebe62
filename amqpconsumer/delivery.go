package amqpconsumer

import (
	"context"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/exactlyonce/retry/idempotency/consumer"
)

// deliveryCountHeader is where quorum queues count a message's earlier
// deliveries.
const deliveryCountHeader = "x-delivery-count"

// delivery is one AMQP delivery.
type delivery struct {
	d   amqp.Delivery
	set *settings
}

// Message implements consumer.Delivery.
func (d *delivery) Message() (*consumer.Message, error) {
	key := d.d.MessageId
	if key == "" && d.set.key != nil {
		key = d.set.key(&d.d)
	}
	if key == "" {
		how := "and no WithKey function"
		if d.set.key != nil {
			how = "and the WithKey function gave none"
		}
		return nil, fmt.Errorf("amqpconsumer: a message on %q (routing key %q) has no message_id %s: %w",
			d.d.Exchange, d.d.RoutingKey, how, consumer.ErrNoKey)
	}
	return &consumer.Message{
		Key:       key,
		Subject:   d.d.RoutingKey,
		Header:    headers(d.d.Headers),
		Body:      d.d.Body,
		Delivery:  d.earlier() + 1,
		Published: d.d.Timestamp, // zero unless the publisher set it
		Raw:       &d.d,
	}, nil
}

// earlier returns how many times the message was delivered before: the
// quorum queue's count, or 1 for a classic queue's redelivery.
func (d *delivery) earlier() int {
	switch n := d.d.Headers[deliveryCountHeader].(type) {
	case int64:
		return int(n)
	case int32:
		return int(n)
	case int:
		return n
	}
	if d.d.Redelivered {
		return 1
	}
	return 0
}

// headers turns an AMQP table into header values, each as fmt prints it.
func headers(t amqp.Table) map[string][]string {
	if len(t) == 0 {
		return nil
	}
	h := make(map[string][]string, len(t))
	for k, v := range t {
		h[k] = []string{fmt.Sprint(v)}
	}
	return h
}

// Ack implements consumer.Delivery.
func (d *delivery) Ack(context.Context) error { return d.d.Ack(false) }

// Nak implements consumer.Delivery: AMQP 0-9-1 cannot delay a
// redelivery, so the delivery is held for delay (ctx's end cuts that
// short) and then rejected with requeue.
func (d *delivery) Nak(ctx context.Context, delay time.Duration) error {
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	return d.d.Nack(false, true)
}

// Term implements consumer.Delivery: rejected without requeue, the
// message goes to the queue's dead-letter exchange, if it has one.
func (d *delivery) Term(context.Context, string) error { return d.d.Nack(false, false) }

// InProgress implements consumer.Delivery: RabbitMQ has nothing to extend
// (see the package documentation).
func (d *delivery) InProgress(context.Context) error { return nil }

// Last implements consumer.Delivery.
func (d *delivery) Last() bool { return d.set.limit > 0 && d.earlier() >= d.set.limit }
