package amqpconsumer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	retry "github.com/exactlyonce/retry"
)

// ErrUnroutable is matched by Publish's error when no queue took the message.
var ErrUnroutable = errors.New("amqpconsumer: the message was returned unroutable")

// ErrNacked is matched by Publish's error when the broker refused the message.
var ErrNacked = errors.New("amqpconsumer: the broker did not confirm the message")

// Publisher publishes persistent messages with publisher confirms, one at
// a time, to an exchange. It is safe for concurrent use.
type Publisher struct {
	exchange string
	dialer   *Conn // nil for NewPublisher's, which has its one channel

	mu      sync.Mutex
	ch      *amqp.Channel
	returns chan amqp.Return
	closes  chan *amqp.Error // why ch closed
	resent  atomic.Uint64
}

// NewPublisher puts ch in confirm mode and returns a Publisher to exchange
// ("" for the default exchange, whose routing keys are queue names). ch is
// the Publisher's alone from then on. Once ch is closed, Publish fails;
// a Conn's publisher (Conn.NewPublisher) opens another.
func NewPublisher(ch *amqp.Channel, exchange string) (*Publisher, error) {
	p := &Publisher{exchange: exchange}
	if err := p.use(ch); err != nil {
		return nil, err
	}
	return p, nil
}

// NewPublisher returns a Publisher to exchange on c that reconnects: a
// publish whose channel or connection is lost before the broker confirmed
// it is published again, on a new channel once c has connected again
// (the setup given with WithSetup run on it), until it is confirmed or
// Publish's context ends; so is one the broker nacked (a quorum queue
// whose leader is not elected yet, a moment after the broker started),
// after the Conn's backoff. A message so re-sent may be kept twice by the
// broker (the first copy may have reached the queue before the loss):
// its consumer, keyed by the message_id, runs it once. A publish the
// broker refused, closing the channel in answer (no such exchange, access
// refused, a message over the size limit), is not sent again: Publish
// returns the refusal (ErrRefused). It opens its channel at the first
// Publish.
func (c *Conn) NewPublisher(exchange string) (*Publisher, error) {
	if c == nil {
		return nil, errors.New("amqpconsumer: NewPublisher needs a Conn")
	}
	return &Publisher{exchange: exchange, dialer: c}, nil
}

// Resent returns how many publishes were sent again: their channel was
// lost before the broker confirmed them, or the broker nacked them.
func (p *Publisher) Resent() uint64 { return p.resent.Load() }

// use puts ch in confirm mode and publishes on it from now on.
func (p *Publisher) use(ch *amqp.Channel) error {
	if err := ch.Confirm(false); err != nil {
		return fmt.Errorf("amqpconsumer: confirm mode: %w", err)
	}
	p.ch = ch
	p.returns = ch.NotifyReturn(make(chan amqp.Return, 16))
	p.closes = ch.NotifyClose(make(chan *amqp.Error, 1))
	return nil
}

// Publish publishes body to routingKey, persistent, mandatory, with its
// message_id set to id and its timestamp to now (the consumer's
// Message.Published), and waits until the broker confirms it (or ctx
// ends): a nil error means a queue took it. It is the Deliver of an
// outbox relay: the row's id is the message's id, the same on every
// publish, and the consumer's key. On a Conn's publisher it rides through
// a lost connection (see Conn.NewPublisher). The broker's refusal of the
// message (see ErrRefused) returns at once. When ctx ends while a Conn's
// publisher waits for the broker, the error says why (the broker
// unreachable since when, the last dial's error) and matches ctx's error.
func (p *Publisher) Publish(ctx context.Context, id, routingKey string, body []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dialer == nil {
		return p.publish(ctx, id, routingKey, body)
	}
	sent := false
	err := retryDo(ctx, p.dialer, func(ctx context.Context) error {
		if p.ch == nil || p.ch.IsClosed() {
			ch, conn, err := p.dialer.channel(ctx)
			if err != nil {
				return err
			}
			if err := p.use(ch); err != nil {
				p.dialer.closeChannel(ch, conn, time.Now().Add(closeTimeout))
				return err
			}
		}
		if sent {
			p.resent.Add(1)
		}
		sent = true
		err := p.publish(ctx, id, routingKey, body)
		if err != nil && !errors.Is(err, errLost) && !errors.Is(err, ErrNacked) {
			return retry.Permanent(err)
		}
		return err
	})
	var ue *unreachableError
	if errors.As(err, &ue) {
		return fmt.Errorf("amqpconsumer: publish %s: %w", id, err)
	}
	return err
}

// errLost is matched by publish's error when the channel was lost before
// the broker confirmed the message.
var errLost = errors.New("amqpconsumer: the channel was lost before the broker confirmed the message")

// publish publishes once on the Publisher's channel.
func (p *Publisher) publish(ctx context.Context, id, routingKey string, body []byte) error {
	ch := p.ch
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, p.exchange, routingKey, true, false, amqp.Publishing{
		MessageId: id, DeliveryMode: amqp.Persistent, Timestamp: time.Now(), Body: body,
	})
	if err != nil {
		if connectionLost(err) {
			err = fmt.Errorf("%w: %w", errLost, err)
		}
		return fmt.Errorf("amqpconsumer: publish %s: %w", id, err)
	}
	acked, err := dc.WaitContext(ctx)
	if err != nil {
		return fmt.Errorf("amqpconsumer: publish %s: %w", id, err)
	}
	// The broker sends a return before the confirm of the same message.
	// amqp091-go closes the returns channel with the channel.
returns:
	for {
		select {
		case r, ok := <-p.returns:
			if !ok {
				break returns
			}
			if r.MessageId == id {
				return fmt.Errorf("%w: %s to %q: %s", ErrUnroutable, id, routingKey, r.ReplyText)
			}
		default:
			break returns
		}
	}
	if !acked {
		if ch.IsClosed() {
			// amqp091-go nacks the confirms outstanding on a closed
			// channel, after it told why the channel closed. The broker
			// closes a publisher's channel to refuse a publish.
			var why *amqp.Error
			select {
			case why = <-p.closes:
			default:
			}
			if why != nil && why.Server && !connectionLost(why) {
				return fmt.Errorf("%w the publish of %s to %q: %w", ErrRefused, id, p.exchange, why)
			}
			return fmt.Errorf("amqpconsumer: publish %s: %w", id, errLost)
		}
		return fmt.Errorf("%w: %s", ErrNacked, id)
	}
	return nil
}
