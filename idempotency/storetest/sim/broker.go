package sim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/exactlyonce/retry/idempotency/consumer"
)

// redelay is when a message given back is delivered again, whatever
// delay the consumer asked for: the next tick of the clock. (The delay the
// consumer computes from a lease read off a server's clock is not exact.)
const redelay = time.Second

// message is one message of the simulated broker.
type message struct {
	key        string
	deliveries int
	readyAt    time.Time
	holder     *actor // the actor holding its delivery, or nil
	// The end of its deliveries: acked, terminated, or dropped (its last
	// delivery died with its consumer).
	acked, termed, dropped bool
	// claimed: a claim of the last delivery reached the store.
	claimed bool
}

func (m *message) settled() bool { return m.acked || m.termed || m.dropped }

// broker is the simulated broker: at-least-once deliveries, redelivery of
// what a crashed consumer held, a delivery limit.
type broker struct {
	w    *world
	msgs []*message
	// maxDeliver is how many deliveries the broker makes of a message
	// (as JetStream's MaxDeliver, a quorum queue's delivery limit): the
	// last one, given back, would be dropped. 1 to 3, by seed.
	maxDeliver int
	// hideLast makes every delivery say it is not the last (a mutant:
	// an adapter that does not tell).
	hideLast bool
}

// next returns the first message ready for delivery, or nil.
func (b *broker) next() *message {
	now := b.w.now()
	for _, m := range b.msgs {
		if !m.settled() && m.holder == nil && !now.Before(m.readyAt) {
			return m
		}
	}
	return nil
}

// pending returns the earliest time a message not settled becomes ready,
// and whether there is one not held.
func (b *broker) pending() (time.Time, bool) {
	var at time.Time
	found := false
	for _, m := range b.msgs {
		if m.settled() || m.holder != nil {
			continue
		}
		if !found || m.readyAt.Before(at) {
			at, found = m.readyAt, true
		}
	}
	return at, found
}

// deliver hands m to a.
func (b *broker) deliver(a *actor, m *message) *delivery {
	m.deliveries++
	m.holder = a
	return &delivery{a: a, b: b, m: m, n: m.deliveries, last: m.deliveries == b.maxDeliver}
}

// lost settles what a crashed actor held: delivered again, or dropped if
// it was the last delivery.
func (b *broker) lost(d *delivery) {
	if d.done {
		return
	}
	d.done = true
	if d.stale {
		return
	}
	d.m.holder = nil
	if d.last {
		d.m.dropped = true
		b.w.logf("broker: %s dropped (its last delivery died with %s)", d.m.key, d.a.name)
		return
	}
	d.m.readyAt = b.w.now()
}

// expire passes d's ack deadline, its consumer paused: the message is
// delivered again (to whichever consumer fetches next) while d is still
// held. The broker's last delivery is not made again.
func (b *broker) expire(d *delivery) {
	if d.done || d.stale || d.last {
		return
	}
	d.stale = true
	d.m.holder = nil
	d.m.readyAt = b.w.now()
	b.w.logf("broker: %s#%d ack deadline passed: %s to be delivered again", d.m.key, d.n, d.m.key)
}

// delivery is one delivery of a message to a consumer actor.
type delivery struct {
	a    *actor
	b    *broker
	m    *message
	n    int
	last bool
	done bool
	// stale: its ack deadline passed and the message was made ready
	// again: settling it acks or terminates the message, as JetStream
	// does, but never gives it back.
	stale bool
	// end ends the context of the consumer's Run that holds it: the Run
	// returns once it is settled.
	end context.CancelFunc
}

var _ consumer.Delivery = (*delivery)(nil)

// Message returns the message: its body is its key.
func (d *delivery) Message() (*consumer.Message, error) {
	return &consumer.Message{Key: d.m.key, Subject: "sim", Body: []byte(d.m.key), Delivery: d.n}, nil
}

func (d *delivery) settle(how string) error {
	if err := d.a.gate(fmt.Sprintf("%s %s#%d", how, d.m.key, d.n)); err != nil {
		return err
	}
	if d.done {
		d.b.w.violate("%s settled %s#%d twice (%s)", d.a.name, d.m.key, d.n, how)
		return errors.New("sim: settled twice")
	}
	d.done = true
	if !d.stale {
		d.m.holder = nil
	}
	if d.end != nil {
		d.end()
	}
	return nil
}

// Ack acknowledges the delivery. On the last one, the store must have the
// outcome or own the message.
func (d *delivery) Ack(context.Context) error {
	if err := d.settle("ack"); err != nil {
		return err
	}
	if !d.m.settled() {
		d.m.acked = true
	}
	d.b.w.checkOwned(d, "acked")
	return nil
}

// Nak gives the message back; the last delivery given back is dropped,
// which the protocol never allows.
func (d *delivery) Nak(_ context.Context, delay time.Duration) error {
	if err := d.settle("nak"); err != nil {
		return err
	}
	if d.stale || d.m.settled() {
		return nil
	}
	if d.last {
		d.m.dropped = true
		d.b.w.violate("%s gave back the last delivery of %s (the broker drops it)", d.a.name, d.m.key)
		return nil
	}
	d.m.readyAt = d.b.w.now()
	if delay > 0 {
		d.m.readyAt = d.m.readyAt.Add(redelay)
	}
	return nil
}

// Term ends the message's deliveries. On the last one (or any), the store
// must then own it: a terminated message of this simulation is parked.
func (d *delivery) Term(_ context.Context, reason string) error {
	if err := d.settle("term"); err != nil {
		return err
	}
	if !d.m.settled() {
		d.m.termed = true
	}
	d.b.w.logf("  term reason: %s", reason)
	d.b.w.checkOwned(d, "terminated")
	return nil
}

// InProgress does nothing: the broker's ack deadline is not simulated
// (a consumer that dies is seen at once).
func (d *delivery) InProgress(context.Context) error { return nil }

// Last reports whether this is the broker's last delivery of the message.
func (d *delivery) Last() bool { return d.last && !d.b.hideLast }

// source is the Source of one consumer Run: its first Fetch takes the
// first message ready from the broker and delivers it, then waits until
// the Run's context ends, which settling the delivery does (delivery.end),
// as do a stop and a crash. With no message ready, it ends the Run.
type source struct {
	a       *actor
	end     context.CancelFunc
	fetched bool
}

// Fetch delivers one delivery, once, and waits for the end of the Run.
func (s *source) Fetch(ctx context.Context, _ int, deliver func(consumer.Delivery)) error {
	if !s.fetched {
		s.fetched = true
		b := s.a.w.broker
		if m := b.next(); m != nil && !s.a.crashed.Load() {
			d := b.deliver(s.a, m)
			d.end = s.end
			s.a.delivery = d
			s.a.w.logf("  %s: fetch: %s#%d (last %v)", s.a.name, m.key, d.n, d.last)
			deliver(d)
		} else {
			s.a.w.logf("  %s: fetch: nothing", s.a.name)
			s.end()
		}
	}
	<-ctx.Done()
	return ctx.Err()
}
