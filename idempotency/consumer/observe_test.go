package consumer_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	retry "github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/consumer"
)

// events records what an Observer hears.
type events struct {
	mu  sync.Mutex
	all []consumer.Event
}

func (e *events) observe(_ context.Context, ev consumer.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = append(e.all, ev)
}

// of returns the events of kind, in the order heard.
func (e *events) of(kind consumer.EventKind) []consumer.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []consumer.Event
	for _, ev := range e.all {
		if ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

// byKey returns the events of kind by key.
func (e *events) byKey(kind consumer.EventKind) map[string]consumer.Event {
	out := make(map[string]consumer.Event)
	for _, ev := range e.of(kind) {
		out[ev.Key] = ev
	}
	return out
}

// An Observer hears each fetch (asked, fetched), each delivery taken with
// how long the broker held it where it says, each run of the handler with
// its duration, and what became of each delivery.
func TestObserverHearsDeliveriesHandlersAndFetches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var heard events
		runner := idempotency.NewRunner(nil)
		c, err := consumer.New(consumer.Config{Runner: runner, Name: "ship", MaxInFlight: 8, Observer: heard.observe,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Handler: func(ctx context.Context, m *consumer.Message) error {
				switch m.Key {
				case "slow":
					time.Sleep(2 * time.Second)
				case "flaky":
					return errors.New("flaky")
				case "bad":
					return idempotency.Reject(errors.New("malformed order"))
				case "poison":
					return retry.Permanent(errors.New("no such product"))
				}
				return nil
			}})
		require.NoError(t, err)
		run(t, c, newDelivery("done", 1, false))

		published := newDelivery("slow", 1, false)
		published.msg.Published = time.Now().Add(-3 * time.Second)
		run(t, c, published, newDelivery("done", 2, false), newDelivery("flaky", 1, false),
			newDelivery("bad", 1, false), newDelivery("poison", 1, false))

		settled := heard.byKey(consumer.EventSettled)
		want := map[string]consumer.DeliveryOutcome{"slow": consumer.DeliveryExecuted, "done": consumer.DeliveryReplayed,
			"flaky": consumer.DeliveryRetried, "bad": consumer.DeliveryTerminated, "poison": consumer.DeliveryParked}
		for key, out := range want {
			assert.Equal(t, out, settled[key].Outcome, key)
			assert.Equal(t, "ship", settled[key].Consumer, key)
		}
		assert.Len(t, heard.of(consumer.EventSettled), 6, "one outcome per delivery: a parked message is not also counted terminated")
		assert.Error(t, settled["poison"].Err)

		handled := heard.byKey(consumer.EventHandled)
		assert.Equal(t, 2*time.Second, handled["slow"].Duration)
		assert.NoError(t, handled["slow"].Err)
		assert.Error(t, handled["flaky"].Err)
		runs := 0
		for _, ev := range heard.of(consumer.EventHandled) {
			if ev.Key == "done" {
				runs++
			}
		}
		assert.Equal(t, 1, runs, "a replayed delivery runs no handler")

		delivered := heard.byKey(consumer.EventDelivered)
		assert.True(t, delivered["slow"].WaitKnown)
		assert.Equal(t, 3*time.Second, delivered["slow"].Waited)
		assert.False(t, delivered["flaky"].WaitKnown, "the broker did not say when it took it")
		assert.Equal(t, 1, delivered["flaky"].Delivery)

		fetches := heard.of(consumer.EventFetched)
		require.NotEmpty(t, fetches)
		assert.Equal(t, consumer.Event{Kind: consumer.EventFetched, Consumer: "ship", Asked: 8, Fetched: 1}, fetches[0])
		var fetched int
		for _, f := range fetches {
			fetched += f.Fetched
		}
		assert.Equal(t, 6, fetched)
	})
}

// A stopping consumer's observer hears the deliveries it gives back and
// the last ones it hands to the store, and a held delivery is heard as
// held first.
func TestObserverHearsAStopsDeliveries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var heard events
		c, err := consumer.New(consumer.Config{Runner: idempotency.NewRunner(nil), Name: "ship", Observer: heard.observe,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Handler: func(context.Context, *consumer.Message) error {
				return retry.ErrDependencyDown
			}})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		ds := []*delivery{newDelivery("ordinary", 1, false), newDelivery("last", 2, true)}
		errc := make(chan error, 1)
		go func() { errc <- c.Run(ctx, &source{ds: ds}) }()
		synctest.Wait() // both held through the outage
		cancel()
		require.ErrorIs(t, <-errc, context.Canceled)
		settled := heard.of(consumer.EventSettled)
		outcomes := make(map[string][]consumer.DeliveryOutcome)
		for _, ev := range settled {
			outcomes[ev.Key] = append(outcomes[ev.Key], ev.Outcome)
		}
		assert.Equal(t, []consumer.DeliveryOutcome{consumer.DeliveryHeld, consumer.DeliveryGivenBack}, outcomes["ordinary"])
		assert.Equal(t, []consumer.DeliveryOutcome{consumer.DeliveryHeld, consumer.DeliveryInProgress}, outcomes["last"])
	})
}
