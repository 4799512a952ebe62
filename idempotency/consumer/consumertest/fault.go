package consumertest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/exactlyonce/retry/idempotency"
)

// Fault is what befalls the consumer at a Point.
type Fault int

// The faults of the matrix.
const (
	// Killed: the process dies; its connection drops and it does nothing
	// more. Another instance (a new Runner on the same store, with a
	// Reconciler) goes on.
	Killed Fault = iota + 1
	// Paused: the process stops (SIGSTOP) until its lease has run out,
	// while another instance goes on, then continues.
	Paused
	// Dropped: the connection to the broker drops; the process lives and
	// runs a new Consumer of the name on a new connection (same Runner).
	Dropped
	// StoreFails: one store operation fails at the point; the consumer
	// goes on alone.
	StoreFails
	// Stopped: the consumer is stopped (its context ends) at the point,
	// and a new one on the same Runner goes on.
	Stopped
)

var faultNames = map[Fault]string{Killed: "killed", Paused: "paused past its lease", Dropped: "connection dropped",
	StoreFails: "store fails", Stopped: "graceful stop"}

func (f Fault) String() string { return faultNames[f] }

// Point is where in a message's handling a Fault strikes.
type Point int

// The points of the matrix.
const (
	// BeforeClaim: the claim has not reached the store.
	BeforeClaim Point = iota + 1
	// AfterClaim: the claim is stored, nothing else.
	AfterClaim
	// MidHandler: the handler runs, its effect not yet made.
	MidHandler
	// AfterEffect: the effect is made, the outcome not yet stored.
	AfterEffect
	// AfterOutcome: the outcome is stored, the delivery not yet acked.
	AfterOutcome
)

var pointNames = map[Point]string{BeforeClaim: "before the claim", AfterClaim: "after the claim",
	MidHandler: "mid-handler", AfterEffect: "after the effect", AfterOutcome: "after the outcome"}

func (p Point) String() string { return pointNames[p] }

var (
	errKilled = errors.New("consumertest: the process is dead")
	errStore  = errors.New("consumertest: the store failed")
)

// gate strikes the fault once, the nth time the doomed key reaches the
// point, and rules the stricken consumer's store calls afterwards.
type gate struct {
	fault Fault
	point Point
	key   string
	nth   int

	mu      sync.Mutex
	seen    map[Point]int
	reached chan struct{} // closed when the fault strikes
	release chan struct{} // closed to let the stricken call go on
	dead    atomic.Bool   // killed: every later call fails
	paused  atomic.Bool   // paused: every call waits for release
	failCP  atomic.Bool   // the next recovery point save fails
	// failComplete: the next Complete fails.
	failComplete atomic.Bool
}

func newGate(f Fault, p Point, key string, nth int) *gate {
	return &gate{fault: f, point: p, key: key, nth: nth, seen: map[Point]int{},
		reached: make(chan struct{}), release: make(chan struct{})}
}

// strikes reports whether this call, at p for key, is the one the fault
// strikes.
func (g *gate) strikes(p Point, key string) bool {
	if p != g.point || key != g.key {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.seen[p]++
	return g.seen[p] == g.nth
}

// strike makes the fault happen in the calling goroutine, and returns
// the error the stricken call then gives (nil: it goes on).
func (g *gate) strike() error {
	switch g.fault {
	case Killed:
		g.dead.Store(true)
	case Paused:
		g.paused.Store(true)
	case StoreFails:
		close(g.reached)
		switch g.point {
		case MidHandler:
			g.failCP.Store(true) // the step's recovery point
			return nil
		case AfterEffect:
			g.failComplete.Store(true) // the outcome
			return nil
		}
		return errStore
	}
	close(g.reached)
	<-g.release
	g.paused.Store(false)
	if g.fault == Killed {
		return errKilled
	}
	return nil
}

// enter rules a store call of the stricken consumer.
func (g *gate) enter() error {
	if g.dead.Load() {
		return errKilled
	}
	if g.paused.Load() {
		<-g.release
	}
	return nil
}

// store is the stricken consumer's view of the shared store.
type store struct {
	idempotency.Store
	g *gate
}

func (s *store) Claim(ctx context.Context, req idempotency.ClaimRequest) (idempotency.Claim, error) {
	if err := s.g.enter(); err != nil {
		return idempotency.Claim{}, err
	}
	if s.g.strikes(BeforeClaim, req.Key) {
		if err := s.g.strike(); err != nil {
			return idempotency.Claim{}, err
		}
	}
	c, err := s.Store.Claim(ctx, req)
	if err == nil && s.g.strikes(AfterClaim, req.Key) {
		if err := s.g.strike(); err != nil {
			return idempotency.Claim{}, err
		}
	}
	return c, err
}

func (s *store) SaveRecoveryPoint(ctx context.Context, f idempotency.Fence, point string, data []byte, lease time.Duration) error {
	if err := s.g.enter(); err != nil {
		return err
	}
	if f.Key == s.g.key && s.g.failCP.CompareAndSwap(true, false) {
		return errStore
	}
	return s.Store.SaveRecoveryPoint(ctx, f, point, data, lease)
}

func (s *store) Complete(ctx context.Context, f idempotency.Fence, response []byte) error {
	if err := s.g.enter(); err != nil {
		return err
	}
	if f.Key == s.g.key && s.g.failComplete.CompareAndSwap(true, false) {
		return errStore
	}
	err := s.Store.Complete(ctx, f, response)
	if err == nil && s.g.strikes(AfterOutcome, f.Key) {
		if err := s.g.strike(); err != nil {
			return err
		}
	}
	return err
}

func (s *store) ReleaseUnstarted(ctx context.Context, f idempotency.Fence) error {
	if err := s.g.enter(); err != nil {
		return err
	}
	return s.Store.ReleaseUnstarted(ctx, f)
}

func (s *store) Release(ctx context.Context, f idempotency.Fence) error {
	if err := s.g.enter(); err != nil {
		return err
	}
	return s.Store.Release(ctx, f)
}

func (s *store) Park(ctx context.Context, f idempotency.Fence, reason string) error {
	if err := s.g.enter(); err != nil {
		return err
	}
	return s.Store.Park(ctx, f, reason)
}

func (s *store) Get(ctx context.Context, caller, key string) (idempotency.Record, error) {
	if err := s.g.enter(); err != nil {
		return idempotency.Record{}, err
	}
	return s.Store.Get(ctx, caller, key)
}

func (s *store) TakeOverStalled(ctx context.Context, caller string, limit int, lease time.Duration) ([]idempotency.Record, error) {
	if err := s.g.enter(); err != nil {
		return nil, err
	}
	return s.Store.TakeOverStalled(ctx, caller, limit, lease)
}
