package storetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/internal/grouptest"
)

// One cell of the fault matrix: a keyed request, its work, the fault at
// its point, the recovery, the checks.

const (
	faultCaller = "faults"
	faultKey    = "order-1"
	faultWork   = "charge-order"
	// faultTries bounds the client's retries of a cell's request.
	faultTries = 6
	// faultWait bounds the wait for the first run to reach its point.
	faultWait = time.Minute
)

var errKilled = errors.New("storetest: the process was killed")

// faultRun is the state of one cell: the service's work and what it saw.
type faultRun struct {
	t      *testing.T
	h      Harness
	f      Faults
	fault  Fault
	point  Point
	runner *idempotency.Runner
	// writes says the work writes locally: a TxStore with TxWrite, in a
	// batched cell only for a fault of the transaction (a local write
	// takes the completion out of the batch).
	writes bool

	mu      sync.Mutex
	runs    int               // runs of the work
	charges map[string]string // the provider's ledger: downstream key -> charge id
	saved   bool              // the step's result was saved
	late    int               // provider calls after the step's result was saved

	hit     chan struct{} // the first run reached its point (killed, paused)
	release chan struct{} // lets it go on
}

// runCell runs fault at p and reports whether every check passed; batched,
// with every claim and completion of the Runner sent through the store's
// batch operations, each batch with a companion (batchWatch).
func runCell(t *testing.T, h Harness, f Faults, fault Fault, p Point, batched bool) bool {
	r := &faultRun{t: t, h: h, f: f, fault: fault, point: p,
		writes:  h.TxWrite != nil && isTxStore(h) && (!batched || fault.inTx()),
		charges: map[string]string{}, hit: make(chan struct{}), release: make(chan struct{})}
	store := h.Store
	var w *batchWatch
	if batched {
		store, w = watchBatches(h.Store)
	}
	r.runner = idempotency.NewRunner(store, idempotency.WithLease(lease))
	if batched && !grouptest.AlwaysBatch(r.runner) {
		t.Fatal("storetest: the Runner of a BatchStore does not batch")
	}
	r.runner.Register(faultWork, r.work)
	r.run(context.Background())
	if w != nil {
		w.check(t, h, r.writes)
	}
	return !t.Failed()
}

// run strikes the cell's fault, carries the key to its outcome and checks
// it.
func (r *faultRun) run(ctx context.Context) {
	t, f, fault, p := r.t, r.f, r.fault, r.point
	if (fault == FaultKilled || fault == FaultPaused) && p != BeforeClaim && p != AfterOutcome {
		r.stopMidWay(ctx)
		return
	}
	switch {
	case p == BeforeClaim && fault == FaultDropped:
		f.Drop(ctx, t)
	case p == BeforeClaim && fault == FaultKilled:
		// The request died with its process before it reached the store:
		// the client's retry is all there is.
	}
	_, err := r.runner.Do(ctx, r.request(), nil)
	switch {
	case fault.inTx() && !errors.Is(err, idempotency.ErrTxFailed):
		t.Errorf("Do with a %s in its transaction: error %v, want one matching ErrTxFailed", fault, err)
	case p == AfterOutcome && err != nil:
		t.Errorf("Do before the fault: %v", err)
	case p == AfterOutcome && fault == FaultKilled && f.Drop != nil:
		f.Drop(ctx, t) // it died before answering: its connections close
	case p == AfterOutcome && fault == FaultDropped:
		f.Drop(ctx, t)
	}
	r.finish(false)
	r.check("")
}

// stopMidWay runs the first attempt on a goroutine of its own until it
// stops at its point (killed or paused), finishes the key without it, and
// then lets it go on.
func (r *faultRun) stopMidWay(ctx context.Context) {
	t := r.t
	first := make(chan error, 1)
	var letGo sync.Once
	defer letGo.Do(func() { close(r.release) }) // a check that stopped the test
	go func() {
		_, err := r.runner.Do(ctx, r.request(), nil)
		first <- err
	}()
	select {
	case <-r.hit:
	case err := <-first:
		t.Fatalf("the first run ended (%v) before it reached its fault", err)
	case <-time.After(faultWait):
		t.Fatalf("the first run did not reach its fault within %v", faultWait)
	}
	r.finish(r.fault == FaultKilled)
	r.check(fmt.Sprintf("while the first run is %s", map[bool]string{true: "dead", false: "paused"}[r.fault == FaultKilled]))
	letGo.Do(func() { close(r.release) })
	err := <-first
	if r.fault == FaultPaused && !errors.Is(err, idempotency.ErrLeaseLost) {
		t.Errorf("the paused run woke to error %v, want one matching ErrLeaseLost", err)
	}
	if r.fault == FaultKilled && err == nil {
		t.Errorf("the killed run succeeded")
	}
	r.check("once the first run went on")
}

// request is the cell's request: resumable, so that a Reconciler can finish
// it.
func (r *faultRun) request() idempotency.Request {
	return idempotency.Request{Caller: faultCaller, Key: faultKey, Fingerprint: "fp", Work: faultWork, Input: []byte("100")}
}

// work is the service's work: charge in a step, write locally, answer.
func (r *faultRun) work(ctx context.Context, e *idempotency.Execution) ([]byte, error) {
	r.mu.Lock()
	r.runs++
	run := r.runs
	r.mu.Unlock()
	if err := r.at(ctx, run, AfterClaim); err != nil {
		return nil, err
	}
	ch, err := e.Step(ctx, "charge", r.charge)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.saved = true
	r.mu.Unlock()
	// Two local writes, the fault mid-way between them. Like a careless
	// handler, the work does not look at their errors: the store must keep
	// a failed transaction from committing, in whole or in part, anyway.
	r.localWrite(ctx, run, "reserve")
	if err := r.at(ctx, run, MidHandler); err != nil {
		return nil, err
	}
	r.localWrite(ctx, run, "effect")
	if err := r.at(ctx, run, BeforeOutcome); err != nil {
		return nil, err
	}
	return []byte("charged " + string(ch)), nil
}

