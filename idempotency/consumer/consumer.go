package consumer

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
)

// Consumer runs a Handler over the deliveries of a Source with
// exactly-once effect (see the package documentation). It is safe for
// concurrent use; Run it once at a time per Source.
type Consumer struct {
	cfg    Config
	stats  counters
	outage outage

	// fatal is the error that stops Run (a message without a key).
	fatal atomic.Pointer[error]
	// reg is the registration of the consumer's name with the Runner;
	// running counts the Runs in progress.
	reg     *registration
	running atomic.Int32

	mu        sync.Mutex
	inFlight  int                // deliveries taken and not yet settled
	freed     chan struct{}      // a slot was freed (buffered 1)
	cancelRun context.CancelFunc // ends the fetch of the Run in progress
}

// New returns a Consumer and registers its handler with cfg.Runner under
// cfg.Name, for RetryParked and a Reconciler. A name is one consumer's on
// a Runner: New fails while another Consumer of the name on cfg.Runner
// runs (its Run has not returned) and otherwise takes the name over, so
// that a new Consumer can follow one whose Run ended (its connection
// closed, say); the Consumer it replaced runs no more (Run fails with
// ErrReplaced). A name registered otherwise with the Runner fails New.
func New(cfg Config) (c *Consumer, err error) {
	cfg, err = cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c = &Consumer{cfg: cfg, freed: make(chan struct{}, 1)}
	c.outage.c = c
	if err := register(c); err != nil {
		return nil, err
	}
	return c, nil
}

// Caller returns the caller the consumer's keys are scoped by.
func (c *Consumer) Caller() string { return c.cfg.Caller }

// Run takes deliveries from src and handles up to Config.MaxInFlight at
// once, each on a goroutine of its own, until ctx ends or src fails.
// While a dependency is down it fetches nothing new (see the package
// documentation). When it stops (ctx ended, src failed, or a message
// without a key, ErrNoKey) it fetches no more and settles at once the
// deliveries it holds between runs: it gives back those the broker will
// deliver again and hands the last ones to the store (parked, then acked;
// see the package documentation). It waits up to Config.StopGrace for the
// handlers that run to finish, settling their deliveries the same way,
// and returns ctx.Err() or the error that stopped it. A handler still
// running after the grace period goes on without Run; its execution's
// lease is renewed until it returns.
func (c *Consumer) Run(ctx context.Context, src Source) error {
	if err := c.reg.start(c); err != nil {
		return err
	}
	defer c.reg.done(c)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c.mu.Lock()
	c.cancelRun = cancel
	c.mu.Unlock()
	grace, endGrace := afterGrace(ctx, c.cfg.Clock, c.cfg.StopGrace)
	defer endGrace()
	var wg, reconciling sync.WaitGroup
	reconciling.Go(func() { c.reconcile(ctx) })
	err := c.fetch(ctx, grace, src, &wg)
	cancel()
	c.drain(grace, &wg, &reconciling)
	return err
}

// fetch takes deliveries from src and starts their handling on wg until
// ctx ends or src fails, and returns the error that ends Run.
func (c *Consumer) fetch(ctx, grace context.Context, src Source, wg *sync.WaitGroup) error {
	var batches *batcher
	if c.cfg.Runner.Batched() {
		batches = &batcher{c: c, ctx: ctx, grace: grace, wg: wg}
	}
	for {
		n, err := c.await(ctx)
		if err != nil {
			return err
		}
		taken := 0
		err = src.Fetch(ctx, n, func(d Delivery) {
			if taken == n {
				// More than asked for: the broker delivers it again.
				_ = d.Nak(context.WithoutCancel(ctx), 0)
				c.settled(ctx, DeliveryGivenBack, nil, nil)
				return
			}
			taken++
			if batches != nil {
				batches.add(d)
				return
			}
			wg.Go(func() {
				defer c.release(1)
				c.handle(ctx, grace, d)
			})
		})
		c.release(n - taken)
		c.observe(ctx, Event{Kind: EventFetched, Asked: n, Fetched: taken})
		if p := c.fatal.Load(); p != nil {
			return *p
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("consumer %s: %w", c.cfg.Name, err)
		}
	}
}

// drain waits for the handlings on wg and the reconciling to end, until
// grace ends.
func (c *Consumer) drain(grace context.Context, wg, reconciling *sync.WaitGroup) {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		reconciling.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-grace.Done():
		c.mu.Lock()
		n := c.inFlight
		c.mu.Unlock()
		c.cfg.Logger.Warn("consumer: the stop's grace period ended with handlers still running",
			slog.String("consumer", c.cfg.Name), slog.Int("running", n), slog.Duration("grace", c.cfg.StopGrace))
	}
}

// afterGrace returns a context that ends grace after ctx does (timed by
// clk), or when end is called.
func afterGrace(ctx context.Context, clk clock.Clock, grace time.Duration) (context.Context, func()) {
	g, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var (
		mu    sync.Mutex
		timer *clock.Timer
	)
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if g.Err() == nil {
			timer = clk.AfterFunc(grace, cancel)
		}
	})
	return g, func() {
		stop()
		cancel()
		mu.Lock()
		defer mu.Unlock()
		if timer != nil {
			timer.Stop()
		}
	}
}

// await waits until deliveries may be fetched and takes the slots for
// them: once a quarter of the slots are free (or none is taken), so that
// fetches come in batches, and while a dependency is down only one, for a
// probe, when nothing runs and the probe is due. It returns ctx's error,
// or the error that stops the consumer.
func (c *Consumer) await(ctx context.Context) (int, error) {
	batch := max(1, c.cfg.MaxInFlight/4)
	var timer waitTimer
	defer timer.stop()
	for {
		if p := c.fatal.Load(); p != nil {
			return 0, *p
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		down := c.outage.down()
		c.mu.Lock()
		free := c.cfg.MaxInFlight - c.inFlight
		n := 0
		switch {
		case down && c.inFlight == 0 && c.outage.probeDue():
			n = 1
		case !down && (free >= batch || (free > 0 && c.inFlight == 0)):
			n = free
		}
		c.inFlight += n
		c.mu.Unlock()
		if n > 0 {
			return n, nil
		}
		var tick <-chan time.Time
		if down {
			tick = timer.reset(c.cfg.Clock, outagePoll)
		}
		select {
		case <-ctx.Done():
		case <-c.freed:
		case <-tick:
		}
	}
}

// release frees n slots.
func (c *Consumer) release(n int) {
	if n <= 0 {
		return
	}
	c.mu.Lock()
	c.inFlight -= n
	c.mu.Unlock()
	select {
	case c.freed <- struct{}{}:
	default:
	}
}

// stop records the error that ends Run, and ends its fetch.
func (c *Consumer) stop(err error) {
	c.fatal.CompareAndSwap(nil, &err)
	c.mu.Lock()
	cancel := c.cancelRun
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}
