package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/exactlyonce/retry/backoff"

	"github.com/exactlyonce/retry/amqpconsumer"
	"github.com/exactlyonce/retry/idempotency/consumer"
)

// rabbitBroker is RabbitMQ: a quorum queue of the scenario's own with the
// scenario's delivery limit (none for ours) and a dead-letter queue. RabbitMQ keeps
// a publisher's repeat as a second message.
type rabbitBroker struct {
	url, queue, dlq string
	s               *scenario
	conn            *amqp.Connection
	ch              *amqp.Channel
}

func (b *rabbitBroker) name() string { return "RabbitMQ" }

func (b *rabbitBroker) setup(context.Context) error {
	b.queue = fmt.Sprintf("orders-%d", time.Now().UnixNano())
	b.dlq = b.queue + ".dead"
	conn, err := amqp.Dial(b.url)
	if err != nil {
		return fmt.Errorf("connect to RabbitMQ at %s: %w", b.url, err)
	}
	b.conn = conn
	if b.ch, err = conn.Channel(); err != nil {
		return err
	}
	if _, err := b.ch.QueueDeclare(b.dlq, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
		return fmt.Errorf("declare the dead-letter queue: %w", err)
	}
	_, err = b.ch.QueueDeclare(b.queue, true, false, false, false, b.queueArgs())
	if err != nil {
		return fmt.Errorf("declare the queue: %w", err)
	}
	return nil
}

// queueArgs are the queue's arguments: a quorum queue with the
// scenario's delivery limit (none for ours) and a dead-letter queue.
func (b *rabbitBroker) queueArgs() amqp.Table {
	args := amqp.Table{"x-queue-type": "quorum", "x-dead-letter-exchange": "", "x-dead-letter-routing-key": b.dlq}
	if n := b.s.brokerLimit(); n > 0 {
		args["x-delivery-limit"] = int32(n)
	}
	return args
}

func (b *rabbitBroker) teardown() {
	_, _ = b.ch.QueueDelete(b.queue, false, false, false)
	_, _ = b.ch.QueueDelete(b.dlq, false, false, false)
	_ = b.conn.Close()
}

func (b *rabbitBroker) publish(ctx context.Context, msgs []message) error {
	ch, err := b.conn.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		return err
	}
	const window = 512
	for start := 0; start < len(msgs); start += window {
		var confirms []*amqp.DeferredConfirmation
		for _, m := range msgs[start:min(start+window, len(msgs))] {
			dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", b.queue, false, false,
				amqp.Publishing{MessageId: m.id, DeliveryMode: amqp.Persistent, Timestamp: time.Now(), Body: m.body})
			if err != nil {
				return fmt.Errorf("publish: %w", err)
			}
			confirms = append(confirms, dc)
		}
		for _, dc := range confirms {
			if ok, err := dc.WaitContext(ctx); err != nil || !ok {
				return fmt.Errorf("publish: not confirmed: %v", err)
			}
		}
	}
	return nil
}

// connect connects inst, through its dialer.
func (b *rabbitBroker) connect(inst *instance) (*amqp.Connection, error) {
	conn, err := amqp.DialConfig(b.url, amqp.Config{Dial: inst.dial, Heartbeat: 10 * time.Second})
	if err != nil {
		return nil, err
	}
	inst.close = func() { _ = conn.Close() }
	return conn, nil
}

// ours makes our consumer on an amqpconsumer.Conn, which connects again
// after a loss (-cut) until the instance is killed.
func (b *rabbitBroker) ours(_ context.Context, inst *instance, cfg consumer.Config) (statser, func(context.Context) error, error) {
	conn := amqpconsumer.NewConn(func(context.Context) (*amqp.Connection, error) {
		return amqp.DialConfig(b.url, amqp.Config{Dial: inst.dial, Heartbeat: 10 * time.Second})
	}, amqpconsumer.WithConnLogger(quietLogger()),
		amqpconsumer.WithRedialBackoff(backoff.FullJitter(10*time.Millisecond, time.Second)))
	inst.close = func() { _ = conn.Close() }
	c, err := conn.NewConsumer(b.queue, cfg)
	if err != nil {
		return nil, nil, err
	}
	return c, c.Run, nil
}

func (b *rabbitBroker) simple(_ context.Context, inst *instance, markBefore bool) (func(context.Context) error, error) {
	conn, err := b.connect(inst)
	if err != nil {
		return nil, err
	}
	ch, err := conn.Channel()
	if err != nil {
		return nil, err
	}
	if err := ch.Qos(maxInFlight, 0, false); err != nil {
		return nil, err
	}
	const tag = "simple"
	deliveries, err := ch.Consume(b.queue, tag, false, false, false, false, nil)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		var wg sync.WaitGroup
		defer wg.Wait()
		for {
			select {
			case <-ctx.Done():
				if ch.Cancel(tag, false) == nil {
					for d := range deliveries {
						_ = d.Nack(false, true)
					}
				}
				return nil
			case d, ok := <-deliveries:
				if !ok {
					return nil
				}
				inst.inHand.Add(1)
				wg.Go(func() {
					settle := func(ack bool) {
						if ack {
							_ = d.Ack(false)
						} else {
							_ = d.Nack(false, true)
						}
						inst.inHand.Add(-1)
					}
					b.s.simpleHandle(inst, d.MessageId, markBefore, func() { settle(true) }, func() { settle(false) })
				})
			}
		}
	}, nil
}

func (b *rabbitBroker) pending(context.Context) (int, error) {
	q, err := b.ch.QueueDeclarePassive(b.queue, true, false, false, false, b.queueArgs())
	if err != nil {
		return 0, err
	}
	return q.Messages, nil
}

func (b *rabbitBroker) deadLettered(context.Context) (map[string]bool, error) {
	dead := make(map[string]bool)
	for {
		d, ok, err := b.ch.Get(b.dlq, true)
		if err != nil {
			return nil, err
		}
		if !ok {
			return dead, nil
		}
		dead[d.MessageId] = true
	}
}