// at strikes the fault if this is the first run and p is its point.
func (r *faultRun) at(ctx context.Context, run int, p Point) error {
	if run != 1 || p != r.point {
		return nil
	}
	switch r.fault {
	case FaultKilled:
		if r.f.Drop != nil {
			r.f.Drop(ctx, r.t) // its connections close with it
		}
		close(r.hit)
		<-r.release
		return errKilled
	case FaultPaused:
		close(r.hit)
		<-r.release
		return nil
	case FaultDropped:
		r.f.Drop(ctx, r.t)
		return nil
	}
	err := r.f.Tx(ctx, r.t, r.fault)
	switch {
	case errors.Is(err, ErrNotInjected):
		r.t.Skipf("the store cannot cause %s", r.fault)
	case err == nil:
		r.t.Errorf("Faults.Tx(%s) reported no error", r.fault)
	}
	return nil // the work goes on as if nothing happened
}

// charge is the fake provider: one charge per downstream key.
func (r *faultRun) charge(_ context.Context, downstream string) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.saved {
		r.late++
	}
	id, ok := r.charges[downstream]
	if !ok {
		id = fmt.Sprintf("ch_%d", len(r.charges)+1)
		r.charges[downstream] = id
	}
	return []byte(id), nil
}

// finish carries the key to its outcome as the client would: after a kill a
// Reconciler pass first, then retries, each after the lease of the last
// attempt ran out.
func (r *faultRun) finish(reconcile bool) {
	ctx := context.Background()
	if reconcile {
		r.h.Advance(lease + slack)
		// A pass that fails (on a connection the fault left dead, say) is
		// followed by another, as a running Reconciler's next pass would.
		quiet := idempotency.ReconcilerConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
		var errs []error
		for range faultTries {
			_, err := r.runner.Reconcile(ctx, quiet)
			if err == nil {
				errs = nil
				break
			}
			errs = append(errs, err)
		}
		if len(errs) > 0 {
			r.t.Errorf("every Reconcile pass failed: %v", errors.Join(errs...))
		}
	}
	var errs []error
	for range faultTries {
		if _, err := r.runner.Do(ctx, r.request(), nil); err == nil {
			return
		} else {
			errs = append(errs, err)
		}
		r.h.Advance(lease + slack)
	}
	r.t.Errorf("the key never completed in %d retries: %v", faultTries, errors.Join(errs...))
}

// check asserts exactly once: the key completed with the one charge, a
// repeat replays it, the provider charged once and was never called after
// the step's result was saved, one run's local write committed.
func (r *faultRun) check(when string) {
	t := r.t
	t.Helper()
	if when != "" {
		when += ": "
	}
	ctx := context.Background()
	const want = "charged ch_1"
	var (
		rec idempotency.Record
		res idempotency.Result
	)
	// A call may fail on a connection the fault left dead; the client
	// tries again.
	err := retried(func() (err error) {
		rec, err = r.h.Store.Get(ctx, faultCaller, faultKey)
		return err
	})
	if err != nil || rec.State != idempotency.StateCompleted || string(rec.Response) != want {
		t.Errorf("%sthe key is %s with %q (%v), want completed with %q", when, rec.State, rec.Response, err, want)
	}
	err = retried(func() (err error) {
		res, err = r.runner.Do(ctx, r.request(), nil)
		return err
	})
	if err != nil || !res.Replayed || string(res.Response) != want {
		t.Errorf("%sa repeat got %+v, %v; want the outcome replayed", when, res, err)
	}
	r.mu.Lock()
	charges, late, runs := len(r.charges), r.late, r.runs
	r.mu.Unlock()
	if charges != 1 || late != 0 {
		t.Errorf("%s%d charges, %d calls to the provider after the step's result was saved; want 1 and 0", when, charges, late)
	}
	if !r.writes || r.h.TxWritten == nil {
		return
	}
	var committed []string
	whole := 0
	for run := 1; run <= runs; run++ {
		n := 0
		for _, w := range localWrites {
			if r.h.TxWritten(t, localName(run, w)) {
				committed = append(committed, localName(run, w))
				n++
			}
		}
		if n == len(localWrites) {
			whole++
		}
	}
	if whole != 1 || len(committed) != len(localWrites) {
		t.Errorf("%sthe local writes committed: %q; want both writes of one run, and nothing of the others", when, committed)
	}
}

// localWrites are the names of each run's local writes.
var localWrites = []string{"reserve", "effect"}

// localWrite makes run's local write w in the store's transaction, if
// the cell writes locally, and ignores its error.
func (r *faultRun) localWrite(ctx context.Context, run int, w string) {
	if r.writes {
		_ = r.h.TxWrite(ctx, localName(run, w))
	}
}

// retried calls f until it succeeds, at most faultTries times, and returns
// its last error.
func retried(f func() error) error {
	var err error
	for range faultTries {
		if err = f(); err == nil {
			return nil
		}
	}
	return err
}

// localName names run's local write w.
func localName(run int, w string) string { return fmt.Sprintf("%s/%d/%s", faultKey, run, w) }

func isTxStore(h Harness) bool {
	_, ok := h.Store.(idempotency.TxStore)
	return ok
}
