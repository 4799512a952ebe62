package idempotency

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
)

// Reconciler defaults.
const (
	// DefaultReconcileInterval is the time between two passes of a
	// Reconciler.
	DefaultReconcileInterval = 10 * time.Second
	// DefaultReconcileBatch is how many stalled executions a pass takes
	// over at once (and resumes at once, each on a goroutine of its own).
	DefaultReconcileBatch = 32
	// DefaultReconcileAttempts is how many executions a record gets in all
	// (its first included) before a Reconciler parks it instead of
	// resuming it again.
	DefaultReconcileAttempts = 5
)

// ErrNotResumable is matched (errors.Is) by the reason a Reconciler parks
// a stalled execution for: it has nothing to resume it with (no stored
// request or registered work), or it failed too many times.
var ErrNotResumable = errors.New("idempotency: the stalled execution cannot be resumed")

// ReconcilerConfig configures StartReconciler and Reconcile. The zero
// value uses the defaults.
type ReconcilerConfig struct {
	// Interval between passes (default DefaultReconcileInterval). A stalled
	// execution is finished within its lease and one interval of its stall.
	Interval time.Duration
	// Batch is how many stalled executions a pass takes over and resumes at
	// once (default DefaultReconcileBatch); a pass repeats until it finds
	// fewer.
	Batch int
	// MaxAttempts is how many executions a record gets in all, its first
	// and every takeover (a client's retry or a Reconciler's) included,
	// before a Reconciler parks it (default DefaultReconcileAttempts).
	MaxAttempts int64
	// Clock times the passes (default: the system clock). The store decides
	// which leases have run out.
	Clock clock.Clock
	// Logger reports every execution resumed or parked (default
	// slog.Default()). The Runner's Observer hears them too
	// (OutcomeReconciled, OutcomeParked).
	Logger *slog.Logger
}

func (c ReconcilerConfig) withDefaults() ReconcilerConfig {
	if c.Interval <= 0 {
		c.Interval = DefaultReconcileInterval
	}
	if c.Batch <= 0 {
		c.Batch = DefaultReconcileBatch
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = DefaultReconcileAttempts
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
type Reconciler struct{ p *periodic }

// StartReconciler starts a Reconciler calling Reconcile every cfg.Interval
// (the first pass one interval after the start), beside the Sweeper. Any
// number of instances sharing a store may run one: the store gives each
// stalled execution to one of them (or to a client's retry) per lease, and
// the fence keeps the others out. Call Stop to end it.
func StartReconciler(runner *Runner, cfg ReconcilerConfig) *Reconciler {
	if runner == nil {
		panic("idempotency: StartReconciler needs a Runner")
	}
	cfg = cfg.withDefaults()
	return &Reconciler{p: startPeriodic(cfg.Clock, cfg.Interval, func(ctx context.Context) {
		if _, err := Reconcile(ctx, runner, cfg); err != nil && ctx.Err() == nil {
			cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "idempotency: reconcile", slog.Any("error", err))
		}
	})}
}

// Stop stops the Reconciler and waits for its goroutine to end: a pass in
// progress takes over nothing more, and the executions it resumed run to
// their end (each bounded by its lease). Safe to call more than once.
func (rc *Reconciler) Stop() { rc.p.stop() }

// Reconcile makes one pass: it takes over the executions of runner's store
// that stalled (began executing, saved a recovery point or the started
// mark, and their lease ran out), cfg.Batch at a time, and resumes each
// through the same fenced takeover a client's retry uses: completed steps
// are skipped, a step that began is called again with its downstream key,
// and the outcome is stored as if the client had retried, so a client that
// comes back gets it. An execution is resumed with the work registered
// under its Request.Work (Runner.Register) or, behind the Middleware with
// WithResume, with its stored request. One that has neither, or whose
// record reached cfg.MaxAttempts executions, is parked (Store.Park) with
// its reason, reported and never taken over by a Reconciler again; a
// client's retry still may.
//
// It returns how many executions it resumed or parked.
func Reconcile(ctx context.Context, runner *Runner, cfg ReconcilerConfig) (int, error) {
	cfg = cfg.withDefaults()
	total := 0
	for ctx.Err() == nil {
		claimed := runner.clock.Now() // each lease runs from here
		stalled, err := runner.store.TakeOverStalled(ctx, cfg.Batch, runner.lease)
		if err != nil {
			return total, fmt.Errorf("idempotency: take over stalled executions: %w", err)
		}
		var (
			wg     sync.WaitGroup
			failed atomic.Bool
		)
		for _, rec := range stalled {
			wg.Go(func() {
				if !runner.reconcile(ctx, rec, claimed, cfg) {
					failed.Store(true)
				}
			})
		}
		wg.Wait()
		total += len(stalled)
		// A failed execution's lease is cut short, so that its client's
		// retry need not wait: the pass ends rather than take it again at
		// once. It is tried again on the next pass, never in a hot loop.
		if len(stalled) < cfg.Batch || failed.Load() {
			break
		}
	}
	return total, ctx.Err()
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
	_, err := r.claimed(ctx, Claim{Outcome: ClaimTakenOver, Record: rec}, claimed, work, OutcomeReconciled)
	if err != nil && !errors.Is(err, ErrAborted) {
		log.LogAttrs(ctx, slog.LevelWarn, "idempotency: resuming a stalled execution failed", slog.Any("error", err))
		return false
	}
	log.LogAttrs(ctx, slog.LevelInfo, "idempotency: resumed a stalled execution", slog.Any("outcome", err))
	return true
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
