package idempotency

import (
	"context"
	"time"

	"github.com/benbjohnson/clock"
)

// SweeperConfig configures StartSweeper. The zero value sweeps every
// DefaultSweepInterval in batches of DefaultSweepBatch on the system clock.
type SweeperConfig struct {
	// Interval between sweeps (default DefaultSweepInterval).
	Interval time.Duration
	// Batch is the limit passed to each DeleteExpired call; a sweep repeats
	// the call until it removes fewer (default DefaultSweepBatch).
	Batch int
	// Clock times the sweeps (default: the system clock). It need not be the
	// store's clock: the store decides what has expired.
	Clock clock.Clock
	// OnSweep, if set, is called after every sweep with the number of records
	// removed and the error that ended it, if any. It runs on the sweeper's
	// goroutine.
	OnSweep func(removed int, err error)
}

// Sweeper defaults.
const (
	// DefaultSweepInterval is the time between sweeps.
	DefaultSweepInterval = time.Minute
	// DefaultSweepBatch is the limit of each DeleteExpired call.
	DefaultSweepBatch = 1000
)

// Sweeper removes expired records from a Store periodically, on a goroutine
// of its own, until Stop.
type Sweeper struct{ p *periodic }

// StartSweeper starts a Sweeper calling store.DeleteExpired every
// cfg.Interval. The first sweep happens one interval after the start. Any Store
// works; for a shared database, running one per instance is safe. Call Stop
// to end it.
func StartSweeper(store Store, cfg SweeperConfig) *Sweeper {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultSweepInterval
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultSweepBatch
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.New()
	}
	return &Sweeper{p: startPeriodic(cfg.Clock, cfg.Interval, func(ctx context.Context) {
		n, err := Sweep(ctx, store, cfg.Batch)
		if ctx.Err() == nil && cfg.OnSweep != nil {
			cfg.OnSweep(n, err)
		}
	})}
}

// Stop stops the sweeper, cancelling a sweep in progress, and waits for its
// goroutine to end. Safe to call more than once.
func (s *Sweeper) Stop() { s.p.stop() }

// Sweep removes every expired record from store, batch (<= 0: all at
// once) at a time, and returns how many it removed.
func Sweep(ctx context.Context, store Store, batch int) (int, error) {
	total := 0
	for {
		n, err := store.DeleteExpired(ctx, batch)
		total += n
		if err != nil || batch <= 0 || n < batch {
			return total, err
		}
	}
}
