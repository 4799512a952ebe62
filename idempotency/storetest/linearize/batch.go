package linearize

import (
	"context"
	"errors"
	"fmt"

	"github.com/anishathalye/porcupine"
	"github.com/exactlyonce/retry/idempotency"
)

// batchShare is the percentage of a client's calls on a BatchStore that
// are batches (claims or completions, half each), so that batches and
// single calls interleave on the same keys.
const batchShare = 12

// batch makes a batch of claims or one of completions. A batch promises
// no atomicity across its members: each member is recorded as a call of
// its own on its key, spanning the whole batch, from before it began to
// after it returned, and must be linearizable somewhere in that span.
func (c *client) batch(ctx context.Context, bs idempotency.BatchStore) {
	if c.rng.IntN(2) == 0 && len(c.fences) > 0 {
		c.completeBatch(ctx, bs)
		return
	}
	c.claimBatch(ctx, bs)
}

// claimBatch claims 2 to 4 keys in one ClaimBatch, a key sometimes twice
// (as a consumer's batch may hold two deliveries of one message).
func (c *client) claimBatch(ctx context.Context, bs idempotency.BatchStore) {
	tag := fmt.Sprintf("%d-%d", c.id, c.n)
	ins := make([]input, 2+c.rng.IntN(3))
	reqs := make([]idempotency.ClaimRequest, len(ins))
	for i := range ins {
		ins[i], reqs[i] = c.claimRequest(c.rng.IntN(len(keys)), fmt.Sprintf("%s.%d", tag, i))
		ins[i].Batch = tag
	}
	now := c.epochNow()
	callAt := c.r.rec.now()
	claims, err := bs.ClaimBatch(ctx, reqs)
	returnAt := c.r.rec.now()
	if err == nil && len(claims) != len(reqs) {
		err = fmt.Errorf("%d claims for %d requests", len(claims), len(reqs))
	}
	if err != nil {
		// A failed batch may have claimed some of its keys, with leases
		// nobody uses; the workload never provokes one.
		c.r.rec.unexpected("ClaimBatch", err)
		return
	}
	for i, in := range ins {
		in.Now = now
		c.r.rec.add(porcupine.Operation{ClientId: c.id, Input: in, Call: callAt,
			Output: c.claimed(in.Key, claims[i]), Return: returnAt})
	}
}

// completeBatch completes 2 or 3 executions in one batch, with fences the
// client holds (fresh, stale or forged; never one fence twice, as a
// Runner never completes one execution twice), and records each with what
// its Complete or the batch's Commit said of it.
func (c *client) completeBatch(ctx context.Context, bs idempotency.BatchStore) {
	tag := fmt.Sprintf("%d-%d", c.id, c.n)
	var members []fence
	for range 2 + c.rng.IntN(2) {
		f, _ := c.pickFence()
		dup := false
		for _, m := range members {
			dup = dup || m == f
		}
		if !dup {
			members = append(members, f)
		}
	}
	now := c.epochNow()
	ins := make([]input, len(members))
	outs := make([]output, len(members))
	for i, f := range members {
		ins[i] = input{Kind: opComplete, Key: f.key, Now: now, Attempt: f.attempt, Generation: f.generation,
			Response: fmt.Sprintf("response-%s.%d", tag, i), Batch: tag}
	}
	callAt := c.r.rec.now()
	err := c.runBatch(ctx, bs, ins, outs)
	returnAt := c.r.rec.now()
	if err != nil {
		// A failed Commit keeps nothing of the batch; the workload never
		// provokes one.
		c.r.rec.unexpected("completion batch", err)
		return
	}
	for i := range ins {
		c.r.rec.add(porcupine.Operation{ClientId: c.id, Input: ins[i], Call: callAt, Output: outs[i], Return: returnAt})
	}
}

// runBatch begins a batch, completes the members ins in it, commits it
// and closes it, and sets outs to what became of each member. An error
// is one the workload never provokes.
func (c *client) runBatch(ctx context.Context, bs idempotency.BatchStore, ins []input, outs []output) (err error) {
	bt, err := bs.BeginBatch(ctx)
	if err != nil {
		return fmt.Errorf("BeginBatch: %w", err)
	}
	defer func() {
		if cerr := bt.Close(ctx); cerr != nil {
			err = errors.Join(err, fmt.Errorf("Close: %w", cerr))
		}
	}()
	added := make(map[idempotency.Fence]int, len(ins))
	for i, in := range ins {
		f := idempotency.Fence{Caller: keys[in.Key][0], Key: keys[in.Key][1], Attempt: in.Attempt, Generation: in.Generation}
		tx, err := bt.Begin(ctx, f)
		if err != nil {
			return fmt.Errorf("Begin: %w", err)
		}
		switch err := tx.Complete(ctx, []byte(in.Response)); {
		case errors.Is(err, idempotency.ErrLeaseLost):
			outs[i] = output{Err: errLeaseLost}
		case err != nil:
			return fmt.Errorf("Complete: %w", err)
		default:
			added[f] = i
		}
	}
	results, err := bt.Commit(ctx)
	if err != nil {
		return fmt.Errorf("Commit: %w", err)
	}
	for _, r := range results {
		i, ok := added[r.Fence]
		if !ok {
			return fmt.Errorf("Commit: a result for %+v, not awaiting the commit", r.Fence)
		}
		delete(added, r.Fence)
		switch {
		case errors.Is(r.Err, idempotency.ErrLeaseLost):
			outs[i] = output{Err: errLeaseLost}
		case r.Err != nil:
			return fmt.Errorf("Commit: %+v: %w", r.Fence, r.Err)
		}
	}
	if len(added) > 0 {
		return fmt.Errorf("Commit: no result for %d of the completions it was given", len(added))
	}
	return nil
}
