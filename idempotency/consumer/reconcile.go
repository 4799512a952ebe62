package consumer

import (
	"context"
	"log/slog"
	"math"

	"github.com/exactlyonce/retry/idempotency"
)

// reconcile is the consumer's own Reconciler: every
// Config.ReconcileInterval, until ctx ends, it takes over the stalled
// executions of the consumer's caller (their consumer died, or stopped
// and handed the broker's last deliveries to the store) and finishes
// them from their stored messages (see the package documentation). A
// pass is skipped while a dependency is down: its runs would fail and
// spend the records' attempts. A record's attempts count the consumer's
// own runs of a held delivery too (each run claims it anew), so they say
// nothing of a poison message: the consumer's Reconciler parks a message
// only when its run fails permanently, and tries the others again on a
// later pass. It returns once its last pass ended, after the executions
// it resumed.
func (c *Consumer) reconcile(ctx context.Context) {
	tick := c.cfg.Clock.Ticker(c.cfg.ReconcileInterval)
	defer tick.Stop()
	cfg := idempotency.ReconcilerConfig{Caller: c.cfg.Caller, Clock: c.cfg.Clock, Logger: c.cfg.Logger,
		MaxAttempts: math.MaxInt64}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if c.outage.down() {
			continue
		}
		if _, err := c.cfg.Runner.Reconcile(ctx, cfg); err != nil && ctx.Err() == nil {
			c.cfg.Logger.Warn("consumer: reconcile", slog.String("consumer", c.cfg.Name), slog.Any("error", err))
		}
	}
}
