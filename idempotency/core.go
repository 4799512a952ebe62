package idempotency

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/exactlyonce/retry"
)

// Default settings of a Runner.
const (
	// defaultLease is how long an execution holds a key before a retry may take
	// it over, unless a recovery point or Execution.Extend renews it.
	defaultLease = time.Minute
	// defaultTTL is how long a key and its outcome are kept: at least as long
	// as clients keep retrying.
	defaultTTL = 24 * time.Hour
)

// abandonLease is the lease left on a key whose execution failed after
// saving a recovery point, so that the next retry takes it over and resumes
// at once. One microsecond: the finest time a database store keeps.
const abandonLease = time.Microsecond

// errEmptyKey is returned by Runner.Do for a Request without a Key.
var errEmptyKey = retry.Permanent(errors.New("idempotency: empty key"))

// errStartedWithoutWork is returned by Runner.Do for a Request with
// StartedAtClaim and no Work.
var errStartedWithoutWork = retry.Permanent(errors.New("idempotency: StartedAtClaim needs Work"))

// Request names one unit of work.
type Request struct {
	// Caller scopes the key: the authenticated principal or tenant. Two
	// callers never share a key, an outcome or an error.
	Caller string
	// Key identifies the unit of work within Caller: an Idempotency-Key, a
	// message id, a natural key such as an order id. Must not be empty.
	Key string
	// Fingerprint identifies the request's content. A repeat of Key with
	// another Fingerprint gets ErrFingerprintMismatch instead of the outcome.
	// A versioned fingerprint starts with its version and a colon (as
	// Fingerprint's "v1:..." does).
	Fingerprint string
	// Refingerprint, if set, computes the request's fingerprint with another
	// algorithm version, reporting false for a version it does not know.
	// When the key's stored fingerprint has another version than Fingerprint,
	// Do claims again with Refingerprint's result, so that a change of
	// algorithm never turns retries of keys stored before it into mismatches.
	Refingerprint func(version string) (string, bool)
	// Work, if set, names work registered with Runner.Register that can
	// run this request again from Input alone. Do then saves Work and Input
	// with the record, so that a Reconciler can finish the execution if it
	// stalls (its process died) and nobody retries. The work given to Do
	// runs as usual; nil means the registered one.
	Work string
	// Input is what the registered Work needs to run the request again (a
	// message, the parameters of a job); Execution.Input returns it. It is
	// stored with the record until the record completes, so keep it small
	// and never put secrets in it.
	Input []byte
	// StartedAtClaim, with Work, marks the execution started in the claim
	// itself: the record is created (or taken over, if it has no recovery
	// point yet) with the started mark in the same store operation, so a
	// Reconciler resumes the execution if it stalls at any moment after the
	// claim, even before the work runs. For work that nothing else would run
	// again, such as a broker's last delivery of a message. Without Work it
	// is an error: nothing could resume the execution.
	StartedAtClaim bool
	// Lease, when shorter than the Runner's lease, is how long this
	// execution's claim (and each renewal of it) holds before another
	// claim may take the key over: a caller that keeps its executions
	// alive with Execution.Extend, as the message consumers do, can take a
	// short one, so that an execution whose process died is taken over
	// sooner. 0 (or a longer one): the Runner's lease.
	Lease time.Duration
}

// Work is a unit of work run by Runner.Do at most once per key to completion.
// It returns the outcome to store and replay (opaque bytes), or an error:
//
//   - nil: the outcome is stored (committed with the transaction when the
//     Store is a TxStore) and returned to every repeat.
//   - Reject(err): execution never began; nothing is stored and the key is
//     freed for a corrected retry.
//   - Abort(outcome, err): the transaction is rolled back and outcome is
//     stored anyway, so the work never runs again (unless a statement of
//     the transaction failed, see Runner.Do).
//   - any other error: the attempt failed and may be retried. The transaction
//     is rolled back; the key is freed if no step has begun, and otherwise
//     left for the next retry to take over and resume after the last
//     completed step.
//
// A failure that must not be retried is an outcome: encode it and return a nil
// error (or use Abort). ctx carries the Execution (FromContext) and, with a
// TxStore, the transaction.
type Work func(ctx context.Context, e *Execution) ([]byte, error)

// Result is what Runner.Do returns for a completed unit of work.
type Result struct {
	// Response is the stored outcome.
	Response []byte
	// Replayed is true when the outcome was stored by an earlier call and the
	// work did not run in this one.
	Replayed bool
	// Attempt is the fencing counter of the execution that produced Response.
	// For a replay it is the stored record's counter.
	Attempt int64
}

