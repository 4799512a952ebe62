package consumer

import (
	"errors"
	"log/slog"
	"time"

	"github.com/benbjohnson/clock"

	retry "github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/backoff"
	"github.com/exactlyonce/retry/idempotency"
)

// Defaults of a Config.
const (
	// DefaultMaxInFlight is how many messages a Consumer handles at once.
	DefaultMaxInFlight = 64
	// DefaultMaxDeliveries is how many deliveries of a message may fail
	// before the consumer parks it.
	DefaultMaxDeliveries = 20
	// DefaultKeepAlive is how often a delivery in hand is kept alive at the
	// broker when the adapter says nothing else.
	DefaultKeepAlive = 10 * time.Second
	// DefaultStopGrace is how long a stopping Consumer waits for its
	// running handlers: well within the time a process manager gives a
	// stopping process before it kills it (30 s on Kubernetes by default).
	DefaultStopGrace = 20 * time.Second
	// DefaultReconcileInterval is how often the consumer's Reconciler
	// looks for stalled executions: with DefaultLease, a dead consumer's
	// last deliveries are finished within about 15 s.
	DefaultReconcileInterval = 5 * time.Second
	// DefaultBatchWait is how long at most the stored outcome of a message
	// waits for the slower handlers of its batch before it is committed
	// without them.
	DefaultBatchWait = 10 * time.Millisecond
)

// Config configures a Consumer.
type Config struct {
	// Runner runs the handler, at most once to completion per key.
	// Required.
	Runner *idempotency.Runner
	// Name names the consumer: its handler is registered with the Runner
	// under it (for RetryParked and a Reconciler: one name per consumer
	// of a Runner), and it is the caller of its keys unless Caller is set.
	// Required.
	Name string
	// Caller scopes the keys like an HTTP caller (default Name). Every
	// instance of one consumer must use the same.
	Caller string
	// Handler processes each message. Required.
	Handler Handler
	// MaxInFlight is how many messages are handled at once (default
	// DefaultMaxInFlight).
	MaxInFlight int
	// MaxDeliveries is how many deliveries of a message (the broker's
	// count, Message.Delivery) may fail before the consumer parks it
	// (default DefaultMaxDeliveries): the delivery that reaches it and
	// fails is parked with its reason and terminated, as a permanent
	// failure is. The consumer counts, not the broker: give the broker no
	// delivery limit (see the package documentation, "Delivery limits").
	// Deliveries held through an outage or a store failure cost none.
	MaxDeliveries int
	// Backoff spaces the redeliveries of a message that failed
	// transiently, by its delivery count, and the runs of a held one
	// (default: backoff.FullJitter(100*time.Millisecond, 10*time.Second),
	// waits of up to 100 ms doubling to 10 s).
	Backoff backoff.Backoff
	// DependsOn are the retry budgets of the dependencies the handler
	// calls through retry.Do with retry.WithBudget: while one says its
	// dependency is down, the consumer rides the outage through (see the
	// package documentation).
	DependsOn []*retry.Budget
	// Down, if set, reports whether a dependency of the handler is down
	// now, beside DependsOn.
	Down func() bool
	// KeepAlive is how often a delivery in hand is kept alive at the
	// broker (Delivery.InProgress), which must be well within the broker's
	// ack deadline (default DefaultKeepAlive; the adapters set a third of
	// theirs). The execution's lease is renewed every third of the
	// Runner's lease.
	KeepAlive time.Duration
	// StopGrace is how long Run, once it stops (its context ended, or its
	// Source failed), waits for the handlers that run to finish and for
	// the store to take the last deliveries it holds (default
	// DefaultStopGrace); see the package documentation.
	StopGrace time.Duration
	// BatchWait bounds, on a Runner whose store is an
	// idempotency.BatchStore, how long a message's outcome waits for the
	// other messages of its batch to be committed with them (default
	// DefaultBatchWait); a batch is committed as soon as all its messages
	// ran, without waiting. See the package documentation.
	BatchWait time.Duration
	// ReconcileInterval is how often the consumer's own Reconciler looks
	// for the stalled executions of its caller (default
	// DefaultReconcileInterval): those of a consumer that
	// died, and the broker's last deliveries a stopping consumer handed to
	// the store. See the package documentation.
	ReconcileInterval time.Duration
	// Clock times keep-alives, holds, backoffs and the stop's grace period
	// (default the system clock).
	Clock clock.Clock
	// Logger reports what the consumer decides about deliveries that did
	// not simply complete (default slog.Default()).
	Logger *slog.Logger
	// Observer, if set, hears what the consumer does: its fetches, each
	// delivery taken and what became of it, each run of the handler (see
	// Event). Default none, at no cost.
	Observer Observer
}

func (c Config) withDefaults() (Config, error) {
	switch {
	case c.Runner == nil:
		return c, errors.New("consumer: Config.Runner is required")
	case c.Name == "":
		return c, errors.New("consumer: Config.Name is required")
	case c.Handler == nil:
		return c, errors.New("consumer: Config.Handler is required")
	}
	if c.Caller == "" {
		c.Caller = c.Name
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.MaxDeliveries <= 0 {
		c.MaxDeliveries = DefaultMaxDeliveries
	}
	if c.Backoff == nil {
		c.Backoff = backoff.FullJitter(100*time.Millisecond, 10*time.Second)
	}
	if c.KeepAlive <= 0 {
		c.KeepAlive = DefaultKeepAlive
	}
	if c.StopGrace <= 0 {
		c.StopGrace = DefaultStopGrace
	}
	if c.BatchWait <= 0 {
		c.BatchWait = DefaultBatchWait
	}
	if c.ReconcileInterval <= 0 {
		c.ReconcileInterval = DefaultReconcileInterval
	}
	if c.Clock == nil {
		c.Clock = clock.New()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}
