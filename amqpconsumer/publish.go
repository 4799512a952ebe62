package amqpconsumer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// ErrUnroutable is matched by Publish's error when no queue took the message.
var ErrUnroutable = errors.New("amqpconsumer: the message was returned unroutable")

// ErrNacked is matched by Publish's error when the broker refused the message.
var ErrNacked = errors.New("amqpconsumer: the broker did not confirm the message")

// Publisher publishes persistent messages with publisher confirms, one at
// a time, to an exchange. It is safe for concurrent use.
type Publisher struct {
	ch       *amqp.Channel
	exchange string
	returns  chan amqp.Return

	mu sync.Mutex
}

// NewPublisher puts ch in confirm mode and returns a Publisher to exchange
// ("" for the default exchange, whose routing keys are queue names). ch is
// the Publisher's alone from then on.
func NewPublisher(ch *amqp.Channel, exchange string) (*Publisher, error) {
	if err := ch.Confirm(false); err != nil {
		return nil, fmt.Errorf("amqpconsumer: confirm mode: %w", err)
	}
	p := &Publisher{ch: ch, exchange: exchange, returns: make(chan amqp.Return, 16)}
	ch.NotifyReturn(p.returns)
	return p, nil
}

// Publish publishes body to routingKey, persistent, mandatory, with its
// message_id set to id and its timestamp to now (the consumer's
// Message.Published), and waits until the broker confirms it (or ctx
// ends): a nil error means a queue took it. It is the Deliver of an
// outbox relay: the row's id is the message's id, the same on every
// publish, and the consumer's key.
func (p *Publisher) Publish(ctx context.Context, id, routingKey string, body []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	dc, err := p.ch.PublishWithDeferredConfirmWithContext(ctx, p.exchange, routingKey, true, false, amqp.Publishing{
		MessageId: id, DeliveryMode: amqp.Persistent, Timestamp: time.Now(), Body: body,
	})
	if err != nil {
		return fmt.Errorf("amqpconsumer: publish %s: %w", id, err)
	}
	acked, err := dc.WaitContext(ctx)
	if err != nil {
		return fmt.Errorf("amqpconsumer: publish %s: %w", id, err)
	}
	// The broker sends a return before the confirm of the same message.
	for {
		select {
		case r := <-p.returns:
			if r.MessageId == id {
				return fmt.Errorf("%w: %s to %q: %s", ErrUnroutable, id, routingKey, r.ReplyText)
			}
			continue
		default:
		}
		break
	}
	if !acked {
		return fmt.Errorf("%w: %s", ErrNacked, id)
	}
	return nil
}
