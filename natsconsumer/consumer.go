package natsconsumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/exactlyonce/retry/idempotency/consumer"
)

// fetchWait bounds one pull request: how long a Fetch waits for messages.
// A stopping consumer waits for its pull request to end (up to this long)
// and handles what it brings: a pull request left at the server would
// take messages nobody reads, costing them a delivery, their last one
// perhaps.
const fetchWait = 2 * time.Second

// fetchRetry is the wait after a failed pull request (the connection is
// down and nats.go restores it, say).
const fetchRetry = 250 * time.Millisecond

// Consumer handles the messages of a JetStream pull consumer with
// exactly-once effect. Its Stats, ListParked and RetryParked are those of
// the consumer.Consumer it wraps.
type Consumer struct {
	*consumer.Consumer
	src *source

	nc         *nats.Conn // WithConn's
	reconnects atomic.Uint64
}

// New returns a Consumer of cons, a pull consumer with explicit acks. In
// cfg, Name defaults to the stream and the consumer's name
// ("ORDERS/ship"), and KeepAlive to a third of cons's AckWait; the
// Handler's Message.Raw is the jetstream.Msg.
func New(cons jetstream.Consumer, cfg consumer.Config, opts ...Option) (*Consumer, error) {
	info := cons.CachedInfo()
	if info == nil {
		return nil, errors.New("natsconsumer: the consumer has no info")
	}
	if info.Config.AckPolicy != jetstream.AckExplicitPolicy {
		return nil, fmt.Errorf("natsconsumer: consumer %s acks with %s; it needs explicit acks", info.Name, info.Config.AckPolicy)
	}
	if cfg.Name == "" {
		cfg.Name = info.Stream + "/" + info.Name
	}
	ackWait := info.Config.AckWait
	if ackWait <= 0 {
		ackWait = 30 * time.Second // JetStream's default
	}
	if cfg.KeepAlive <= 0 {
		cfg.KeepAlive = ackWait / 3
	}
	core, err := consumer.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("natsconsumer: %w", err)
	}
	if md := info.Config.MaxDeliver; md > 0 {
		log := cfg.Logger
		if log == nil {
			log = slog.Default()
		}
		log.Warn("natsconsumer: the JetStream consumer has a MaxDeliver: a message whose last delivery a process took and died before claiming is dropped; leave it unset, consumer.Config.MaxDeliveries parks failing messages",
			slog.String("consumer", info.Name), slog.Int("max_deliver", md))
	}
	c := &Consumer{Consumer: core, src: &source{cons: cons, maxDeliver: info.Config.MaxDeliver}}
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	return c, nil
}

// Run handles messages until ctx ends or the consumer cannot go on (see
// consumer.Consumer.Run): its connection closed, its JetStream consumer
// deleted. While the connection is down, nats.go restores it and Run
// waits.
func (c *Consumer) Run(ctx context.Context) error {
	if c.nc != nil {
		stop := c.countReconnects()
		defer stop()
	}
	return c.Consumer.Run(ctx, c.src)
}

// source pulls deliveries from a JetStream consumer.
type source struct {
	cons       jetstream.Consumer
	maxDeliver int
}

// Fetch implements consumer.Source.
func (s *source) Fetch(ctx context.Context, n int, deliver func(consumer.Delivery)) error {
	// Not cut short by ctx: see fetchWait.
	batch, err := s.cons.Fetch(n, jetstream.FetchMaxWait(fetchWait))
	if err == nil {
		for m := range batch.Messages() {
			deliver(&delivery{msg: m, maxDeliver: s.maxDeliver})
		}
		err = batch.Error()
	}
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case err == nil, errors.Is(err, nats.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return nil
	case errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, jetstream.ErrConsumerDeleted),
		errors.Is(err, jetstream.ErrConsumerNotFound):
		return fmt.Errorf("natsconsumer: %w", err)
	}
	t := time.NewTimer(fetchRetry)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// delivery is one JetStream delivery.
type delivery struct {
	msg        jetstream.Msg
	maxDeliver int
	delivered  uint64
}

// Message implements consumer.Delivery.
func (d *delivery) Message() (*consumer.Message, error) {
	meta, err := d.msg.Metadata()
	if err != nil {
		return nil, fmt.Errorf("natsconsumer: %w: %w", consumer.ErrNoKey, err)
	}
	d.delivered = meta.NumDelivered
	return &consumer.Message{
		Key:       Key(d.msg.Headers(), meta),
		Subject:   d.msg.Subject(),
		Header:    d.msg.Headers(),
		Body:      d.msg.Data(),
		Delivery:  int(meta.NumDelivered),
		Published: meta.Timestamp,
		Raw:       d.msg,
	}, nil
}

// Key returns the key of a JetStream message: its Nats-Msg-Id header, or
// else its stream and stream sequence, as "STREAM:42".
func Key(h nats.Header, meta *jetstream.MsgMetadata) string {
	if id := h.Get(jetstream.MsgIDHeader); id != "" {
		return id
	}
	return fmt.Sprintf("%s:%d", meta.Stream, meta.Sequence.Stream)
}

// Ack implements consumer.Delivery.
func (d *delivery) Ack(context.Context) error { return d.msg.Ack() }

// Nak implements consumer.Delivery.
func (d *delivery) Nak(_ context.Context, delay time.Duration) error {
	if delay <= 0 {
		return d.msg.Nak()
	}
	return d.msg.NakWithDelay(delay)
}

// Term implements consumer.Delivery. The reason is logged and parked by
// the consumer; JetStream servers before 2.10.4 cannot take one.
func (d *delivery) Term(context.Context, string) error { return d.msg.Term() }

// InProgress implements consumer.Delivery.
func (d *delivery) InProgress(context.Context) error { return d.msg.InProgress() }

// Last implements consumer.Delivery.
func (d *delivery) Last() bool {
	return d.maxDeliver > 0 && d.delivered >= uint64(d.maxDeliver)
}
