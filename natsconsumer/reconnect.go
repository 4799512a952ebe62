package natsconsumer

import (
	"github.com/nats-io/nats.go"

	"github.com/exactlyonce/retry/idempotency/consumer"
)

// Option configures a Consumer.
type Option func(*Consumer)

// WithConn tells the consumer the connection its JetStream consumer is
// on, so that its Stats count the connection's reconnects (nats.go
// restores a lost connection itself, and the consumer waits meanwhile).
func WithConn(nc *nats.Conn) Option {
	return func(c *Consumer) {
		c.nc = nc
		if nc != nil {
			c.reconnectsBefore = nc.Stats().Reconnects
		}
	}
}

// Stats returns the counts of the consumer.Consumer, with Reconnects: the
// times nats.go restored the connection given with WithConn since New
// (0 without it).
func (c *Consumer) Stats() consumer.Stats {
	s := c.Consumer.Stats()
	if c.nc != nil {
		s.Reconnects = c.nc.Stats().Reconnects - c.reconnectsBefore
	}
	return s
}
