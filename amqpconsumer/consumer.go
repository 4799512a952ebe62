package amqpconsumer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/exactlyonce/retry/idempotency/consumer"
)

// Option configures a Consumer.
type Option func(*settings)

type settings struct {
	key   func(d *amqp.Delivery) string
	limit int
	tag   string
}

// WithKey keys the messages that have no message_id property by key's
// result ("" for none: the consumer then stops, see the package
// documentation).
func WithKey(key func(d *amqp.Delivery) string) Option {
	return func(s *settings) { s.key = key }
}

// WithDeliveryLimit tells the consumer the queue's delivery limit (its
// x-delivery-limit): a quorum queue with a limit of n delivers a message
// up to n+1 times, the first delivery and n redeliveries, and drops or
// dead-letters it when the (n+1)th is given back; the consumer takes the
// (n+1)th (x-delivery-count n) as the last (consumer.Delivery.Last).
// Values <= 0 mean none (the default).
func WithDeliveryLimit(n int) Option {
	return func(s *settings) { s.limit = max(n, 0) }
}

// WithConsumerTag sets the consumer tag (default: one the library makes).
func WithConsumerTag(tag string) Option {
	return func(s *settings) { s.tag = tag }
}

// Consumer handles the messages of a RabbitMQ queue with exactly-once
// effect. Its Stats, ListParked and RetryParked are those of the
// consumer.Consumer it wraps.
type Consumer struct {
	*consumer.Consumer
	conn  *amqp.Connection
	queue string
	set   settings
	pre   int
	grace time.Duration
}

// New returns a Consumer of queue on conn. In cfg, Name defaults to the
// queue's name; the Handler's Message.Raw is the *amqp.Delivery, and its
// Subject the routing key.
func New(conn *amqp.Connection, queue string, cfg consumer.Config, opts ...Option) (*Consumer, error) {
	if conn == nil || queue == "" {
		return nil, errors.New("amqpconsumer: New needs a connection and a queue")
	}
	var set settings
	for _, o := range opts {
		if o != nil {
			o(&set)
		}
	}
	if cfg.Name == "" {
		cfg.Name = queue
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = consumer.DefaultMaxInFlight
	}
	core, err := consumer.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("amqpconsumer: %w", err)
	}
	grace := cfg.StopGrace
	if grace <= 0 {
		grace = consumer.DefaultStopGrace
	}
	return &Consumer{Consumer: core, conn: conn, queue: queue, set: set, pre: cfg.MaxInFlight, grace: grace}, nil
}

// Run opens a channel, consumes the queue with a prefetch of
// consumer.Config.MaxInFlight and handles its messages until ctx ends or
// the consumer cannot go on (see consumer.Consumer.Run): the channel or
// the connection closed, a message without a key. amqp091-go does not
// reconnect: once Run has returned, make a new Consumer of the same name
// on a new connection and run it (it takes over the name's registration
// with the Runner; see consumer.New).
func (c *Consumer) Run(ctx context.Context) error {
	ch, err := c.conn.Channel()
	if err != nil {
		return fmt.Errorf("amqpconsumer: open a channel: %w", err)
	}
	defer ch.Close()
	if err := ch.Qos(c.pre, 0, false); err != nil {
		return fmt.Errorf("amqpconsumer: set the prefetch: %w", err)
	}
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	tag := c.set.tag
	if tag == "" {
		tag = consumerTag()
	}
	deliveries, err := ch.Consume(c.queue, tag, false, false, false, false, nil)
	if err != nil {
		return fmt.Errorf("amqpconsumer: consume %s: %w", c.queue, err)
	}
	// Once stopping, the consumer fetches no more, but stays subscribed
	// until it has settled what the broker still sends it (settleLate).
	run, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	stopping := context.AfterFunc(ctx, stop)
	defer stopping()
	err = c.Consumer.Run(run, &source{c: c, deliveries: deliveries, closed: closed})
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	c.settleLate(ctx, deliveries)
	return err
}

// consumerTag returns a consumer tag of the process's own.
func consumerTag() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "amqpconsumer-" + hex.EncodeToString(b)
}

// source takes deliveries from a channel's consumer.
type source struct {
	c          *Consumer
	deliveries <-chan amqp.Delivery
	closed     <-chan *amqp.Error
}

// Fetch implements consumer.Source: it waits for one delivery, then takes
// those already there, up to n.
func (s *source) Fetch(ctx context.Context, n int, deliver func(consumer.Delivery)) error {
	for i := 0; i < n; i++ {
		var (
			d  amqp.Delivery
			ok bool
		)
		if i == 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case d, ok = <-s.deliveries:
			}
		} else {
			select {
			case d, ok = <-s.deliveries:
			default:
				return nil
			}
		}
		if !ok {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			err := errors.New("the channel closed")
			select {
			case e := <-s.closed:
				if e != nil {
					err = fmt.Errorf("the channel closed: %w", e)
				}
			default:
			}
			return fmt.Errorf("amqpconsumer: %w", err)
		}
		deliver(&delivery{d: d, set: &s.c.set})
	}
	return nil
}
