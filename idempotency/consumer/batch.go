package consumer

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"

	"github.com/benbjohnson/clock"

	"github.com/exactlyonce/retry/idempotency"
)

// batcher groups the deliveries of a Run whose Runner's store is an
// idempotency.BatchStore: the deliveries taken while the claims of a group
// are on their way to the store form the next group, whose keys are
// claimed in one operation and whose outcomes are committed together
// (see group). A delivery taken while no claim is on its way is claimed at
// once, alone: at low load nothing waits for a batch to fill.
type batcher struct {
	c          *Consumer
	ctx, grace context.Context
	wg         *sync.WaitGroup

	mu       sync.Mutex
	queue    []Delivery
	claiming bool
}

// add hands d to the batcher; its slot is freed when it is settled.
func (b *batcher) add(d Delivery) {
	b.mu.Lock()
	b.queue = append(b.queue, d)
	if b.claiming {
		b.mu.Unlock()
		return
	}
	b.claiming = true
	b.mu.Unlock()
	b.wg.Go(b.claimLoop)
}

// limit is the most deliveries of one batch: half the consumer's
// slots, so that one batch's claim overlaps another's handlers and commit.
func (b *batcher) limit() int { return max(1, b.c.cfg.MaxInFlight/2) }

// claimLoop starts groups of the queued deliveries until none is left.
func (b *batcher) claimLoop() {
	for {
		b.mu.Lock()
		ds := b.queue
		if len(ds) > b.limit() {
			// The rest form the next batch, whose claim goes out while
			// this one runs and commits: two batches in flight.
			ds, b.queue = ds[:b.limit()], slices.Clone(ds[b.limit():])
		} else {
			b.queue = nil
		}
		if len(ds) == 0 {
			b.claiming = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		b.start(ds)
	}
}

// start claims the keys of ds in one operation and starts their handling,
// each on a goroutine of its own.
func (b *batcher) start(ds []Delivery) {
	c := b.c
	var (
		members []Delivery
		msgs    []*Message
		reqs    []idempotency.Request
	)
	for _, d := range ds {
		m, err := d.Message()
		if err != nil {
			// handle stops the consumer for it.
			b.wg.Go(func() {
				defer c.release(1)
				c.handle(b.ctx, b.grace, d)
			})
			continue
		}
		c.delivered(b.ctx, m)
		members = append(members, d)
		msgs = append(msgs, m)
		reqs = append(reqs, c.request(m, d.Last()))
	}
	if len(members) == 0 {
		return
	}
	bt, err := c.cfg.Runner.StartBatch(b.ctx, reqs)
	if err != nil {
		c.cfg.Logger.Warn("consumer: cannot start a batch; handling its messages one by one",
			slog.String("consumer", c.cfg.Name), slog.Any("error", err))
		for i, d := range members {
			b.wg.Go(func() {
				defer c.release(1)
				c.run(b.ctx, b.grace, d, msgs[i], reqs[i], nil)
			})
		}
		return
	}
	g := newGroup(c, bt, len(members), context.WithoutCancel(b.ctx))
	for i, d := range members {
		first := &firstRun{g: g, i: i}
		b.wg.Go(func() {
			defer c.release(1)
			c.run(b.ctx, b.grace, d, msgs[i], reqs[i], first)
		})
	}
}

// errNotCommitted answers a member whose outcome no commit of its batch
// reported: the delivery is run again, which replays the outcome if it
// was stored after all.
var errNotCommitted = errors.New("consumer: the batch ended without committing the outcome")

// firstRun is the first run of one delivery of a group: in its batch.
type firstRun struct {
	g    *group
	i    int
	once sync.Once
}

// do runs the request in the batch and, when its outcome waits for the
// batch's commit, waits for it: a nil error means the outcome is stored.
func (f *firstRun) do(ctx context.Context, _ idempotency.Request, work idempotency.Work) (idempotency.Result, error) {
	res, err := f.g.b.Do(ctx, f.i, work)
	pending := err == nil && !res.Replayed
	var done <-chan error
	f.once.Do(func() { done = f.g.report(f.i, pending) })
	if pending {
		err = <-done
	}
	return res, err
}

// skip gives back the claim the batch made, when the delivery is not run.
func (f *firstRun) skip(ctx context.Context) {
	f.once.Do(func() {
		if err := f.g.b.Skip(ctx, f.i); err != nil {
			f.g.c.cfg.Logger.Warn("consumer: cannot give back a claim", slog.String("consumer", f.g.c.cfg.Name), slog.Any("error", err))
		}
		f.g.report(f.i, false)
	})
}

// group is one batch of deliveries: their outcomes are committed together
// once every one of them has run (or been given up), or, when some run
// long, BatchWait after the first outcome was ready, and again when the
// rest are.
type group struct {
	c   *Consumer
	b   *idempotency.Batch
	ctx context.Context // for the commits: not cancelled by the stop

	mu      sync.Mutex
	left    int                // members that have not reported
	waiting map[int]chan error // members whose outcome waits for a commit
	// answered holds the commit's answers for members whose outcome was
	// committed before they reported it.
	answered map[int]error
	closed   bool
	timer    *clock.Timer // the time bound, armed by the first outcome
	flushMu  sync.Mutex   // one commit at a time
}

func newGroup(c *Consumer, b *idempotency.Batch, n int, ctx context.Context) *group {
	return &group{c: c, b: b, ctx: ctx, left: n, waiting: make(map[int]chan error), answered: make(map[int]error)}
}

// report records that member i ran (its outcome waits for a commit when
// pending) and returns the channel that gets the commit's answer. The
// last report commits the group at once.
func (g *group) report(i int, pending bool) <-chan error {
	g.mu.Lock()
	g.left--
	var done chan error
	if pending {
		done = make(chan error, 1)
		if err, ok := g.answered[i]; ok {
			delete(g.answered, i)
			done <- err
		} else {
			g.waiting[i] = done
		}
		if g.timer == nil && g.left > 0 {
			g.timer = g.c.cfg.Clock.AfterFunc(g.c.cfg.BatchWait, g.flush)
		}
	}
	last := g.left == 0
	g.mu.Unlock()
	if last {
		g.flush()
	}
	return done
}

// flush commits the outcomes ready now and answers their members; after
// the last member reported it ends the batch.
func (g *group) flush() {
	g.flushMu.Lock()
	defer g.flushMu.Unlock()
	g.mu.Lock()
	closed := g.closed
	g.mu.Unlock()
	if closed {
		return
	}
	results := g.b.Commit(g.ctx)
	g.mu.Lock()
	if g.timer != nil {
		g.timer.Stop()
		g.timer = nil
	}
	for i, err := range results {
		if done, ok := g.waiting[i]; ok {
			done <- err
			delete(g.waiting, i)
		} else {
			g.answered[i] = err
		}
	}
	end := g.left == 0
	g.closed = end
	if end {
		for i, done := range g.waiting {
			// Not in the commit: cannot happen with a store that keeps
			// the BatchTx contract; the delivery is run again.
			done <- errNotCommitted
			delete(g.waiting, i)
		}
	}
	g.mu.Unlock()
	if end {
		_ = g.b.Close(g.ctx)
	}
}
