package amqpconsumer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
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
// Values <= 0 mean none (the default). Prefer a queue without a limit,
// and consumer.Config.MaxDeliveries (see the package documentation).
func WithDeliveryLimit(n int) Option {
	return func(s *settings) { s.limit = max(n, 0) }
}

// WithConsumerTag sets the consumer tag (default: one the library makes).
func WithConsumerTag(tag string) Option {
	return func(s *settings) { s.tag = tag }
}

// Consumer handles the messages of a RabbitMQ queue with exactly-once
// effect. Its ListParked and RetryParked are those of the
// consumer.Consumer it wraps; its Stats add the reconnects.
type Consumer struct {
	*consumer.Consumer
	conn       *amqp.Connection // New's; nil for a Conn's consumer
	dialer     *Conn            // Conn.NewConsumer's; nil for New's
	queue      string
	set        settings
	tag        string
	pre        int
	grace      time.Duration
	log        *slog.Logger
	reconnects atomic.Uint64
}

// New returns a Consumer of queue on conn. In cfg, Name defaults to the
// queue's name; the Handler's Message.Raw is the *amqp.Delivery, and its
// Subject the routing key. A Consumer made by New does not reconnect:
// when its channel or conn closes, Run returns (see Run); a Conn's
// consumer (Conn.NewConsumer) rides through.
func New(conn *amqp.Connection, queue string, cfg consumer.Config, opts ...Option) (*Consumer, error) {
	if conn == nil {
		return nil, errors.New("amqpconsumer: New needs a connection and a queue")
	}
	return newConsumer(conn, nil, queue, cfg, opts)
}

// NewConsumer returns a Consumer of queue on c that reconnects: when its
// channel or the connection is lost, Run waits for c to connect again,
// opens a channel, runs the setup (WithSetup), sets the prefetch and
// consumes the queue again, and goes on. cfg and opts are as for New.
func (c *Conn) NewConsumer(queue string, cfg consumer.Config, opts ...Option) (*Consumer, error) {
	if c == nil {
		return nil, errors.New("amqpconsumer: NewConsumer needs a Conn")
	}
	return newConsumer(nil, c, queue, cfg, opts)
}

func newConsumer(conn *amqp.Connection, dialer *Conn, queue string, cfg consumer.Config, opts []Option) (*Consumer, error) {
	if queue == "" {
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
	tag := set.tag
	if tag == "" {
		tag = consumerTag()
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Consumer{Consumer: core, conn: conn, dialer: dialer, queue: queue, set: set, tag: tag,
		pre: cfg.MaxInFlight, grace: grace, log: log}, nil
}

// Stats returns the counts of the consumer.Consumer, with Reconnects: the
// times Run consumed the queue again after its channel was lost.
func (c *Consumer) Stats() consumer.Stats {
	s := c.Consumer.Stats()
	s.Reconnects = c.reconnects.Load()
	return s
}

// Run opens a channel, consumes the queue with a prefetch of
// consumer.Config.MaxInFlight and handles its messages until ctx ends or
// the consumer cannot go on (see consumer.Consumer.Run): a message
// without a key; the broker refusing the consumption (the queue does not
// exist, say); for a Consumer made by New, its channel or connection
// closing. amqp091-go does not reconnect: once a New Consumer's Run has
// returned, make a new Consumer of the same name on a new connection and
// run it (it takes over the name's registration with the Runner; see
// consumer.New), or use a Conn, whose consumers ride through. The
// deliveries of a lost channel that were not acked are requeued by the
// broker and come again, to be replayed from the store (acked without
// running) or run again where they had not completed.
//
// Once ctx ends, Run returns within consumer.Config.StopGrace (and a
// half a second more when the handlers used all of it): it waits for
// the broker's answer to its channel's close until the grace ends; then
// a Conn's consumer closes the Conn's connection hard, and New's returns,
// leaving the close to end with the caller's connection.
func (c *Consumer) Run(ctx context.Context) error {
	o := &opener{c: c}
	if _, err := o.open(ctx); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	// The stop ends by its grace: the channel's close waits for the broker
	// until then (and closeFloor at least), then a Conn's connection is
	// closed hard.
	var stoppedAt atomic.Int64 // when ctx ended, in Unix nanoseconds
	endOfGrace := func() time.Time {
		at := time.Now()
		if ns := stoppedAt.Load(); ns != 0 {
			at = time.Unix(0, ns)
		}
		return at.Add(c.grace)
	}
	defer func() { o.close(endOfGrace()) }()
	// Once stopping, the consumer fetches no more and opens no new
	// channel, but stays subscribed until it has settled what the broker
	// still sends it (settleLate): a cancelled subscription would leave a
	// quorum queue's assigned, undelivered messages to be returned at the
	// close, a delivery counted for each, and one on its last delivery
	// dead-lettered unseen.
	run, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	stopping := context.AfterFunc(ctx, func() {
		stoppedAt.Store(time.Now().UnixNano())
		o.halt()
		stop()
	})
	defer stopping()
	err := c.Consumer.Run(run, &source{c: c, o: o})
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	stopping()
	if sub := o.halt(); sub != nil && c.set.limit > 0 {
		// Without a delivery limit, what the close returns is delivered
		// again: nothing to settle first.
		c.settleLate(sub.deliveries, endOfGrace())
	}
	return err
}

// consumerTag returns a consumer tag of the process's own.
func consumerTag() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "amqpconsumer-" + hex.EncodeToString(b)
}

// source takes deliveries from the consumer's subscription, and opens
// it again after a loss when the consumer has a Conn.
type source struct {
	c *Consumer
	o *opener
}

// Fetch implements consumer.Source: it waits for one delivery, then takes
// those already there, up to n. When the subscription's channel is lost,
// a Conn's consumer opens another and waits on it; New's returns the
// error.
func (s *source) Fetch(ctx context.Context, n int, deliver func(consumer.Delivery)) error {
	for i := 0; i < n; {
		s.o.mu.Lock()
		sub := s.o.current
		s.o.mu.Unlock()
		if sub == nil {
			return ctx.Err()
		}
		var (
			d  amqp.Delivery
			ok bool
		)
		if i == 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case d, ok = <-sub.deliveries:
			}
		} else {
			select {
			case d, ok = <-sub.deliveries:
			default:
				return nil
			}
		}
		if ok {
			deliver(&delivery{d: d, set: &s.c.set})
			i++
			continue
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if s.o.isStopped() {
			// Stopping: no new channel; what the old one held comes
			// again from the broker.
			return context.Canceled
		}
		lost := sub.lostErr()
		if s.c.dialer == nil {
			return lost
		}
		if i > 0 {
			return nil // the next Fetch opens the next subscription
		}
		if err := s.reopen(ctx, sub, lost); err != nil {
			return err
		}
	}
	return nil
}

// reopen replaces the lost subscription sub with a new one.
func (s *source) reopen(ctx context.Context, sub *subscription, lost error) error {
	s.c.log.Warn("amqpconsumer: the channel was lost; consuming again",
		slog.String("queue", s.c.queue), slog.Any("error", lost))
	s.c.dialer.closeChannel(sub.ch, sub.conn, time.Now().Add(closeTimeout))
	if _, err := s.o.open(ctx); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	s.c.reconnects.Add(1)
	return nil
}
