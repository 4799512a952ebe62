package consumer

import (
	"context"
	"errors"
	"time"
)

// Delivery is one delivery of a message, as a broker adapter presents it
// to a Consumer. The Consumer settles it once: Ack, Nak or Term.
type Delivery interface {
	// Message returns the message, with its Key; an error matching ErrNoKey
	// when it has no id to key it by.
	Message() (*Message, error)
	// Ack acknowledges the delivery: the message is done.
	Ack(ctx context.Context) error
	// Nak gives the message back, to be delivered again after delay (at
	// once when delay is 0). A broker that cannot delay a redelivery
	// holds the delivery for delay first; ctx's end cuts that short.
	Nak(ctx context.Context, delay time.Duration) error
	// Term ends the message's deliveries for reason: it is dead-lettered
	// where the broker can, and never delivered again.
	Term(ctx context.Context, reason string) error
	// InProgress tells the broker that the delivery is still being worked
	// on, so it is not delivered to another consumer meanwhile; an adapter
	// whose broker needs nothing does nothing.
	InProgress(ctx context.Context) error
	// Last reports whether this is the last delivery the broker allows:
	// given back, it would be dropped or dead-lettered.
	Last() bool
}

// Source gives a Consumer its deliveries.
type Source interface {
	// Fetch asks the broker for up to n deliveries (n >= 1) and calls
	// deliver with each as it comes, one at a time, then returns; it may return having
	// delivered fewer, or none, when a wait of its own ended first. It
	// handles the failures it can wait out itself (a lost connection that
	// its client restores) and returns only those that end the consumer,
	// or ctx's error.
	Fetch(ctx context.Context, n int, deliver func(Delivery)) error
}

// ErrNoKey is matched by the error of a message that has no id to key it
// by. A Consumer that meets one stops (Run returns the error) and gives
// the message back unprocessed, since running it without a key could run
// it twice: give the adapter a way to key it, or have publishers set the id.
var ErrNoKey = errors.New("consumer: the message has no id to key it by")