// Option configures a Runner (NewRunner) or the Middleware: the one option
// type of this package, as retry.Option is the root package's. Each With*
// function says which of the two it is for; given to the other one, an
// option is ignored, so one list of options may be passed to both.
type Option interface {
	applyRunner(*Runner)
	applyMiddleware(*middleware)
}

// runnerOption is an Option for NewRunner (ignored by the Middleware).
type runnerOption func(*Runner)

func (f runnerOption) applyRunner(r *Runner)     { f(r) }
func (runnerOption) applyMiddleware(*middleware) {}

// middlewareOption is an Option for the Middleware (ignored by NewRunner).
type middlewareOption func(*middleware)

func (middlewareOption) applyRunner(*Runner)             {}
func (f middlewareOption) applyMiddleware(m *middleware) { f(m) }

// WithLease, for NewRunner, sets how long an execution holds its key before a retry may take
// it over (default 1 minute). Every recovery point renews it. Values <= 0
// are ignored.
func WithLease(d time.Duration) Option {
	return runnerOption(func(r *Runner) {
		if d > 0 {
			r.lease = d
		}
	})
}

// WithTTL, for NewRunner, sets how long a key and its outcome live from the first claim
// (default 24 hours). Values <= 0 are ignored.
func WithTTL(d time.Duration) Option {
	return runnerOption(func(r *Runner) {
		if d > 0 {
			r.ttl = d
		}
	})
}

// WithClock, for NewRunner, sets the clock that times executions (for Retry-After hints) and,
// when NewRunner makes the default MemoryStore, the clock of that store
// (default: the system clock).
func WithClock(c clock.Clock) Option {
	return runnerOption(func(r *Runner) {
		if c != nil {
			r.clock = c
		}
	})
}

// Runner runs units of work at most once to completion per (caller, key) and
// returns the stored outcome to every repeat. It is the core that the HTTP
// Middleware, a queue consumer (key = message id) or a job (key = natural key)
// build on. A Runner is safe for concurrent use and immutable once built.
type Runner struct {
	store Store
	tx    TxStore // store as a TxStore, or nil
	clock clock.Clock
	lease time.Duration
	ttl   time.Duration
	// times learns how long executions take, for Retry-After hints.
	times    executionTimes
	observer func(ctx context.Context, obs Observation)
	// works are the Works registered by name, for a Reconciler.
	works sync.Map // string -> Work
	// group sends concurrent claims and completions to a BatchStore
	// together (nil for another store).
	group *groupCommit
}

// NewRunner returns a Runner keeping its records in store. A nil store means a
// new MemoryStore on the Runner's clock: fine for one process, lost on restart.
// When store implements TxStore, every Work runs inside its transaction.
// When it implements BatchStore (pgstore, mysqlstore, redisstore), the
// claims and completions of concurrent executions go to it together
// (group commit): one asked for while none is on its way goes at once,
// alone, so a request alone waits for nothing; those asked for meanwhile
// go together, in one store operation, as soon as it is back. An
// execution whose transaction made no statement completes with the
// others; one that wrote commits its own.
func NewRunner(store Store, opts ...Option) *Runner {
	r := &Runner{clock: clock.New(), lease: defaultLease, ttl: defaultTTL}
	for _, o := range opts {
		if o != nil {
			o.applyRunner(r)
		}
	}
	if store == nil {
		store = NewMemoryStore(r.clock)
	}
	r.store = store
	r.tx, _ = store.(TxStore)
	if bs, ok := store.(BatchStore); ok {
		r.group = newGroupCommit(bs)
	}
	return r
}

// claim claims cr: with the claims of other executions on a BatchStore
// when some are on their way.
func (r *Runner) claim(ctx context.Context, cr ClaimRequest) (Claim, error) {
	if r.group == nil {
		return r.store.Claim(ctx, cr)
	}
	return r.group.claims.do(ctx, cr)
}

// complete stores the outcome of the execution fenced by f: with those of
// other executions on a BatchStore when some are on their way.
func (r *Runner) complete(ctx context.Context, f Fence, response []byte) error {
	if r.group == nil {
		return r.store.Complete(ctx, f, response)
	}
	return r.group.complete(ctx, f, response)
}

