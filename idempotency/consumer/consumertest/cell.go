package consumertest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	retry "github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/consumer"
)

// cell is one cell of the matrix: the fault strikes the doomed message at
// the point, on its first delivery or on its last.
type cell struct {
	fault  Fault
	point  Point
	doomed string
	// target is the delivery the fault strikes: the earlier ones fail
	// transiently.
	target int
	g      *gate
	fx     *downstream
}

// handler is the cell's handler: every instance's. Its effect is a Step's
// downstream call.
func (c *cell) handler(ctx context.Context, m *consumer.Message) error {
	if m.Key == c.doomed && m.Delivery > 0 && m.Delivery < c.target {
		return errFlaky
	}
	if c.g.strikes(MidHandler, m.Key) {
		if err := c.g.strike(); err != nil {
			return err
		}
	}
	_, err := idempotency.FromContext(ctx).Step(ctx, "effect", func(_ context.Context, dk string) ([]byte, error) {
		c.fx.call(m.Key, dk)
		return nil, nil
	})
	if err != nil {
		return err
	}
	if c.g.strikes(AfterEffect, m.Key) {
		if err := c.g.strike(); err != nil {
			return err
		}
	}
	return nil
}

func runCell(t *testing.T, b Broker, f Fault, p Point, on On, batched bool) {
	limit := 0
	if on == BrokersLastDelivery {
		limit = deliveries
	}
	q := b.Queue(t, limit)
	c := &cell{fault: f, point: p, doomed: "m0", target: 1, fx: newDownstream()}
	if on != FirstDelivery {
		c.target = deliveries
	}
	nth := 1
	if p == BeforeClaim || p == AfterClaim {
		nth = c.target // one claim per delivery
	}
	c.g = newGate(f, p, c.doomed, nth)
	keys := make([]string, messages)
	for i := range keys {
		keys[i] = fmt.Sprintf("m%d", i)
		q.Publish(t, keys[i], "body of "+keys[i])
	}
	shared := newStore(batched)
	name := "matrix"
	runnerA := idempotency.NewRunner(stricken(shared, c.g), idempotency.WithLease(lease))
	a := start(q.Consumer(t, config(runnerA, name, c.handler)))
	defer a.stop(t)
	defer c.releaseOnce()

	select {
	case <-c.g.reached:
	case <-a.done:
		t.Fatalf("the consumer's Run returned before the fault struck: %v", a.err)
	case <-time.After(bound):
		t.Fatal("the fault never struck")
	}

	// What goes on after the fault: an instance's Runner, and its consumer.
	runnerB := runnerA
	var b2 *running
	switch f {
	case Killed:
		a.c.Drop()
		runnerB = idempotency.NewRunner(shared, idempotency.WithLease(lease))
		b2 = start(q.Consumer(t, config(runnerB, name, c.handler)))
	case Paused:
		runnerB = idempotency.NewRunner(shared, idempotency.WithLease(lease))
		b2 = start(q.Consumer(t, config(runnerB, name, c.handler)))
		t0 := time.NewTimer(2 * lease) // the pause: past the lease
		<-t0.C
		c.releaseOnce()
	case Dropped, Stopped:
		if f == Dropped {
			a.c.Drop()
		} else {
			a.cancel()
		}
		c.releaseOnce()
		a.wait(t)
		b2 = start(q.Consumer(t, config(runnerA, name, c.handler)))
	case StoreFails:
		// The consumer goes on alone.
	}
	if b2 != nil {
		defer b2.stop(t)
	}
	// No Reconciler beside the consumers and no operator: each consumer
	// runs its own, as the quick start's setup does.
	core := a.c.Core()
	if b2 != nil {
		core = b2.c.Core()
	}
	settled(t, q, shared, c.fx, core, name, keys)
}

// releaseOnce lets the stricken call go on (a dead process's fails).
func (c *cell) releaseOnce() {
	select {
	case <-c.g.release:
	default:
		close(c.g.release)
	}
}

// A message published twice or three times (as many messages to a broker
// that does not deduplicate them) has its effect once.
func publishedTwice(t *testing.T, b Broker, batched bool) {
	q := b.Queue(t, 0)
	fx := newDownstream()
	h := func(ctx context.Context, m *consumer.Message) error {
		_, err := idempotency.FromContext(ctx).Step(ctx, "effect", func(_ context.Context, dk string) ([]byte, error) {
			fx.call(m.Key, dk)
			return nil, nil
		})
		return err
	}
	keys := []string{"m0", "m1"}
	for _, k := range []string{"m0", "m1", "m0", "m1", "m0"} {
		q.Publish(t, k, "body of "+k)
	}
	st := newStore(batched)
	runner := idempotency.NewRunner(st, idempotency.WithLease(lease))
	a := start(q.Consumer(t, config(runner, "matrix", h)))
	defer a.stop(t)
	settled(t, q, st, fx, a.c.Core(), "matrix", keys)
}

// A consumer stopped while a dependency is down and it holds the
// broker's last deliveries hands them to the store (stored with the
// message, marked started, acked; none given back to be dropped, none
// parked); when the dependency is up, a new consumer's own Reconciler runs
// each once, and the new consumer handles the rest, without an operator.
func stopDuringOutage(t *testing.T, b Broker, batched bool) {
	q := b.Queue(t, deliveries)
	fx := newDownstream()
	var up atomic.Bool
	h := func(ctx context.Context, m *consumer.Message) error {
		if m.Delivery > 0 && m.Delivery < deliveries {
			return errFlaky
		}
		if !up.Load() {
			return fmt.Errorf("the warehouse: %w", retry.ErrDependencyDown)
		}
		_, err := idempotency.FromContext(ctx).Step(ctx, "effect", func(_ context.Context, dk string) ([]byte, error) {
			fx.call(m.Key, dk)
			return nil, nil
		})
		return err
	}
	const n = 4
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("m%d", i)
		q.Publish(t, keys[i], "body of "+keys[i])
	}
	st := newStore(batched)
	runner := idempotency.NewRunner(st, idempotency.WithLease(lease))
	cfg := config(runner, "matrix", h)
	cfg.MaxInFlight = n
	a := start(q.Consumer(t, cfg))
	deadline := time.Now().Add(bound)
	for a.c.Core().Stats().Held == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no last delivery held: %+v", a.c.Core().Stats())
		}
		time.Sleep(20 * time.Millisecond) // polling, bounded by deadline
	}
	a.stop(t)
	parked, err := a.c.Core().ListParked(context.Background(), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if st := a.c.Core().Stats(); len(parked) != 0 || st.Parked != 0 || st.HandedOver == 0 {
		t.Fatalf("%d messages parked on the stop, stats %+v; want every last delivery handed over, none parked", len(parked), st)
	}
	// The dependency is up again: a new consumer takes the rest, and its
	// Reconciler the handed-over ones.
	up.Store(true)
	b2 := start(q.Consumer(t, cfg))
	defer b2.stop(t)
	settled(t, q, st, fx, b2.c.Core(), "matrix", keys)
}
