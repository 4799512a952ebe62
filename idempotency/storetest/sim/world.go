package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/exactlyonce/retry/backoff"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/consumer"
)

// Settings of every simulated process.
const (
	lease        = time.Hour
	ttl          = 100000 * time.Hour
	workName     = "sim-work"
	consumerName = "sim-consumer"
	maxAttempts  = 3
	// wait is every wait of a consumer: no longer than its outage
	// poll (50 ms), so that a consumer that saw its store fail probes
	// again after one wait (a timer of a gateClock fires once, at its
	// gate, and never after a Reset).
	wait = 50 * time.Millisecond
	// stuckAfter bounds the real time an actor may take to reach its
	// next gate: past it the simulation is deadlocked (a bug of the
	// simulation or of the code), not slow.
	stuckAfter = time.Minute
)

var (
	httpKeys = []string{"h1", "h2"}
	msgKeys  = []string{"m1", "m2"}
)

// genState is what the world saw of one generation of a key.
type genState struct {
	maxAttempt int64
	completed  bool
	response   []byte
	by         string
}

// world is one seed's run.
type world struct {
	h      Harness
	seed   int64
	rng    *rand.Rand
	caller string
	clock  runnerClock
	logger *slog.Logger

	actors []*actor
	broker *broker

	// Observations, written by whoever holds the baton.
	gens       map[string]map[int64]*genState // by key
	outcomes   map[string][]byte              // the completed outcome by key
	downstream map[string]int                 // calls by downstream key

	mu         sync.Mutex
	trace      []string
	violations []string
}

func newWorld(h Harness, seed int64) *world {
	w := &world{
		h:          h,
		seed:       seed,
		rng:        rand.New(rand.NewPCG(uint64(seed), 0x5eed)),
		caller:     fmt.Sprintf("sim-%d-%d", seed, time.Now().UnixNano()),
		logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		gens:       map[string]map[int64]*genState{},
		outcomes:   map[string][]byte{},
		downstream: map[string]int{},
	}
	w.clock = runnerClock{Clock: NewClock(), now: h.Now}
	w.broker = &broker{w: w, maxDeliver: 1 + w.rng.IntN(3)}
	w.logf("broker: %d deliveries at most", w.broker.maxDeliver)
	for _, k := range msgKeys {
		w.broker.msgs = append(w.broker.msgs, &message{key: k, readyAt: w.now()})
	}
	for _, spec := range []struct {
		name string
		kind kind
	}{{"w1", worker}, {"w2", worker}, {"c1", reader}, {"c2", reader}, {"r1", reconciler}, {"o1", operator}} {
		w.actors = append(w.actors, w.spawn(spec.name, spec.kind))
	}
	return w
}

func (w *world) now() time.Time { return w.h.Now() }

// advance moves the store's time on.
func (w *world) advance(d time.Duration) {
	w.h.Advance(d)
}

func (w *world) logf(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.trace = append(w.trace, fmt.Sprintf(format, args...))
}

// violate records a broken property.
func (w *world) violate(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.violations = append(w.violations, msg)
	w.trace = append(w.trace, "  VIOLATION: "+msg)
}

// spawn starts a new incarnation of the process name.
func (w *world) spawn(name string, k kind) *actor {
	a := &actor{w: w, name: name, kind: k, out: make(chan signal), in: make(chan bool)}
	a.runner = idempotency.NewRunner(gate(a, w.h.Store),
		idempotency.WithClock(w.clock), idempotency.WithLease(lease), idempotency.WithTTL(ttl))
	a.runner.Register(workName, w.work)
	a.clock = newGateClock(a)
	c, err := consumer.New(consumer.Config{
		Runner:      a.runner,
		Name:        consumerName,
		Caller:      w.caller,
		Handler:     w.handle,
		MaxInFlight: 1,
		Backoff:     backoff.Func(func(int, time.Duration, float64) time.Duration { return wait }),
		StopGrace:   time.Hour,
		Clock:       a.clock,
		Logger:      w.logger,
	})
	if err != nil {
		panic(err) // a fresh Runner: never
	}
	a.consumer = c
	return a
}

// work is the registered Work of the requests and the body of the
// consumer's handler: one step (an external call keyed by its downstream
// key), then, with a TxStore, a local write in the transaction.
func (w *world) work(ctx context.Context, e *idempotency.Execution) ([]byte, error) {
	a := actorFrom(ctx)
	if a == nil || e == nil {
		return nil, errors.New("sim: work outside an actor's execution")
	}
	f := e.Fence()
	if _, err := e.Step(ctx, "call", func(_ context.Context, dk string) ([]byte, error) {
		if err := a.gate("effect " + f.Key); err != nil {
			return nil, err
		}
		if a.fail {
			a.fail = false
			w.logf("  %s: effect %s: failed", a.name, f.Key)
			return nil, errCallFailed
		}
		w.downstream[dk]++
		return []byte("ok"), nil
	}); err != nil {
		return nil, err
	}
	if w.h.LocalWrite != nil {
		if err := a.gate("local write " + f.Key); err != nil {
			return nil, err
		}
		name := fmt.Sprintf("%s|%s|g%d|a%d", f.Caller, f.Key, f.Generation, f.Attempt)
		if err := w.h.LocalWrite(context.WithoutCancel(ctx), name); err != nil {
			return nil, err
		}
		if a.failWrite && w.h.FailWrite != nil {
			a.failWrite = false
			err := w.h.FailWrite(context.WithoutCancel(ctx))
			w.logf("  %s: a statement failed: %v (ignored by the work)", a.name, err != nil)
		}
	}
	return fmt.Appendf(nil, "%s g%d a%d by %s", f.Key, f.Generation, f.Attempt, a.name), nil
}

// handle is the consumer's handler.
func (w *world) handle(ctx context.Context, _ *consumer.Message) error {
	_, err := w.work(ctx, idempotency.FromContext(ctx))
	return err
}

// Failure is a seed's broken properties, with its trace.
type Failure struct {
	Seed       int64
	Violations []string
	Trace      []string
}

func (f *Failure) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d broke the protocol:\n", f.Seed)
	for _, v := range f.Violations {
		fmt.Fprintf(&b, "  - %s\n", v)
	}
	b.WriteString("trace:\n")
	for _, l := range f.Trace {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	return b.String()
}
