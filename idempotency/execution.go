package idempotency

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/exactlyonce/retry"
)

// Execution is one attempt at running a unit of work, owning its key until it
// completes or its lease is taken over. Runner.Do passes it to the Work and
// puts it in the Work's context (FromContext). Its methods are meant for the
// goroutine running the Work; MarkStarted and Started may be called from any.
type Execution struct {
	r *Runner
	// lease is how long the claim and each renewal of it hold.
	lease   time.Duration
	fence   Fence
	resumed bool
	started atomic.Bool
	// ctx is the Work's context, whose deadline follows the lease.
	ctx *leaseContext
	// input is Request.Input, saved with the record when resumable: the
	// record can be resumed by a Reconciler, so the started mark is saved
	// too.
	input     []byte
	resumable bool
	// mu orders the saves of recovery points and guards what they change,
	// point, data and stepErr: MarkStarted may be called from any
	// goroutine, while the work runs a Step.
	mu sync.Mutex
	// stepErr is the first store failure saving a step's recovery point:
	// the attempt then fails whatever the work returns.
	stepErr error
	// The last saved point and the encoded data saved with it.
	point string
	data  []byte

	// Completed step results by name, and the steps called in this
	// attempt: the goroutine running the work's (Step is not for others).
	steps []stepResult
	used  map[string]bool
}

type execKey struct{}

func newExecution(r *Runner, c Claim) (*Execution, error) {
	rec := c.Record
	e := &Execution{
		r:       r,
		lease:   c.lease,
		fence:   rec.Fence(),
		resumed: c.Outcome == ClaimTakenOver,
		point:   rec.RecoveryPoint,
		data:    rec.RecoveryData,
	}
	if e.lease <= 0 {
		e.lease = r.lease
	}
	if len(rec.RecoveryData) > 0 {
		steps, err := decodeSteps(rec.RecoveryData)
		if err != nil {
			// Every retry would read the same bytes.
			return nil, retry.Permanent(fmt.Errorf("idempotency: recovery data of (%q, %q): %w", rec.Caller, rec.Key, err))
		}
		e.steps = steps
	}
	if rec.RecoveryPoint != "" {
		// A takeover resumes a begun execution, or the claim saved the
		// started mark (Request.StartedAtClaim).
		e.started.Store(true)
	}
	if len(rec.Resume) > 0 {
		_, input, err := decodeResume(rec.Resume)
		if err != nil {
			return nil, retry.Permanent(fmt.Errorf("idempotency: stored work of (%q, %q): %w", rec.Caller, rec.Key, err))
		}
		e.input, e.resumable = input, true
	}
	return e, nil
}

// Input returns the Request.Input the execution was claimed with, or, for
// one a Reconciler resumed, the Input saved with the record (nil without
// Request.Work).
func (e *Execution) Input() []byte { return e.input }

// FromContext returns the Execution that ctx belongs to, or nil outside a Work
// (and outside a handler behind Middleware).
func FromContext(ctx context.Context) *Execution {
	e, _ := ctx.Value(execKey{}).(*Execution)
	return e
}

// MarkStarted marks, for the Execution in ctx, the moment execution begins
// (see Execution.MarkStarted). It does nothing outside an Execution.
func MarkStarted(ctx context.Context) {
	FromContext(ctx).MarkStarted()
}

// Caller returns the caller the key belongs to.
func (e *Execution) Caller() string { return e.fence.Caller }

// Key returns the idempotency key.
func (e *Execution) Key() string { return e.fence.Key }

// Attempt returns the fencing counter: 1 for the first execution of the
// record, more after a takeover of a stale lease. (A later record of the same
// key counts from 1 again; Fence().Generation tells the records apart.)
func (e *Execution) Attempt() int64 { return e.fence.Attempt }

// Fence returns the fence that conditions this execution's writes, for a Work
// that writes to the Store itself.
func (e *Execution) Fence() Fence { return e.fence }

// Resumed reports whether this execution took over the key from an earlier
// attempt whose lease ran out (it may find completed steps).
func (e *Execution) Resumed() bool { return e.resumed }

// MarkStarted marks the moment execution begins: from now on the outcome is
// stored whatever it is. The HTTP Middleware uses the mark to tell a
// rejection (a 4xx written before the mark, not stored) from an outcome. Step
// marks it too. Safe on a nil Execution (no effect) and from any goroutine.
//
// When the request can be resumed by a Reconciler (Request.Work, or the
// Middleware's WithResume), the first mark is saved with the record (a
// write to the store, which renews the lease), so that the Reconciler knows
// the execution began.
func (e *Execution) MarkStarted() {
	if e == nil || !e.started.CompareAndSwap(false, true) || !e.resumable {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.point == "" {
		ctx := context.Background()
		if e.ctx != nil {
			ctx = e.ctx
		}
		// A failure leaves the execution unmarked in the store: a retry
		// still resumes it; only a Reconciler would not see it.
		_ = e.renew(ctx, startedPoint, e.data)
	}
}

// SaveStarted marks the execution started, as MarkStarted does, and when
// it can be resumed by a Reconciler (Request.Work) saves the mark with the
// record before it returns, reporting a failure to save it (an error
// wrapping the store's; the execution is then not marked). Once it
// returned nil, a Reconciler resumes the execution if it stalls, even
// before the work's first step. It does not cover a crash between the
// claim and the save: work that nothing else would run again (a broker's
// last delivery of a message) asks for the mark in the claim itself
// (Request.StartedAtClaim), and SaveStarted then writes nothing. Safe on a
// nil Execution (no effect).
func (e *Execution) SaveStarted(ctx context.Context) error {
	if e == nil {
		return nil
	}
	if e.resumable {
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.point == "" {
			if err := e.renew(ctx, startedPoint, e.data); err != nil {
				return fmt.Errorf("idempotency: save the started mark: %w", err)
			}
		}
	}
	e.started.Store(true)
	return nil
}

// saved returns the last saved recovery point and its data.
func (e *Execution) saved() (point string, data []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.point, e.data
}

// failedStep returns the first failure to save a step's recovery point.
func (e *Execution) failedStep() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stepErr
}

// Started reports whether MarkStarted (or a Step) was called, or this
// execution resumes one that had saved a recovery point, or its claim
// saved the started mark (Request.StartedAtClaim).
func (e *Execution) Started() bool {
	return e != nil && e.started.Load()
}

// Extend renews the lease without saving a new recovery point, for long work
// between steps, and moves the deadline of the Work's context with it. It
// fails with ErrLeaseLost when the lease was taken over; the work must then
// stop.
func (e *Execution) Extend(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.renew(ctx, e.point, e.data); err != nil {
		return fmt.Errorf("idempotency: extend lease: %w", err)
	}
	return nil
}

// renew saves the recovery point (point, data), which renews the lease, and
// moves the deadline of the Work's context to the lease's new end.
func (e *Execution) renew(ctx context.Context, point string, data []byte) error {
	from := e.r.clock.Now()
	if err := e.r.store.SaveRecoveryPoint(ctx, e.fence, point, data, e.lease); err != nil {
		return err
	}
	e.point, e.data = point, data
	if e.ctx != nil {
		e.ctx.renew(from.Add(e.lease))
	}
	return nil
}
