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
	return func(c *Consumer) { c.nc = nc }
}

// Stats returns the counts of the consumer.Consumer, with Reconnects: the
// times the connection given with WithConn was restored while Run ran
// (0 without it). A reconnect counts once the new connection's handshake
// is done: nats.go's own count also takes in the connections the other
// end dropped before it.
func (c *Consumer) Stats() consumer.Stats {
	s := c.Consumer.Stats()
	s.Reconnects = c.reconnects.Load()
	return s
}

// countReconnects counts the times the connection is connected again,
// until the returned stop is called.
func (c *Consumer) countReconnects() (stop func()) {
	connected := c.nc.StatusChanged(nats.CONNECTED)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range connected { // until RemoveStatusListener closes it
			c.reconnects.Add(1)
		}
	}()
	return func() {
		c.nc.RemoveStatusListener(connected)
		<-done
	}
}