// untouched reports whether tx was never used: no statement was made
// through it (a store's Tx tells with a Touched method).
func untouched(tx Tx) bool {
	t, ok := tx.(interface{ Touched() bool })
	return ok && !t.Touched()
}

// Register names work so that a Reconciler can resume the executions of
// requests whose Request.Work is name (see Request.Work): the work must be
// able to run from Execution.Input alone, as a retry would run it. Register
// every name before serving; registering a name twice panics.
func (r *Runner) Register(name string, work Work) {
	if name == "" || work == nil {
		panic("idempotency: Register needs a name and a Work")
	}
	if _, dup := r.works.LoadOrStore(name, work); dup {
		panic("idempotency: work " + strconv.Quote(name) + " registered twice")
	}
}

// registered returns the Work registered under name, or nil.
func (r *Runner) registered(name string) Work {
	w, _ := r.works.Load(name)
	work, _ := w.(Work)
	return work
}

// Store returns the Runner's store.
func (r *Runner) Store() Store { return r.store }

// Lease returns the Runner's lease length.
func (r *Runner) Lease() time.Duration { return r.lease }

// TTL returns how long the Runner keeps keys.
func (r *Runner) TTL() time.Duration { return r.ttl }

// Do runs work unless req's key already has an execution, and returns the
// outcome. Possible results:
//
//   - the work ran and completed, or an earlier execution's outcome is
//     replayed (Result.Replayed): Result, nil;
//   - another execution holds the key: an *InProgressError;
//   - the key was used with another fingerprint: ErrFingerprintMismatch;
//   - the work returned an error: that error (see Work), with the stored
//     outcome in Result after Abort;
//   - the work aborted but its outcome could not be stored: an error
//     wrapping the store's, which does not match ErrAborted (the attempt
//     failed and is given up as for a plain error);
//   - this execution's lease was taken over before it completed: an error
//     matching ErrLeaseLost; nothing it wrote through the store was kept;
//   - a statement of the work's transaction failed (TxStore): an error
//     matching ErrTxFailed and the statement's error; nothing was stored,
//     whatever the work returned, and the key is freed or abandoned as for a
//     plain error;
//   - a step's recovery point could not be saved: an error wrapping the
//     store's; likewise nothing was stored, whatever the work returned;
//   - a store error.
//
// A panic in work rolls back the transaction, frees or abandons the key as a
// plain error does, and is re-raised. Writes made after work returns (the
// outcome, a release) do not stop when ctx is cancelled.
//
// The work's context carries ctx's values (and the Execution, and the
// transaction) but not ctx's cancellation or deadline: cancelling ctx once
// the work runs does not stop it. Its deadline is the end of the lease
// instead, which recovery points and Execution.Extend move on; it ends when
// the lease runs out (context.DeadlineExceeded) and when the work returns
// (context.Canceled). A work that needs longer than its lease must Extend it.
func (r *Runner) Do(ctx context.Context, req Request, work Work) (Result, error) {
	return r.do(ctx, req, work, r.txBegin())
}

// do is Do, with the executions' transactions begun by begin (nil: none).
func (r *Runner) do(ctx context.Context, req Request, work Work, begin txBeginner) (Result, error) {
	cr, work, err := r.claimRequest(req, work)
	if err != nil {
		return Result{}, err
	}
	claimed := r.clock.Now() // the lease runs from here
	c, err := r.claim(ctx, cr)
	if err == nil && c.Outcome == ClaimMismatch && req.Refingerprint != nil {
		if v := fingerprintVersion(c.Record.Fingerprint); v != fingerprintVersion(req.Fingerprint) {
			if fp, ok := req.Refingerprint(v); ok && fp == c.Record.Fingerprint {
				cr.Fingerprint = fp
				claimed = r.clock.Now()
				c, err = r.claim(ctx, cr)
			}
		}
	}
	if err != nil {
		err = fmt.Errorf("idempotency: claim: %w", err)
		r.observe(ctx, OutcomeFailed, req.Caller, req.Key, 0, err)
		return Result{}, err
	}
	c.lease = cr.Lease
	return r.claimedWith(ctx, c, claimed, work, OutcomeExecuted, begin)
}

