package sim

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/consumer"
)

// errCrashed is what every store and broker call of a crashed actor gets:
// its process is gone, nothing it would write arrives.
var errCrashed = errors.New("sim: the actor crashed")

// errCallFailed is the failure of a work's external call.
var errCallFailed = errors.New("sim: the external call failed")

// errLostReply is what a call whose reply was lost gets, after the store
// made its write.
var errLostReply = errors.New("sim: the store's reply was lost")

// kind is what an actor does.
type kind int

const (
	// worker runs requests through Runner.Do, as an HTTP instance would.
	worker kind = iota + 1
	// reader consumes the simulated broker through the consumer core.
	reader
	// reconciler makes Reconcile passes.
	reconciler
	// operator runs a parked execution again (Runner.RetryParked), as
	// someone who mended its cause would.
	operator
)

// signal is what an actor's goroutine tells the scheduler: it waits at a
// gate (at), or its operation ended (done).
type signal struct {
	at   string
	done bool
}

// actor is one process of the simulation. Each incarnation (a restart
// after a crash makes a new one) has its own Runner over a gated view of
// the store, so every call it makes, from whichever of its goroutines,
// passes its gates.
type actor struct {
	w    *world
	name string
	kind kind

	out chan signal // the actor's goroutine to the scheduler
	in  chan bool   // the scheduler to the actor: go on (true) or crash

	crashed atomic.Bool
	// lose: the reply of the actor's next store call is lost. Read and
	// written only by whoever holds the baton.
	lose bool
	// fail: the actor's next external call (the work's step) fails.
	// Like lose, baton-held.
	fail bool
	// failWrite: a statement after the actor's next local write fails
	// (Harness.FailWrite), and the work ignores the failure, as a
	// handler that swallows a deadlock would. Baton-held.
	failWrite bool

	runner   *idempotency.Runner
	consumer *consumer.Consumer
	clock    *gateClock

	// The operation in progress (scheduler side).
	busy     bool
	at       string
	cancel   context.CancelFunc
	delivery *delivery
	stopping bool // a stop of its consumer's Run was played

	mu     sync.Mutex
	graces []func() // the consumer's grace timers, ended by a crash
}

type actorKey struct{}

// actorFrom returns the actor whose goroutine carries ctx.
func actorFrom(ctx context.Context) *actor {
	a, _ := ctx.Value(actorKey{}).(*actor)
	return a
}

// gate waits for the baton at point: it tells the scheduler where the
// actor stands and returns when the scheduler lets it go on, or
// errCrashed when the scheduler crashed it (or had before).
func (a *actor) gate(point string) error {
	if a.crashed.Load() {
		return errCrashed
	}
	a.out <- signal{at: point}
	if !<-a.in {
		return errCrashed
	}
	return nil
}

// finish tells the scheduler that the operation ended.
func (a *actor) finish() { a.out <- signal{done: true} }

// endGraces ends the grace periods of the actor's consumer: a crashed
// process waits for nothing.
func (a *actor) endGraces() {
	a.mu.Lock()
	fs := a.graces
	a.graces = nil
	a.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

// addGrace keeps f, the end of a grace period, for a crash; it runs f at
// once if the actor crashed already.
func (a *actor) addGrace(f func()) {
	a.mu.Lock()
	if !a.crashed.Load() {
		a.graces = append(a.graces, f)
		a.mu.Unlock()
		return
	}
	a.mu.Unlock()
	f()
}
