package consumer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"runtime/debug"
	"sync"
	"syscall"
	"time"

	retry "github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/idempotency"
)

// minRedelay is the shortest wait before a message held elsewhere, or
// whose execution lost its lease, is delivered again.
const minRedelay = time.Second

// handlerRun is what the handler did in one call of Runner.Do.
type handlerRun struct {
	ran bool
	err error
}

// handle settles one delivery: runs it through Runner.Do until it is
// acked, given back or terminated. ctx ends when the consumer stops, grace
// when its grace period does.
func (c *Consumer) handle(ctx, grace context.Context, d Delivery) {
	bg := context.WithoutCancel(ctx)
	m, err := d.Message()
	if err != nil {
		c.cfg.Logger.Error("consumer: cannot key a message; stopping", slog.String("consumer", c.cfg.Name), slog.Any("error", err))
		_ = d.Nak(bg, 0)
		c.settled(ctx, DeliveryGivenBack, nil, err)
		c.stop(err)
		return
	}
	c.delivered(ctx, m)
	c.run(ctx, grace, d, m, c.request(m, d.Last()), nil)
}

// run runs d's message m through Runner.Do until the delivery is settled;
// first, if not nil, makes the first run instead (in a batch).
func (c *Consumer) run(ctx, grace context.Context, d Delivery, m *Message, req idempotency.Request, first *firstRun) {
	for local := 1; ; local++ {
		if ctx.Err() != nil {
			if local == 1 && first != nil {
				first.skip(context.WithoutCancel(ctx))
			}
			c.stopped(grace, d, m, req)
			return
		}
		var run handlerRun
		do := c.cfg.Runner.Do
		if local == 1 && first != nil {
			do = first.do
		}
		res, err := do(ctx, req, c.work(d, m, &run))
		hold, done := c.settle(ctx, d, m, req, res, err, run, local)
		if done {
			return
		}
		c.settled(ctx, DeliveryHeld, m, err)
		if !c.hold(ctx, d, hold, c.outage.down()) {
			c.stopped(grace, d, m, req)
			return
		}
	}
}

// request is the Runner's request for m: keyed by its id, with the
// message stored for the consumer's registered work, claimed with the
// consumer's lease. On the broker's last
// delivery (last), which the broker will never make again, the claim
// itself marks the execution started: the store owns the message from the
// claim on, and a Reconciler finishes it whatever dies when.
func (c *Consumer) request(m *Message, last bool) idempotency.Request {
	return idempotency.Request{
		Caller:         c.cfg.Caller,
		Key:            m.Key,
		Fingerprint:    idempotency.Fingerprint("MESSAGE", m.Subject, "", m.Body),
		Work:           c.cfg.Name,
		Input:          encodeInput(m),
		StartedAtClaim: last,
		Lease:          c.lease(),
	}
}

// DefaultLease is the longest lease a consumer's executions claim with,
// whatever the Runner's: the consumer renews it every third of it while
// the handler runs, so a short one costs a renewal now and then, and the
// messages of a consumer that died are taken over (by the broker's
// redelivery, or a Reconciler) about this long after.
const DefaultLease = 10 * time.Second

// lease is the lease the consumer's executions claim with: the Runner's,
// or DefaultLease if shorter.
func (c *Consumer) lease() time.Duration { return min(c.cfg.Runner.Lease(), DefaultLease) }

