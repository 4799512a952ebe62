package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/exactlyonce/retry/idempotency"
)

// Decline settles a delivery that the consumer took from its broker but
// will not handle, as a stopping consumer settles those it holds: one the
// broker will deliver again is given back at once; the broker's last one
// is handed to the store (claimed with the message and marked started,
// for the Reconciler of whichever consumer runs next) and then acked, or
// terminated if the store cannot take it before ctx ends. An adapter
// calls it for the deliveries its client received after Run stopped
// fetching.
func (c *Consumer) Decline(ctx context.Context, d Delivery) {
	m, err := d.Message()
	if err != nil {
		_ = d.Nak(context.WithoutCancel(ctx), 0)
		c.settled(ctx, DeliveryGivenBack, nil, err)
		return
	}
	c.stopped(ctx, d, m, c.request(m, d.Last()))
}

// errHandedOver is the error of a stopping consumer's run of the broker's
// last delivery: the run claimed the message (stored with its execution
// and marked started) and left it, its lease cut short, to a Reconciler.
var errHandedOver = errors.New("consumer: stopped before the broker's last delivery was handled; left to the Reconciler")

// stopped settles d, which the consumer holds as it stops: a delivery the
// broker will make again is given back at once; the broker's last one is
// handed to the store (inbox), where the next Reconciler's pass finishes
// it, and then acked. grace bounds the handing.
func (c *Consumer) stopped(grace context.Context, d Delivery, m *Message, req idempotency.Request) {
	if !d.Last() {
		_ = d.Nak(context.WithoutCancel(grace), 0)
		c.settled(grace, DeliveryGivenBack, m, nil)
		return
	}
	log := c.cfg.Logger.With(slog.String("consumer", c.cfg.Name), slog.String("key", m.Key), slog.Int("delivery", m.Delivery))
	bg := context.WithoutCancel(grace)
	for attempt := 1; ; attempt++ {
		owned, err := c.inbox(grace, req, errHandedOver)
		switch {
		case owned != "":
			c.settled(bg, owned, m, err)
			if aerr := d.Ack(bg); aerr != nil {
				// The store owns it: a redelivery finds it there.
				log.Warn("consumer: ack failed", slog.Any("error", aerr))
			}
			return
		case errors.Is(err, idempotency.ErrFingerprintMismatch):
			c.settled(bg, DeliveryTerminated, m, err)
			c.term(bg, d, err, func() *slog.Logger { return log })
			return
		}
		if !c.wait(grace, c.cfg.Backoff.Delay(attempt, 0, rand.Float64())) {
			log.Error("consumer: stopping, and the store cannot take the broker's last delivery; terminating it", slog.Any("error", err))
			err = fmt.Errorf("the consumer stopped before the broker's last delivery (%d) was handled, and the store could not take it: %w", m.Delivery, err)
			c.settled(bg, DeliveryTerminated, m, err)
			c.term(bg, d, err, func() *slog.Logger { return log })
			return
		}
	}
}

// inbox hands the message of req to the store without running it: its
// execution is claimed and left with leave, the error of a work that did
// not run the handler: idempotency.Park(reason) parks it (ListParked,
// RetryParked), errHandedOver leaves it in progress, marked started at
// its claim (the broker's last delivery), for a Reconciler. It reports
// whether the store owns the message, as the delivery's outcome ("" when
// it does not): completed (DeliveryReplayed), parked (DeliveryParked), or
// held by an execution that a Reconciler resumes if it stalls
// (DeliveryInProgress).
func (c *Consumer) inbox(ctx context.Context, req idempotency.Request, leave error) (DeliveryOutcome, error) {
	for tries := 1; ; tries++ {
		_, err := c.cfg.Runner.Do(ctx, req, func(context.Context, *idempotency.Execution) ([]byte, error) {
			return nil, leave
		})
		var ip *idempotency.InProgressError
		switch {
		case errors.Is(err, idempotency.ErrParked):
			c.stats.parked.Add(1)
			return DeliveryParked, nil
		case errors.Is(err, errHandedOver) && req.StartedAtClaim:
			// The claim marked it started: abandoned, its lease cut short.
			c.stats.handedOver.Add(1)
			return DeliveryInProgress, nil
		case err == nil:
			// Completed before: this delivery is a duplicate.
			c.stats.duplicates.Add(1)
			return DeliveryReplayed, nil
		case errors.As(err, &ip):
			rec, gerr := c.cfg.Runner.Store().Get(ctx, req.Caller, req.Key)
			if gerr != nil {
				return "", errors.Join(err, gerr)
			}
			if abandoned(c.cfg.Clock, rec) && tries < abandonedTries && c.wait(ctx, abandonedWait) {
				// This consumer's own last run failed a moment ago and
				// left the key to be taken over at once: take it.
				continue
			}
			switch {
			case rec.State == idempotency.StateCompleted:
				return DeliveryReplayed, err
			case rec.Parked != "":
				return DeliveryParked, err
			case rec.RecoveryPoint != "" && len(rec.Resume) > 0:
				return DeliveryInProgress, err
			}
			return "", err
		}
		return "", err
	}
}

// abandonedWait and abandonedTries bound how long inbox waits for the
// lease of an execution that failed a moment ago to run out.
const (
	abandonedWait  = time.Millisecond
	abandonedTries = 4
)

// abandoned reports whether rec is an execution in progress whose lease
// runs out within abandonedWait: one that failed and was left to be taken
// over at once (its lease cut short).
func abandoned(clk clock.Clock, rec idempotency.Record) bool {
	return rec.State == idempotency.StateInProgress && rec.Parked == "" &&
		clk.Until(rec.LockedUntil) < abandonedWait
}

// wait waits for d on the consumer's clock, and reports false when ctx
// ended first.
func (c *Consumer) wait(ctx context.Context, d time.Duration) bool {
	t := c.cfg.Clock.Timer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
