package main

import (
	"context"
	"io"
	"log/slog"

	"github.com/exactlyonce/retry/idempotency/consumer"
)

// message is one message to publish: an order.
type message struct {
	id   string
	body []byte
}

// broker is one broker, with a stream or queue of its own for one scenario.
type broker interface {
	// name names the broker in the table.
	name() string
	// setup creates the scenario's stream or queue; teardown deletes it.
	setup(ctx context.Context) error
	teardown()
	// publish publishes msgs, each keyed by its id, and waits for the
	// broker to have them.
	publish(ctx context.Context, msgs []message) error
	// ours connects inst and makes our consumer with cfg.
	ours(ctx context.Context, inst *instance, cfg consumer.Config) (statser, func(context.Context) error, error)
	// simple connects inst and makes a plain or mark-before consumer.
	simple(ctx context.Context, inst *instance, markBefore bool) (func(context.Context) error, error)
	// pending returns how many messages the broker holds for the consumer
	// (not yet acked, as far as the broker tells).
	pending(ctx context.Context) (int, error)
	// deadLettered returns the orders the broker dead-lettered or dropped
	// at its delivery limit, or the consumer terminated.
	deadLettered(ctx context.Context) (map[string]bool, error)
}

// statser is our consumer, as the scenario watches it.
type statser interface{ Stats() consumer.Stats }

// quietLogger discards the consumers' logs (the faults are on purpose).
func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