// settle acts on the result of one Runner.Do for d: it acks, gives back or
// terminates the delivery (done), or says how long to hold it before
// running it again here. local counts the runs of this delivery here.
// ctx is the consumer's: its end cuts short the delay of a Nak. req is
// the request run, for parking it.
func (c *Consumer) settle(ctx context.Context, d Delivery, m *Message, req idempotency.Request, res idempotency.Result, err error, run handlerRun, local int) (hold time.Duration, done bool) {
	log := func() *slog.Logger {
		return c.cfg.Logger.With(slog.String("consumer", c.cfg.Name), slog.String("key", m.Key), slog.Int("delivery", m.Delivery))
	}
	var ip *idempotency.InProgressError
	// A statement of the handler's transaction that failed because the
	// store could not be reached is an outage of the store, whatever the
	// handler made of it; one the store refused for good parks the
	// message (below); one it refused for now (a serialization failure)
	// is the handler's failure.
	txFailed := errors.Is(err, idempotency.ErrTxFailed)
	handlerFailed := run.ran && run.err != nil && errors.Is(err, run.err) && !(txFailed && unreachable(err))
	switch {
	case err == nil || errors.Is(err, idempotency.ErrAborted):
		c.outage.healthy()
		if res.Replayed {
			c.stats.duplicates.Add(1)
			c.settled(ctx, DeliveryReplayed, m, nil)
		} else {
			c.stats.executed.Add(1)
			c.settled(ctx, DeliveryExecuted, m, err)
		}
		if aerr := d.Ack(ctx); aerr != nil {
			// The outcome is stored: the redelivery is acked without running.
			log().Warn("consumer: ack failed", slog.Any("error", aerr))
		}
		return 0, true
	case errors.As(err, &ip) || errors.Is(err, idempotency.ErrLeaseLost):
		delay := minRedelay
		if ip != nil {
			delay = max(ip.RetryAfter, minRedelay)
		}
		if d.Last() {
			return delay, false
		}
		c.stats.inProgress.Add(1)
		c.settled(ctx, DeliveryInProgress, m, err)
		c.nak(ctx, d, delay, log)
		return 0, true
	case errors.Is(err, idempotency.ErrParked):
		c.stats.parked.Add(1)
		c.settled(ctx, DeliveryParked, m, err)
		c.term(ctx, d, err, log)
		return 0, true
	case errors.Is(err, idempotency.ErrFingerprintMismatch), errors.Is(err, idempotency.ErrRejected):
		c.settled(ctx, DeliveryTerminated, m, err)
		c.term(ctx, d, err, log)
		return 0, true
	case txFailed && retry.IsPermanent(err):
		// It will fail so on every run: park it with the reason, so the
		// store keeps the message for RetryParked, then settle it as a
		// parked one. Held while the store cannot take it.
		switch owned, perr := c.inbox(ctx, req, idempotency.Park(err)); owned {
		case DeliveryParked:
			c.settled(ctx, DeliveryParked, m, err)
			c.term(ctx, d, err, log)
			return 0, true
		case DeliveryReplayed:
			c.settled(ctx, DeliveryReplayed, m, nil)
			if aerr := d.Ack(ctx); aerr != nil {
				log().Warn("consumer: ack failed", slog.Any("error", aerr))
			}
			return 0, true
		case "":
			log().Warn("consumer: cannot park a message whose transaction failed; holding it", slog.Any("reason", err), slog.Any("error", perr))
		}
		return c.cfg.Backoff.Delay(local, 0, rand.Float64()), false
	case handlerFailed && !dependencyDown(err) && !c.outage.down() && !d.Last():
		c.stats.retried.Add(1)
		c.settled(ctx, DeliveryRetried, m, err)
		c.nak(ctx, d, c.cfg.Backoff.Delay(max(m.Delivery, 1), 0, rand.Float64()), log)
		return 0, true
	default:
		// The dependency is down, the store failed, or this is the last
		// delivery: hold it, and run it again here.
		if !handlerFailed || dependencyDown(err) {
			c.outage.report()
		}
		if c.cfg.Logger.Enabled(ctx, slog.LevelDebug) {
			log().Debug("consumer: holding a delivery", slog.Any("error", err))
		}
		return c.cfg.Backoff.Delay(local, 0, rand.Float64()), false
	}
}

// nak gives d back to be delivered again after delay.
func (c *Consumer) nak(ctx context.Context, d Delivery, delay time.Duration, log func() *slog.Logger) {
	if err := d.Nak(ctx, delay); err != nil {
		// The broker delivers it again after its ack deadline.
		log().Warn("consumer: nak failed", slog.Any("error", err))
	}
}

// term terminates d for err.
func (c *Consumer) term(ctx context.Context, d Delivery, err error, log func() *slog.Logger) {
	c.stats.terminated.Add(1)
	log().Warn("consumer: message terminated", slog.Any("reason", err))
	if terr := d.Term(ctx, err.Error()); terr != nil {
		log().Warn("consumer: terminate failed", slog.Any("error", terr))
	}
}