// claimRequest checks req and returns the claim it makes and the work to
// run (work, or the registered one).
func (r *Runner) claimRequest(req Request, work Work) (ClaimRequest, Work, error) {
	if req.Key == "" {
		return ClaimRequest{}, nil, errEmptyKey
	}
	cr := ClaimRequest{
		Caller: req.Caller, Key: req.Key, Fingerprint: req.Fingerprint,
		Lease: r.lease, TTL: r.ttl,
	}
	if req.Lease > 0 && req.Lease < r.lease {
		cr.Lease = req.Lease
	}
	if req.Work != "" {
		if work == nil {
			if work = r.registered(req.Work); work == nil {
				return ClaimRequest{}, nil, retry.Permanent(fmt.Errorf("idempotency: no work given and none registered as %q", req.Work))
			}
		}
		cr.Resume = encodeResume(req.Work, req.Input)
		if req.StartedAtClaim {
			cr.Point = startedPoint
		}
	} else if req.StartedAtClaim {
		return ClaimRequest{}, nil, errStartedWithoutWork
	}
	return cr, work, nil
}

// txBeginner begins the transaction of one execution: a TxStore, or a
// BatchTx.
type txBeginner interface {
	Begin(ctx context.Context, f Fence) (Tx, error)
}

// txBegin returns the Runner's TxStore as a txBeginner, or nil.
func (r *Runner) txBegin() txBeginner {
	if r.tx == nil {
		return nil
	}
	return r.tx
}

// claimed answers a claim: it replays, refuses or runs work; executed is
// the outcome to report when the work runs on a new claim.
func (r *Runner) claimed(ctx context.Context, c Claim, claimed time.Time, work Work, executed Outcome) (Result, error) {
	return r.claimedWith(ctx, c, claimed, work, executed, r.txBegin())
}

// claimedWith is claimed, with the execution's transaction begun by begin
// (nil: none).
func (r *Runner) claimedWith(ctx context.Context, c Claim, claimed time.Time, work Work, executed Outcome, begin txBeginner) (res Result, err error) {
	rec := &c.Record
	out := executed
	switch c.Outcome {
	case ClaimCompleted:
		out, res = OutcomeReplayed, Result{Response: rec.Response, Replayed: true, Attempt: rec.Attempt}
	case ClaimInProgress:
		out, err = OutcomeInProgress, &InProgressError{RetryAfter: r.retryAfter(rec.LockedUntil)}
	case ClaimMismatch:
		out, err = OutcomeMismatch, ErrFingerprintMismatch
	case ClaimCreated, ClaimTakenOver:
		if c.Outcome == ClaimTakenOver && executed == OutcomeExecuted {
			out = OutcomeTakenOver
		}
		res, err = r.execute(ctx, c, claimed, work, begin)
		switch {
		case errors.Is(err, ErrRejected):
			out = OutcomeRejected
		case errors.Is(err, ErrParked):
			out = OutcomeParked
		}
	default:
		out, err = OutcomeFailed, retry.Permanent(fmt.Errorf("idempotency: claim: unknown outcome %d", c.Outcome))
	}
	r.observe(ctx, out, rec.Caller, rec.Key, rec.Attempt, err)
	return res, err
}

