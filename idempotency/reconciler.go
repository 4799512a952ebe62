package idempotency

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
)

// Reconciler defaults.
const (
	// defaultReconcileInterval is the time between two passes of a
	// Reconciler.
	defaultReconcileInterval = 10 * time.Second
	// defaultReconcileBatch is how many stalled executions a Reconciler
	// resumes at once, each on a goroutine of its own.
	defaultReconcileBatch = 32
	// defaultReconcileAttempts is how many executions a record gets in all
	// (its first included) before a Reconciler parks it instead of
	// resuming it again.
	defaultReconcileAttempts = 5
)

// ErrNotResumable is matched (errors.Is) by the reason a Reconciler parks
// a stalled execution for: it has nothing to resume it with (no stored
// request or registered work), or it failed too many times.
var ErrNotResumable = errors.New("idempotency: the stalled execution cannot be resumed")

// ReconcilerConfig configures StartReconciler and Runner.Reconcile. The zero
// value uses the defaults.
type ReconcilerConfig struct {
	// Interval between passes (default 10 seconds). A pass
	// takes over every execution whose lease has run out, so a stalled
	// execution is taken over within one interval of the end of its lease,
	// as long as the Reconciler has room for it (see Batch) and no
	// resumption of that pass failed (see Runner.Reconcile); it then runs as long
	// as its work takes.
	Interval time.Duration
	// Batch is how many executions a Reconciler resumes at once (default
	// 32): a pass takes over as many stalled executions
	// as it has room for, and more as soon as one ends, so a slow
	// execution holds back only its own room. While all of it is taken,
	// the others wait for room.
	Batch int
	// MaxAttempts is how many executions a record gets in all, its first
	// and every takeover (a client's retry or a Reconciler's) included,
	// before a Reconciler parks it (default 5).
	MaxAttempts int64
	// Clock times the passes (default: the system clock). The store decides
	// which leases have run out.
	Clock clock.Clock
	// Logger reports every execution resumed or parked (default
	// slog.Default()). The Runner's observer (WithObserver) hears them too
	// (OutcomeReconciled, OutcomeParked).
	Logger *slog.Logger
	// Caller, if set, makes the Reconciler take over only this caller's
	// stalled executions; a message consumer runs one for its own caller.
	// The stalled executions of the other callers sharing the store are
	// left to their own Reconcilers: never taken over, resumed or parked
	// by this one. "" (the default) takes over those of every caller.
	Caller string
}