// hold keeps d, alive at the broker, for delay, or through an outage
// until the dependencies are up again if that comes first. It reports
// false when ctx ended first.
func (c *Consumer) hold(ctx context.Context, d Delivery, delay time.Duration, outage bool) bool {
	c.stats.held.Add(1)
	end := c.cfg.Clock.Timer(delay)
	defer end.Stop()
	tick := c.cfg.Clock.Ticker(c.cfg.KeepAlive)
	defer tick.Stop()
	var poll <-chan time.Time
	if outage {
		t := c.cfg.Clock.Ticker(outagePoll)
		defer t.Stop()
		poll = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return false
		case <-end.C:
			return true
		case <-poll:
			if !c.outage.down() {
				return true
			}
		case <-tick.C:
			_ = d.InProgress(ctx)
		}
	}
}

// unreachable reports whether err says the store could not be reached:
// a connection refused, reset or closed, a dial or a read that failed.
func unreachable(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE)
}

// dependencyDown reports whether err says a dependency is down.
func dependencyDown(err error) bool { return errors.Is(err, retry.ErrDependencyDown) }

// work is the Work of one delivery: the handler, with the delivery and
// the execution's lease kept alive, its error turned into what Runner.Do
// should do with the execution.
func (c *Consumer) work(d Delivery, m *Message, run *handlerRun) idempotency.Work {
	return func(ctx context.Context, e *idempotency.Execution) ([]byte, error) {
		stop := c.keepAlive(e, d)
		err := c.call(ctx, m)
		stop()
		run.ran, run.err = true, err
		switch {
		case err == nil:
			return nil, nil
		case errors.Is(err, idempotency.ErrRejected), errors.Is(err, idempotency.ErrParked),
			errors.Is(err, idempotency.ErrAborted), errors.Is(err, idempotency.ErrLeaseLost):
			return nil, err
		case permanent(err):
			return nil, idempotency.Park(err)
		case dependencyDown(err) || c.outage.down():
			return nil, err
		case d.Last():
			return nil, idempotency.Park(fmt.Errorf("the broker's last delivery (%d) failed: %w", m.Delivery, err))
		case m.Delivery >= c.cfg.MaxDeliveries:
			return nil, idempotency.Park(fmt.Errorf("delivery %d of at most %d (Config.MaxDeliveries) failed: %w", m.Delivery, c.cfg.MaxDeliveries, err))
		}
		return nil, err
	}
}

// call runs the handler, turning a panic into a permanent failure, and
// tells the observer how long it ran.
func (c *Consumer) call(ctx context.Context, m *Message) (err error) {
	var began time.Time
	if c.cfg.Observer != nil {
		began = c.cfg.Clock.Now()
	}
	defer func() {
		if p := recover(); p != nil {
			c.cfg.Logger.Error("consumer: handler panicked", slog.String("consumer", c.cfg.Name),
				slog.String("key", m.Key), slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
			err = retry.Permanent(fmt.Errorf("consumer: handler panicked: %v", p))
		}
		if c.cfg.Observer != nil {
			c.observe(ctx, Event{Kind: EventHandled, Key: m.Key, Delivery: m.Delivery, Duration: c.cfg.Clock.Since(began), Err: err})
		}
	}()
	return c.cfg.Handler(ctx, m)
}

// permanent reports whether the handler's err will recur however often the
// message is delivered: marked retry.Permanent (as a store marks a failure every
// repeat meets).
// A cancelled context, which retry.IsPermanent also counts, is not: the
// consumer may be stopping.
func permanent(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false
	}
	return retry.IsPermanent(err)
}

// keepAlive keeps d alive at the broker and e's lease in the store, until
// the returned stop is called; d may be nil.
func (c *Consumer) keepAlive(e *idempotency.Execution, d Delivery) (stop func()) {
	every := c.cfg.KeepAlive
	if third := c.lease() / 3; third < every {
		every = third
	}
	ctx, cancel := context.WithCancel(context.Background())
	tick := c.cfg.Clock.Ticker(every)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if d != nil {
				_ = d.InProgress(ctx)
			}
			if err := e.Extend(ctx); err != nil && ctx.Err() == nil {
				c.cfg.Logger.Warn("consumer: cannot extend the lease", slog.String("consumer", c.cfg.Name),
					slog.String("key", e.Key()), slog.Any("error", err))
				if errors.Is(err, idempotency.ErrLeaseLost) {
					return
				}
			}
		}
	})
	return func() {
		cancel()
		wg.Wait()
	}
}
