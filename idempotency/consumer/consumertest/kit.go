package consumertest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/exactlyonce/retry/backoff"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/consumer"
)

// Settings of the matrix's consumers: short, so that a cell takes a few
// seconds of waiting for leases and redeliveries.
const (
	lease     = 500 * time.Millisecond
	grace     = 2 * time.Second
	reconcile = 100 * time.Millisecond
	// bound is how long a cell waits for every message to settle.
	bound = 45 * time.Second
	// deliveries is the consumers' MaxDeliveries in the cells, and the
	// broker's limit in those on the broker's last delivery: the doomed
	// message reaches its last delivery after deliveries-1 transient
	// failures.
	deliveries = 2
)

// messages is how many messages a cell publishes, the doomed one first.
const messages = 3

var errFlaky = errors.New("consumertest: the warehouse answered 503")

// concurrency is how many cells run at once: they mostly wait for leases
// and redeliveries.
const concurrency = 16

// Run runs the fault matrix on b: every cell (fault x point x delivery,
// see the package documentation and On), a message published
// twice, and a consumer stopped during an outage holding last
// deliveries, each as a subtest on a queue of its own. The subtests run
// concurrently, up to 16 at once, whatever the -parallel flag says.
func Run(t *testing.T, b Broker) { run(t, b, false) }

// RunBatched runs the matrix of Run with a store that batches its
// durable work (an idempotency.BatchStore): the consumer claims the
// deliveries it takes together in one operation and commits their
// outcomes together, and the faults strike the batch's claim and commit.
func RunBatched(t *testing.T, b Broker) { run(t, b, true) }

func run(t *testing.T, b Broker, batched bool) {
	slots := make(chan struct{}, concurrency)
	var wg sync.WaitGroup
	sub := func(name string, f func(t *testing.T)) {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			t.Run(name, f)
		})
	}
	for _, f := range []Fault{Killed, Paused, Dropped, StoreFails, Stopped} {
		for _, p := range []Point{BeforeClaim, AfterClaim, MidHandler, AfterEffect, AfterOutcome} {
			for _, on := range []On{FirstDelivery, LastDelivery, BrokersLastDelivery} {
				if !Covered(f, p, on) {
					continue
				}
				name := fmt.Sprintf("%s/%s", f, p)
				if on != FirstDelivery {
					name += "/" + on.String()
				}
				sub(name, func(t *testing.T) { runCell(t, b, f, p, on, batched) })
			}
		}
	}
	sub("published twice", func(t *testing.T) { publishedTwice(t, b, batched) })
	sub("graceful stop during an outage/last deliveries", func(t *testing.T) { stopDuringOutage(t, b, batched) })
	wg.Wait()
}

// On is the delivery of the doomed message that a cell's fault strikes.
type On int

const (
	// FirstDelivery is an ordinary delivery, on a broker without a
	// delivery limit.
	FirstDelivery On = iota
	// LastDelivery is the delivery that reaches the consumer's
	// MaxDeliveries, on a broker without a delivery limit: the quick
	// start's setup.
	LastDelivery
	// BrokersLastDelivery is the broker's last delivery, on a broker with
	// a delivery limit.
	BrokersLastDelivery
)

// String names the delivery for a subtest.
func (o On) String() string {
	switch o {
	case LastDelivery:
		return "last delivery"
	case BrokersLastDelivery:
		return "broker's last delivery"
	}
	return "first delivery"
}

// Covered reports whether the matrix has the cell. One cell is not
// covered: a kill before the claim of the broker's last delivery on a
// broker with a delivery limit (the broker has made its last delivery and
// nothing reached the store; a quorum queue dead-letters the message,
// JetStream drops it with a max-deliveries advisory). Without a broker
// limit the broker delivers it again. A kill right after that claim is
// covered: the claim itself marks the execution started, so a
// Reconciler finishes it.
func Covered(f Fault, p Point, on On) bool {
	return !(f == Killed && on == BrokersLastDelivery && p == BeforeClaim)
}

// config is the kit's consumer configuration.
func config(runner *idempotency.Runner, name string, h consumer.Handler) consumer.Config {
	return consumer.Config{Runner: runner, Name: name, Handler: h, StopGrace: grace, ReconcileInterval: reconcile,
		MaxDeliveries: deliveries,
		Backoff:       backoff.FullJitter(time.Millisecond, 20*time.Millisecond),
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// running is a consumer running on a goroutine of its own.
type running struct {
	c      Consumer
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returned, with err
	err    error
}

func start(c Consumer) *running {
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{c: c, cancel: cancel, done: make(chan struct{})}
	go func() {
		r.err = c.Run(ctx)
		close(r.done)
	}()
	return r
}

// wait waits for r's Run to return.
func (r *running) wait(t *testing.T) {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(bound):
		t.Error("a consumer's Run did not return")
	}
}

// stop ends r and waits for its Run.
func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	r.wait(t)
}

// settled waits until every key's effect happened and its record
// completed, and the broker holds nothing; then checks each effect
// happened once. Nobody runs a parked message meanwhile: none may be.
func settled(t *testing.T, q Queue, st idempotency.Store, fx *downstream, c *consumer.Consumer, caller string, keys []string) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		missing := ""
		for _, k := range keys {
			rec, err := st.Get(context.Background(), caller, k)
			if fx.count(k) == 0 || err != nil || rec.State != idempotency.StateCompleted {
				missing = fmt.Sprintf("message %s: %d effects, record %v (%v)", k, fx.count(k), rec.State, err)
				break
			}
		}
		if missing == "" && q.Idle(t) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not settled within %s: %s (broker idle: %v; the consumer did %+v)", bound, missing, q.Idle(t), c.Stats())
		}
		time.Sleep(20 * time.Millisecond) // polling, bounded by deadline
	}
	for _, k := range keys {
		if n := fx.count(k); n != 1 {
			t.Errorf("message %s: effect made %d times, want once", k, n)
		}
	}
}
