package amqpconsumer

import (
	"context"
	"fmt"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// subscription is a channel consuming the queue.
type subscription struct {
	ch         *amqp.Channel
	conn       *amqp.Connection // ch's
	tag        string
	deliveries <-chan amqp.Delivery
	closed     <-chan *amqp.Error
}

// subscribe consumes queue on ch with a prefetch of prefetch.
func subscribe(ch *amqp.Channel, conn *amqp.Connection, queue, tag string, prefetch int) (*subscription, error) {
	if err := ch.Qos(prefetch, 0, false); err != nil {
		return nil, fmt.Errorf("amqpconsumer: set the prefetch: %w", err)
	}
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	deliveries, err := ch.Consume(queue, tag, false, false, false, false, nil)
	if err != nil {
		return nil, fmt.Errorf("amqpconsumer: consume %s: %w", queue, err)
	}
	return &subscription{ch: ch, conn: conn, tag: tag, deliveries: deliveries, closed: closed}, nil
}

// lostErr returns why the subscription's deliveries ended.
func (s *subscription) lostErr() error {
	select {
	case e := <-s.closed:
		if e != nil {
			return fmt.Errorf("amqpconsumer: the channel closed: %w", e)
		}
	default:
	}
	return fmt.Errorf("amqpconsumer: the channel closed: %w", amqp.ErrClosed)
}

// opener opens the subscriptions of a Consumer: the first, and, on a
// Conn, the next ones after a loss.
type opener struct {
	c *Consumer

	mu      sync.Mutex
	current *subscription
	stopped bool
}

// open opens a subscription: on the Consumer's connection, once; on its
// Conn, until one opens or ctx ends (the Conn's dial and backoff, see
// Conn). It fails once stop was called.
func (o *opener) open(ctx context.Context) (*subscription, error) {
	c := o.c
	var sub *subscription
	var err error
	if c.dialer == nil {
		sub, err = o.openOn(func() (*amqp.Channel, *amqp.Connection, error) {
			ch, err := c.conn.Channel()
			return ch, c.conn, err
		})
	} else {
		err = retryDo(ctx, c.dialer, func(ctx context.Context) error {
			sub, err = o.openOn(func() (*amqp.Channel, *amqp.Connection, error) { return c.dialer.channel(ctx) })
			return err
		})
	}
	if err != nil {
		return nil, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stopped {
		c.dialer.closeChannel(sub.ch, sub.conn, time.Now().Add(closeTimeout))
		return nil, context.Canceled
	}
	o.current = sub
	return sub, nil
}

// openOn opens a channel with open and subscribes on it.
func (o *opener) openOn(open func() (*amqp.Channel, *amqp.Connection, error)) (*subscription, error) {
	ch, conn, err := open()
	if err != nil {
		return nil, err
	}
	sub, err := subscribe(ch, conn, o.c.queue, o.c.tag, o.c.pre)
	if err != nil {
		o.c.dialer.closeChannel(ch, conn, time.Now().Add(closeTimeout))
		return nil, err
	}
	return sub, nil
}

// halt opens no more subscriptions and returns the current one, left
// subscribed: a stopping consumer settles what it still delivers (see
// Consumer.settleLate) before its channel closes.
func (o *opener) halt() *subscription {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.stopped = true
	return o.current
}

// isStopped reports whether stop was called.
func (o *opener) isStopped() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.stopped
}

// close closes the current subscription's channel, waiting for the
// broker's answer until deadline, or closeFloor if that is later; past
// it, a Conn's connection is closed hard (see Conn.closeChannel).
func (o *opener) close(deadline time.Time) {
	o.mu.Lock()
	sub := o.current
	o.current = nil
	o.mu.Unlock()
	if sub != nil {
		o.c.dialer.closeChannel(sub.ch, sub.conn, later(deadline, time.Now().Add(closeFloor)))
	}
}

// closeFloor is the least a stopping consumer waits for the close of its
// channel, when its grace has ended.
const closeFloor = 250 * time.Millisecond

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
