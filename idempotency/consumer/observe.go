package consumer

import (
	"context"
	"time"
)

// DeliveryOutcome names what became of a delivery, as an Observer hears it. The
// values are stable: metrics use them as labels.
type DeliveryOutcome string

// What became of a delivery. Each delivery ends in one of them but
// DeliveryHeld, which is heard each time a delivery is held before its end.
const (
	// DeliveryExecuted: the handler ran and its outcome was stored, then
	// the delivery was acked.
	DeliveryExecuted DeliveryOutcome = "executed"
	// DeliveryReplayed: the message had completed before (a duplicate):
	// acked without running.
	DeliveryReplayed DeliveryOutcome = "replayed"
	// DeliveryInProgress: another execution held the key: given back; or
	// the broker's last delivery held by a stopping consumer, handed to
	// the store and acked (a Reconciler finishes it).
	DeliveryInProgress DeliveryOutcome = "in_progress"
	// DeliveryRetried: the handler failed transiently; given back to be
	// delivered again after a backoff.
	DeliveryRetried DeliveryOutcome = "retried"
	// DeliveryGivenBack: given back unhandled, by a stopping consumer, or
	// because it came beyond what the consumer asked for or without a key.
	DeliveryGivenBack DeliveryOutcome = "given_back"
	// DeliveryHeld: held instead of given back (through an outage, on a
	// store failure, on the broker's last delivery), to run again here.
	DeliveryHeld DeliveryOutcome = "held"
	// DeliveryParked: parked in the store with its reason (ListParked,
	// RetryParked), then terminated: a failure for a reason.
	DeliveryParked DeliveryOutcome = "parked"
	// DeliveryTerminated: terminated (dead-lettered) without being parked:
	// rejected by the handler, its id reused with another body, or a last
	// delivery the store could not take as the consumer stopped.
	DeliveryTerminated DeliveryOutcome = "terminated"
)

// EventKind tells what an Event reports.
type EventKind int

// Kinds of Event.
const (
	// EventFetched: a fetch from the broker ended (Asked, Fetched).
	EventFetched EventKind = iota + 1
	// EventDelivered: the consumer took a delivery (Key, Delivery, and
	// Waited when WaitKnown).
	EventDelivered
	// EventHandled: the handler returned (Key, Delivery, Duration, Err),
	// for a delivery or a run from the store (RetryParked, a Reconciler:
	// Delivery 0).
	EventHandled
	// EventSettled: something became of a delivery (Outcome, Key,
	// Delivery, Err).
	EventSettled
)

// Event is what an Observer hears of a Consumer.
type Event struct {
	Kind EventKind
	// Consumer is the consumer's Config.Name.
	Consumer string
	// Key and Delivery are the message's (Message.Key and Delivery), when
	// the event is about one the consumer could read.
	Key      string
	Delivery int
	// Outcome is what became of the delivery (EventSettled).
	Outcome DeliveryOutcome
	// Asked is how many deliveries a fetch asked for, Fetched how many it
	// gave (EventFetched).
	Asked, Fetched int
	// Duration is how long the handler ran (EventHandled).
	Duration time.Duration
	// Waited is how long the message waited at the broker before this
	// delivery, from when the broker says it took it
	// (Message.Published) to when the consumer took the delivery, when
	// WaitKnown (EventDelivered).
	Waited    time.Duration
	WaitKnown bool
	// Err is the handler's error (EventHandled), or what decided the
	// outcome (EventSettled), if any.
	Err error
}

// Observer hears every Event of a Consumer, on the goroutine that made
// it: it must be quick and must not block. Use it for metrics (the
// otelretry module provides one) or logs.
type Observer func(ctx context.Context, e Event)

// observe tells the observer, if any, about e.
func (c *Consumer) observe(ctx context.Context, e Event) {
	if c.cfg.Observer != nil {
		e.Consumer = c.cfg.Name
		c.cfg.Observer(ctx, e)
	}
}

// settled tells the observer what became of the delivery of m (nil when
// the consumer could not read it).
func (c *Consumer) settled(ctx context.Context, out DeliveryOutcome, m *Message, err error) {
	if c.cfg.Observer == nil {
		return
	}
	e := Event{Kind: EventSettled, Outcome: out, Err: err}
	if m != nil {
		e.Key, e.Delivery = m.Key, m.Delivery
	}
	c.observe(ctx, e)
}

// delivered tells the observer that the consumer took the delivery of m.
func (c *Consumer) delivered(ctx context.Context, m *Message) {
	if c.cfg.Observer == nil {
		return
	}
	e := Event{Kind: EventDelivered, Key: m.Key, Delivery: m.Delivery}
	if !m.Published.IsZero() {
		e.Waited, e.WaitKnown = max(c.cfg.Clock.Since(m.Published), 0), true
	}
	c.observe(ctx, e)
}