func (c ReconcilerConfig) withDefaults() ReconcilerConfig {
	if c.Interval <= 0 {
		c.Interval = defaultReconcileInterval
	}
	if c.Batch <= 0 {
		c.Batch = defaultReconcileBatch
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = defaultReconcileAttempts
	}
	if c.Clock == nil {
		c.Clock = clock.New()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Reconciler finishes executions that stalled (their process died, or they
// ran past their lease) when nobody retries them: a browser that closed, a
// job runner that gave up, a webhook sender that calls again only hours
// later. It runs on a goroutine of its own until Stop.
type Reconciler struct {
	p  *periodic
	rc *reconciler
}

// StartReconciler starts a Reconciler calling runner.Reconcile every cfg.Interval
// (the first pass one interval after the start), beside the Sweeper. Any
// number of instances sharing a store may run one: the store gives each
// stalled execution to one of them (or to a client's retry) per lease, and
// the fence keeps the others out. Call Stop to end it.
func StartReconciler(runner *Runner, cfg ReconcilerConfig) *Reconciler {
	if runner == nil {
		panic("idempotency: StartReconciler needs a Runner")
	}
	cfg = cfg.withDefaults()
	rc := newReconciler(runner, cfg)
	var finished atomic.Int64 // unread: the log and the observer tell
	p := startPeriodic(cfg.Clock, cfg.Interval, func(ctx context.Context) {
		if err := rc.pass(ctx, &finished); err != nil && ctx.Err() == nil {
			cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "idempotency: reconcile", slog.Any("error", err))
		}
	})
	return &Reconciler{p: p, rc: rc}
}

// Stop stops the Reconciler and waits for its goroutines to end: a pass in
// progress takes over nothing more, and the executions it resumed run to
// their end (each bounded by its lease). Safe to call more than once.
func (rc *Reconciler) Stop() {
	rc.p.stop()
	rc.rc.wg.Wait()
}

// Reconcile makes one pass of a Reconciler now, on the caller's goroutine:
// it takes over the executions of r's store
// that stalled (began executing, saved a recovery point or the started
// mark, and their lease ran out), only cfg.Caller's when it is set, and
// resumes each through the same fenced
// takeover a client's retry uses: completed steps are skipped, a step that
// began is called again with its downstream key, and the outcome is stored
// as if the client had retried, so a client that comes back gets it. An
// execution is resumed with the work registered under its Request.Work
// (Runner.Register) or, behind the Middleware with WithResume, with its
// stored request. One that has neither, or whose record reached
// cfg.MaxAttempts executions, is parked (Store.Park) with its reason,
// reported and never taken over by a Reconciler again; a client's retry
// still may. A resumed work that panics fails like one that returns an
// error: the panic is recovered and logged with its stack.
//
// At most cfg.Batch executions are resumed at once: the pass takes over as
// many as it has room for, and more as soon as one ends, so a slow
// execution holds back only its own room, never the others. It ends when
// no stalled execution is left, or when a resumption failed (that
// execution's lease is cut short so that its client's retry need not wait,
// and the pass would take it straight back: it is tried again on the next
// pass, never in a hot loop), or when ctx ends; it then waits for the
// executions it resumed.
//
// It returns how many executions it resumed (their outcome stored) or
// parked; those whose resumption failed are not counted.
func (r *Runner) Reconcile(ctx context.Context, cfg ReconcilerConfig) (int, error) {
	rc := newReconciler(r, cfg.withDefaults())
	var finished atomic.Int64
	err := rc.pass(ctx, &finished)
	rc.wg.Wait()
	if err == nil {
		err = ctx.Err()
	}
	return int(finished.Load()), err
}

// reconciler resumes stalled executions of a Runner, at most cfg.Batch at
// once: Runner.Reconcile makes one pass of one, a Reconciler one pass an interval.
// Executions resumed by a pass may still run during the next one.
type reconciler struct {
	runner *Runner
	cfg    ReconcilerConfig
	// slots holds a token per execution being resumed.
	slots chan struct{}
	wg    sync.WaitGroup
	// mu orders takeovers against the failures of executions: a failed
	// execution's lease is cut short once failures counts it, so a pass
	// that saw failures unchanged under mu cannot take it straight back.
	mu       sync.Mutex
	failures int64
}

func newReconciler(runner *Runner, cfg ReconcilerConfig) *reconciler {
	return &reconciler{runner: runner, cfg: cfg, slots: make(chan struct{}, cfg.Batch)}
}

// pass takes over stalled executions, as many at a time as there are free
// slots, and resumes each on a goroutine of its own (rc.wg), adding those
// resumed or parked to finished. It returns, without waiting for them,
// when none is left, when an execution failed since it began, or when ctx
// ended.
func (rc *reconciler) pass(ctx context.Context, finished *atomic.Int64) error {
	rc.mu.Lock()
	failures := rc.failures
	rc.mu.Unlock()
	for {
		free := rc.acquire(ctx)
		if free == 0 {
			return nil
		}
		stalled, claimed, err := rc.takeOver(ctx, free, failures)
		rc.release(free - len(stalled))
		if err != nil {
			return err
		}
		// An execution that fails counts its failure before its lease
		// is cut short (Runner.abandon), and again when it ended, for
		// any other failure.
		rctx := context.WithValue(ctx, beforeAbandonKey{}, rc.failed)
		for _, rec := range stalled {
			rc.wg.Go(func() {
				defer rc.release(1)
				if rc.runner.reconcile(rctx, rec, claimed, rc.cfg) {
					finished.Add(1)
				} else {
					rc.failed()
				}
			})
		}
		if len(stalled) < free {
			return nil
		}
	}
}

// takeOver takes over up to n stalled executions, unless an execution
// failed since the pass saw failures; it returns them and the time their
// lease runs from.
func (rc *reconciler) takeOver(ctx context.Context, n int, failures int64) ([]Record, time.Time, error) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.failures != failures || ctx.Err() != nil {
		return nil, time.Time{}, nil
	}
	claimed := rc.runner.clock.Now() // each lease runs from here
	stalled, err := rc.runner.store.TakeOverStalled(ctx, rc.cfg.Caller, n, rc.runner.lease)
	if err != nil {
		return nil, claimed, fmt.Errorf("idempotency: take over stalled executions: %w", err)
	}
	return stalled, claimed, nil
}

// failed counts the failure of an execution, before its lease is cut
// short.
func (rc *reconciler) failed() {
	rc.mu.Lock()
	rc.failures++
	rc.mu.Unlock()
}

// beforeAbandonKey is the context key of a func that Runner.abandon calls
// before it gives up an execution.
type beforeAbandonKey struct{}

// acquire waits for a free slot, takes it and every other one free, and
// returns how many it took: 0 when ctx ended first.
func (rc *reconciler) acquire(ctx context.Context) int {
	select {
	case rc.slots <- struct{}{}:
	case <-ctx.Done():
		return 0
	}
	n := 1
	for n < cap(rc.slots) {
		select {
		case rc.slots <- struct{}{}:
			n++
		default:
			return n
		}
	}
	return n
}

// release frees n slots.
func (rc *reconciler) release(n int) {
	for range n {
		<-rc.slots
	}
}

// reconcile resumes, or parks, one execution taken over at claimed, and
// reports whether it ended as it should (resumed and completed, or parked).
func (r *Runner) reconcile(ctx context.Context, rec Record, claimed time.Time, cfg ReconcilerConfig) bool {
	work, reason := r.resumeWork(rec, cfg.MaxAttempts)
	log := cfg.Logger.With(slog.String("caller", rec.Caller), slog.String("key", rec.Key), slog.Int64("attempt", rec.Attempt))
	if reason != nil {
		err := r.store.Park(context.WithoutCancel(ctx), rec.Fence(), reason.Error())
		if err != nil {
			log.LogAttrs(ctx, slog.LevelWarn, "idempotency: cannot park a stalled execution", slog.Any("reason", reason), slog.Any("error", err))
			return false
		}
		log.LogAttrs(ctx, slog.LevelWarn, "idempotency: parked a stalled execution", slog.Any("reason", reason))
		r.observe(ctx, OutcomeParked, rec.Caller, rec.Key, rec.Attempt, reason)
		return true
	}
	err := r.resume(ctx, rec, claimed, work)
	var p *workPanic
	if errors.As(err, &p) {
		log.LogAttrs(ctx, slog.LevelError, "idempotency: resuming a stalled execution panicked",
			slog.Any("error", err), slog.String("stack", string(p.stack)))
		return false
	}
	if err != nil && !errors.Is(err, ErrAborted) {
		log.LogAttrs(ctx, slog.LevelWarn, "idempotency: resuming a stalled execution failed", slog.Any("error", err))
		return false
	}
	log.LogAttrs(ctx, slog.LevelInfo, "idempotency: resumed a stalled execution", slog.Any("outcome", err))
	return true
}

// resume runs work for rec, taken over at claimed, as a retry would. A
// panic of the work is recovered (after the execution's own cleanup: its
// transaction rolled back and its lease cut short, as for an error),
// observed as the execution's failure and returned as a *workPanic: a
// Reconciler runs on a goroutine nobody else recovers, and a panic there
// would end the process, and the next instance's that takes the record
// over, until MaxAttempts.
func (r *Runner) resume(ctx context.Context, rec Record, claimed time.Time, work Work) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &workPanic{value: v, stack: debug.Stack()}
			r.observe(ctx, OutcomeReconciled, rec.Caller, rec.Key, rec.Attempt, err)
		}
	}()
	_, err = r.claimed(ctx, Claim{Outcome: ClaimTakenOver, Record: rec}, claimed, work, OutcomeReconciled)
	return err
}

// workPanic is the failure of a resumed work that panicked.
type workPanic struct {
	value any
	stack []byte
}

func (p *workPanic) Error() string {
	return fmt.Sprintf("idempotency: the resumed work panicked: %v", p.value)
}

// resumeWork returns the work that resumes rec, or why there is none.
func (r *Runner) resumeWork(rec Record, maxAttempts int64) (Work, error) {
	if rec.Attempt > maxAttempts {
		return nil, fmt.Errorf("%w: %d executions did not complete it", ErrNotResumable, rec.Attempt-1)
	}
	if len(rec.Resume) == 0 {
		return nil, fmt.Errorf("%w: no stored request or work", ErrNotResumable)
	}
	name, _, err := decodeResume(rec.Resume)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotResumable, err)
	}
	work := r.registered(name)
	if work == nil {
		return nil, fmt.Errorf("%w: no work registered as %q", ErrNotResumable, name)
	}
	return work, nil
}
