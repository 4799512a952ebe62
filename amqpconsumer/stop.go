package amqpconsumer

import (
	"context"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// lateQuiet is how long a stopping consumer waits for one more delivery
// before it closes its channel, when its prefetch is not full.
const lateQuiet = 250 * time.Millisecond

// settleLate settles what the broker delivers once the consumer stopped
// fetching, until closing the channel can cost no last delivery. A
// quorum queue gives each consumer up to its prefetch of messages in
// flight; closing the channel (or cancelling the subscription, which
// leaves them stuck until the close) returns those it has not yet
// delivered, counting a delivery for each, so that one on its last
// delivery is dead-lettered unseen. So the consumer stays subscribed and
// takes them, settling none at the broker, which would free room for
// more: the broker's last deliveries it hands to the store
// (consumer.Consumer.Decline) and keeps unacked; the others it keeps
// unacked. The close gives them all back, costing each the delivery a
// give-back costs: a handed-over one is then dead-lettered, a copy of a
// message its store owns. It stops once its prefetch is full (the queue
// can send nothing more), once nothing came for lateQuiet, or at the end
// of the stop's grace period, deadline (after lateQuiet at least: what
// the queue had sent is taken even when the handlers used all the grace).
func (c *Consumer) settleLate(deliveries <-chan amqp.Delivery, deadline time.Time) {
	grace, cancel := context.WithDeadline(context.Background(), later(deadline, time.Now().Add(lateQuiet)))
	defer cancel()
	quiet := time.NewTimer(lateQuiet)
	defer quiet.Stop()
	for kept := 0; kept < c.pre; {
		select {
		case d, ok := <-deliveries:
			if !ok {
				return
			}
			if dd := (&delivery{d: d, set: &c.set}); dd.Last() {
				c.Decline(grace, keptDelivery{dd})
			}
			kept++
			quiet.Reset(lateQuiet)
		case <-quiet.C:
			return
		case <-grace.Done():
			return
		}
	}
}

// keptDelivery is a delivery whose ack is left to the channel's close: see
// settleLate.
type keptDelivery struct{ *delivery }

// Ack implements consumer.Delivery: it does nothing.
func (keptDelivery) Ack(context.Context) error { return nil }
