package idempotency

import (
	"context"
	"time"

	"github.com/benbjohnson/clock"
)

// SweeperConfig configures StartSweeper (and SweeperConfig.Sweep, one sweep
// now). The zero value sweeps every
// minute in batches of 1000 on the system clock.
type SweeperConfig struct {
	// Interval between sweeps (default 1 minute).
	Interval time.Duration
	// Batch is the limit passed to each DeleteExpired call; a sweep repeats
	// the call until it removes fewer (default 1000; negative: no limit,
	// everything expired in one call).
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
	// defaultSweepInterval is the time between sweeps.
	defaultSweepInterval = time.Minute
	// defaultSweepBatch is the limit of each DeleteExpired call.
	defaultSweepBatch = 1000
)

// withDefaults returns c with its zero fields set to the defaults.
func (c SweeperConfig) withDefaults() SweeperConfig {
	if c.Interval <= 0 {
		c.Interval = defaultSweepInterval
	}
	if c.Batch == 0 {
		c.Batch = defaultSweepBatch
	}
	if c.Clock == nil {
		c.Clock = clock.New()
	}
	return c
}

// Sweeper removes expired records from a Store periodically, on a goroutine
// of its own, until Stop.
type Sweeper struct{ p *periodic }

// StartSweeper starts a Sweeper calling store.DeleteExpired every
// cfg.Interval. The first sweep happens one interval after the start. Any Store
// works; for a shared database, running one per instance is safe. Call Stop
// to end it.
func StartSweeper(store Store, cfg SweeperConfig) *Sweeper {
	cfg = cfg.withDefaults()
	return &Sweeper{p: startPeriodic(cfg.Clock, cfg.Interval, func(ctx context.Context) {
		n, err := sweep(ctx, store, cfg.Batch)
		if ctx.Err() == nil && cfg.OnSweep != nil {
			cfg.OnSweep(n, err)
		}
	})}
}

// Stop stops the sweeper, cancelling a sweep in progress, and waits for its
// goroutine to end. Safe to call more than once.
func (s *Sweeper) Stop() { s.p.stop() }

// Sweep makes one sweep of a Sweeper with c now, on the caller's goroutine:
// it removes every expired record from store, c.Batch at a time (default
// 1000; < 0: all at once), and returns how many it removed.
func (c SweeperConfig) Sweep(ctx context.Context, store Store) (int, error) {
	return sweep(ctx, store, c.withDefaults().Batch)
}

// sweep removes every expired record from store, batch (<= 0: all at
// once) at a time, and returns how many it removed.
func sweep(ctx context.Context, store Store, batch int) (int, error) {
	total := 0
	for {
		n, err := store.DeleteExpired(ctx, batch)
		total += n
		if err != nil || batch <= 0 || n < batch {
			return total, err
		}
	}
}
