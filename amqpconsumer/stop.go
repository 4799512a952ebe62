package amqpconsumer

import (
	"context"
	"time"
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
// (consumer.Consumer.Decline), the others it keeps unacked. It stops once
// its prefetch is full (the queue can send nothing more), once nothing
// came for lateQuiet, or when the grace period ends; it then cancels the
// subscription, so that the queue assigns it nothing more, and acks the
// deliveries the store took, so that the close gives back only the
// others (each costing the delivery a give-back costs) and the
// dead-letter queue gets no copy of a message the store owns.
func (c *Consumer) settleLate(ctx context.Context, sub *subscription) {
	grace, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.grace)
	defer cancel()
	var owned []*delivery // taken by the store: acked before the close
	defer func() {
		if len(owned) == 0 || sub.ch.Cancel(sub.tag, false) != nil {
			return // the close gives them back: copies the queue dead-letters
		}
		for _, d := range owned {
			_ = d.d.Ack(false)
		}
	}()
	quiet := time.NewTimer(lateQuiet)
	defer quiet.Stop()
	for kept := 0; kept < c.pre; {
		select {
		case d, ok := <-sub.deliveries:
			if !ok {
				return
			}
			if dd := (&delivery{d: d, set: &c.set}); dd.Last() {
				k := &keptDelivery{delivery: dd}
				c.Decline(grace, k)
				if k.owned {
					owned = append(owned, dd)
				}
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

// keptDelivery is a delivery whose ack waits for the subscription's
// cancel: see settleLate.
type keptDelivery struct {
	*delivery
	owned bool // acked by the consumer: the store took the message
}

// Ack implements consumer.Delivery: it records that the store took the
// message.
func (k *keptDelivery) Ack(context.Context) error {
	k.owned = true
	return nil
}
