package consumer

import (
	"context"
	"errors"

	"github.com/exactlyonce/retry/idempotency"
)

// ListParked returns up to limit of the consumer's parked messages (limit
// <= 0: 100), each a record with its reason
// (Record.Parked), in the order of their keys, starting after afterKey (""
// for the first page, the last record's Key for the next).
func (c *Consumer) ListParked(ctx context.Context, afterKey string, limit int) ([]idempotency.Record, error) {
	recs, err := c.cfg.Runner.Store().ListParked(ctx, c.cfg.Caller, afterKey, limit)
	if err != nil {
		return nil, err
	}
	for i, r := range recs {
		if r.Caller != c.cfg.Caller {
			return recs[:i], nil
		}
	}
	return recs, nil
}

// RetryParked runs the parked message key again now, from the message
// stored with its execution and without a broker delivery, once the cause
// of its parking is mended, and stores its outcome: a later delivery of
// the message is acked without running. It returns what
// idempotency.Runner.RetryParked does; a handler that fails again parks
// the message again (an error matching idempotency.ErrParked).
func (c *Consumer) RetryParked(ctx context.Context, key string) error {
	_, err := c.cfg.Runner.RetryParked(ctx, c.cfg.Caller, key)
	return err
}

// resume is the consumer's registered Work: it runs a message again from
// its stored copy, for RetryParked and a Reconciler. Without a delivery to
// give back, a permanent failure parks the message; any other leaves it
// to the next pass of a Reconciler, which parks it once its record has had
// ReconcilerConfig.MaxAttempts executions.
func (c *Consumer) resume(ctx context.Context, e *idempotency.Execution) ([]byte, error) {
	m, err := decodeInput(e.Key(), e.Input())
	if err != nil {
		return nil, idempotency.Park(err)
	}
	stop := c.keepAlive(e, nil)
	err = c.call(ctx, m)
	stop()
	switch {
	case err == nil:
		c.outage.healthy()
		return nil, nil
	case errors.Is(err, idempotency.ErrAborted), errors.Is(err, idempotency.ErrLeaseLost), errors.Is(err, idempotency.ErrParked):
		return nil, err
	case permanent(err), errors.Is(err, idempotency.ErrRejected):
		// A rejection would free the key, and no broker delivers it again.
		return nil, idempotency.Park(err)
	case dependencyDown(err):
		c.outage.report()
	}
	return nil, err
}
