package pgstore

import (
	"context"
	"fmt"
	"time"
)

// DeleteExpired removes up to limit expired records (limit <= 0: all of them)
// and returns how many it removed. Rows locked by another sweeper or by a
// claim that is replacing them are skipped, so every instance may sweep at
// once without waiting on each other.
func (s *Store) DeleteExpired(ctx context.Context, limit int) (int, error) {
	var lim any // NULL: LIMIT ALL
	if limit > 0 {
		lim = int64(limit)
	}
	tag, err := s.pool.Exec(ctx, s.q.deleteExpired, lim, s.now())
	if err != nil {
		return 0, fmt.Errorf("pgstore: delete expired: %w", classify(err))
	}
	return int(tag.RowsAffected()), nil
}

// Sweeper periodically deletes expired idempotency records and, when
// OutboxRetention is set, delivered outbox messages older than it. Run one on
// every instance: batches never block each other.
type Sweeper struct {
	// Store is the store to sweep. Required.
	Store *Store
	// Interval is the pause between sweeps (default one minute).
	Interval time.Duration
	// Batch is how many rows one statement deletes at most (default 1000);
	// a sweep runs batches until one comes back short.
	Batch int
	// OutboxRetention, when positive, is how long delivered outbox messages
	// are kept before the sweeper deletes them.
	OutboxRetention time.Duration
	// OnError, if set, is told of each failed sweep; the sweeper carries on.
	OnError func(error)
}

// Run sweeps every Interval until ctx ends, then returns ctx.Err().
func (w *Sweeper) Run(ctx context.Context) error {
	interval := w.Interval
	if interval <= 0 {
		interval = time.Minute
	}
	return every(ctx, interval, func(ctx context.Context) bool {
		if _, err := w.Sweep(ctx); err != nil && ctx.Err() == nil && w.OnError != nil {
			w.OnError(err)
		}
		return false
	})
}

// Sweep deletes expired records (and old delivered outbox messages) in
// batches until a batch comes back short, and returns how many rows it deleted.
func (w *Sweeper) Sweep(ctx context.Context) (int, error) {
	batch := w.Batch
	if batch <= 0 {
		batch = 1000
	}
	total := 0
	for {
		n, err := w.Store.DeleteExpired(ctx, batch)
		total += n
		if err != nil {
			return total, err
		}
		if n < batch {
			break
		}
	}
	if w.OutboxRetention <= 0 {
		return total, nil
	}
	for {
		n, err := w.Store.PurgeDelivered(ctx, w.OutboxRetention, batch)
		total += n
		if err != nil || n < batch {
			return total, err
		}
	}
}
