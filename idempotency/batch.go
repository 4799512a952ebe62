package idempotency

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/exactlyonce/retry"
)

// Batch runs the executions of many requests with their durable work
// batched, on a BatchStore (see Runner.StartBatch): the keys of all were
// claimed in one operation, and the outcomes of the executions (with
// their local writes) are stored in one commit per Batch.Commit. Each
// execution keeps every guarantee of Runner.Do; only its outcome becomes
// durable later, at the Commit that follows it.
//
// Its methods are safe for concurrent use: run each request's Do on a
// goroutine of its own, then Commit, then Close.
type Batch struct {
	r    *Runner
	reqs []Request
	at   time.Time // when the claims were made: their leases run from here
	tx   BatchTx   // nil when the store is not a BatchStore

	mu      sync.Mutex
	claims  []Claim // nil when the batch claim failed
	used    []bool  // the claim of request i was given to a Do
	members map[Fence]batchMember
}

// batchMember is an execution whose transaction is in the batch.
type batchMember struct {
	i int
	e *Execution
}

// Batched reports whether the Runner's store does its durable work in
// batches (is a BatchStore).
func (r *Runner) Batched() bool {
	_, ok := r.store.(BatchStore)
	return ok
}

// StartBatch claims the keys of reqs in one operation of the Runner's
// BatchStore and returns the Batch that runs them: Batch.Do runs request
// i with the claim made here. If the batch claim fails, each Do claims
// its request alone. When the store is not a BatchStore, Batch.Do is
// Runner.Do and Commit has nothing to do. End the Batch with Close.
func (r *Runner) StartBatch(ctx context.Context, reqs []Request) (*Batch, error) {
	b := &Batch{r: r, reqs: reqs, used: make([]bool, len(reqs)), members: make(map[Fence]batchMember)}
	bs, ok := r.store.(BatchStore)
	if !ok {
		return b, nil
	}
	tx, err := bs.BeginBatch(ctx)
	if err != nil {
		return nil, fmt.Errorf("idempotency: begin batch: %w", err)
	}
	b.tx = tx
	crs := make([]ClaimRequest, 0, len(reqs))
	for _, req := range reqs {
		cr, _, err := r.claimRequest(req, noWork)
		if err != nil {
			// Do reports it for this request; the others claim alone.
			return b, nil
		}
		crs = append(crs, cr)
	}
	b.at = r.clock.Now()
	claims, err := bs.ClaimBatch(ctx, crs)
	if err == nil && len(claims) == len(reqs) {
		b.claims = claims
	}
	return b, nil
}

// noWork stands for the work of a request while its claim is made, before
// Do is given the work.
func noWork(context.Context, *Execution) ([]byte, error) { return nil, nil }

// Do runs request i (of those given to StartBatch) as Runner.Do runs it,
// with its claim from the batch (the first time it is called for i; later
// calls claim again). One result differs: a nil error with
// Result.Replayed false says that the outcome is in the batch, stored at
// the next Commit, which reports whether it was; until then nothing of
// it is durable. Run every Do of a batch before its last Commit.
func (b *Batch) Do(ctx context.Context, i int, work Work) (Result, error) {
	if i < 0 || i >= len(b.reqs) {
		return Result{}, retry.Permanent(fmt.Errorf("idempotency: batch has no request %d", i))
	}
	req := b.reqs[i]
	var begin txBeginner = b.r.txBegin()
	if b.tx != nil {
		begin = batchBegin{b: b, i: i}
	}
	b.mu.Lock()
	fresh := b.claims != nil && !b.used[i]
	b.used[i] = true
	var c Claim
	if fresh {
		c = b.claims[i]
	}
	b.mu.Unlock()
	if !fresh || (c.Outcome == ClaimMismatch && req.Refingerprint != nil) {
		return b.r.do(ctx, req, work, begin)
	}
	cr, work, err := b.r.claimRequest(req, work)
	if err != nil {
		return Result{}, err
	}
	c.lease = cr.Lease
	return b.r.claimedWith(ctx, c, b.at, work, OutcomeExecuted, begin)
}

// Commit stores in one commit the outcomes that the batch's Do calls
// returned since the last Commit, and returns, by request index, what
// became of each: nil when its outcome is stored; otherwise the error (an
// ErrLeaseLost, or the commit's failure), and the execution was given up
// as a failed one is (its key freed, or left to be resumed at once).
func (b *Batch) Commit(ctx context.Context) map[int]error {
	if b.tx == nil {
		return nil
	}
	results, err := b.tx.Commit(ctx)
	out := make(map[int]error, len(results))
	bg := context.WithoutCancel(ctx)
	for _, res := range results {
		b.mu.Lock()
		m, ok := b.members[res.Fence]
		delete(b.members, res.Fence)
		b.mu.Unlock()
		if !ok {
			continue
		}
		rerr := res.Err
		if rerr == nil && err != nil {
			rerr = err
		}
		if rerr != nil {
			rerr = fmt.Errorf("idempotency: batch commit: %w", rerr)
			if !errors.Is(rerr, ErrLeaseLost) {
				b.r.abandon(bg, m.e)
			}
			b.r.observe(ctx, OutcomeFailed, res.Fence.Caller, res.Fence.Key, res.Fence.Attempt, rerr)
		}
		out[m.i] = rerr
	}
	return out
}

// Close ends the batch; outcomes not committed are not stored.
func (b *Batch) Close(ctx context.Context) error {
	if b.tx == nil {
		return nil
	}
	return b.tx.Close(ctx)
}

// batchBegin begins the transaction of request i in the batch.
type batchBegin struct {
	b *Batch
	i int
}

func (bb batchBegin) Begin(ctx context.Context, f Fence) (Tx, error) {
	tx, err := bb.b.tx.Begin(ctx, f)
	if err != nil {
		return nil, err
	}
	bb.b.mu.Lock()
	bb.b.members[f] = batchMember{i: bb.i, e: FromContext(ctx)}
	bb.b.mu.Unlock()
	return tx, nil
}

// Skip gives up request i without running it, when its Do will not be
// called: a claim the batch made for it is given back (the key freed, or
// left to be resumed at once when its execution had begun), so that the
// request's next claim does not wait for the lease to run out.
func (b *Batch) Skip(ctx context.Context, i int) error {
	if i < 0 || i >= len(b.reqs) {
		return retry.Permanent(fmt.Errorf("idempotency: batch has no request %d", i))
	}
	b.mu.Lock()
	fresh := b.claims != nil && !b.used[i]
	b.used[i] = true
	var c Claim
	if fresh {
		c = b.claims[i]
	}
	b.mu.Unlock()
	if !fresh || (c.Outcome != ClaimCreated && c.Outcome != ClaimTakenOver) {
		return nil
	}
	rec := c.Record
	if rec.RecoveryPoint == "" {
		return b.r.store.ReleaseUnstarted(ctx, rec.Fence())
	}
	return b.r.store.SaveRecoveryPoint(ctx, rec.Fence(), rec.RecoveryPoint, rec.RecoveryData, abandonLease)
}