// execute runs work for the execution that owns c, claimed at claimed, in
// a transaction begun by begin (nil: none).
func (r *Runner) execute(ctx context.Context, c Claim, claimed time.Time, work Work, begin txBeginner) (res Result, err error) {
	e, err := newExecution(r, c)
	if err != nil {
		return Result{}, err
	}
	start := r.clock.Now()
	defer func() {
		// An execution that lost its lease tells nothing about how long
		// executions take (it stalled, or its process did); none counts for
		// more than a lease, after which a repeat may take over anyway.
		if !errors.Is(err, ErrLeaseLost) {
			r.times.observe(min(r.clock.Since(start), e.lease))
		}
	}()
	f := e.Fence()
	bg := context.WithoutCancel(ctx)
	// The Work's context: ctx's values, bounded by the lease, not by ctx.
	e.ctx = newLeaseContext(ctx, r.clock, claimed.Add(e.lease))
	defer e.ctx.stop()
	wctx := context.WithValue(e.ctx, execKey{}, e)
	var tx Tx
	if begin != nil {
		if tx, err = begin.Begin(wctx, f); err != nil {
			r.abandon(bg, e)
			return Result{}, fmt.Errorf("idempotency: begin: %w", err)
		}
		wctx = tx.Context(wctx)
	}

	done := false
	defer func() {
		if done {
			return
		}
		// work panicked.
		if tx != nil {
			_ = tx.Rollback(bg)
		}
		r.abandon(bg, e)
	}()
	out, werr := work(wctx, e)
	done = true
	e.ctx.stop()
	stepErr := e.failedStep()

	var (
		ab *abort
		pk *parking
	)
	switch {
	case tx != nil && tx.Err() != nil && !errors.Is(werr, ErrRejected) && !errors.Is(werr, ErrLeaseLost):
		// A statement of the transaction failed: nothing of it may commit,
		// and whatever the work made of the failure (an outcome, an Abort)
		// is not stored. The attempt failed; a retry runs cleanly.
		failed := &txFailedError{err: tx.Err()}
		_ = tx.Rollback(bg)
		r.abandon(bg, e)
		return Result{}, failed
	case stepErr != nil && !errors.Is(werr, ErrRejected) && !errors.Is(werr, ErrLeaseLost):
		// A step's recovery point was not saved: the step did not run, or
		// its result was not kept. What the work made of that (a 5xx, an
		// Abort) is not the outcome; the next retry resumes the step.
		if tx != nil {
			_ = tx.Rollback(bg)
		}
		r.abandon(bg, e)
		return Result{}, fmt.Errorf("idempotency: a recovery point was not saved, so nothing was stored: %w", stepErr)
	case werr == nil:
		if _, inBatch := begin.(batchBegin); tx != nil && r.group != nil && !inBatch && untouched(tx) {
			// Nothing to commit with it: the outcome goes with others'.
			// (A batch's member is left to its batch, which keeps such
			// an outcome for its next Commit: taken away, the batch would
			// never report it, and its caller would run it again.)
			_ = tx.Rollback(bg)
			tx = nil
		}
		if tx != nil {
			err = tx.Complete(bg, out)
			if err != nil && !errors.Is(err, ErrLeaseLost) {
				// Everything rolled back, so the attempt may be retried.
				// (Had the commit gone through, the record is completed
				// and abandon's fenced writes change nothing.)
				r.abandon(bg, e)
			}
		} else {
			// Without a transaction the work's effects stay: the key is
			// kept until its lease runs out.
			err = r.complete(bg, f, out)
		}
		if err != nil {
			return Result{}, fmt.Errorf("idempotency: complete: %w", err)
		}
		return Result{Response: out, Attempt: f.Attempt}, nil
	case errors.As(werr, &ab):
		if tx != nil {
			_ = tx.Rollback(bg)
		}
		if err := r.store.Complete(bg, f, ab.response); err != nil {
			// Nothing was stored: not an Abort (the error does not match
			// ErrAborted) but a failed attempt, given up as a plain error.
			r.abandon(bg, e)
			return Result{}, fmt.Errorf("idempotency: complete (the work aborted: %v): %w", werr, err)
		}
		return Result{Response: ab.response, Attempt: f.Attempt}, werr
	case errors.As(werr, &pk):
		if tx != nil {
			_ = tx.Rollback(bg)
		}
		if err := r.store.Park(bg, f, pk.err.Error()); err != nil {
			r.abandon(bg, e)
			return Result{}, fmt.Errorf("idempotency: park (the work failed: %v): %w", werr, err)
		}
		return Result{}, werr
	default:
		if tx != nil {
			_ = tx.Rollback(bg)
		}
		if errors.Is(werr, ErrLeaseLost) {
			return Result{}, werr
		}
		if errors.Is(werr, ErrRejected) {
			if err := r.store.Release(bg, f); err != nil && !errors.Is(err, ErrLeaseLost) {
				return Result{}, errors.Join(werr, fmt.Errorf("idempotency: release: %w", err))
			}
			return Result{}, werr
		}
		r.abandon(bg, e)
		return Result{}, werr
	}
}

// abandon gives up e after a failure: the key is freed when no step has begun
// (nor, for a resumable execution, the started mark was saved), and
// otherwise its lease is cut short so the next retry, or a Reconciler,
// resumes at once.
// Errors are ignored: the lease runs out by itself.
func (r *Runner) abandon(ctx context.Context, e *Execution) {
	if before, ok := ctx.Value(beforeAbandonKey{}).(func()); ok {
		before() // a Reconciler's: see reconciler.takeOver
	}
	point, data := e.saved()
	if point == "" {
		// A claim for a broker's last delivery may have marked the record
		// started meanwhile: the store then keeps it for a Reconciler.
		_ = r.store.ReleaseUnstarted(ctx, e.Fence())
		return
	}
	_ = r.store.SaveRecoveryPoint(ctx, e.Fence(), point, data, abandonLease)
}
