package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/exactlyonce/retry/idempotency"
)

// A batched cell's store: the cell's BatchStore, watched, with a companion
// in every batch.

// batchWatch is a batched cell's BatchStore as its Runner sees it. Every
// ClaimBatch gets a companion request, on a key of its own, claimed with
// the cell's; every batch of completions then completes the companions
// claimed and not yet completed, with the cell's execution: so that the
// batch's statements run with more than one member, whatever the fault
// does to them. It counts the claims and completions sent alone (a
// batched cell's Runner sends none) and the batches committed.
type batchWatch struct {
	idempotency.BatchStore

	singles atomic.Int32 // Claim and Complete calls
	commits atomic.Int32 // BatchTx.Commit calls

	mu         sync.Mutex
	companions []*companion
}

// txBatchWatch is the batchWatch of a TxStore: the Runner begins its
// executions' transactions on the store.
type txBatchWatch struct{ *batchWatch }

// companion is one companion request and what became of it.
type companion struct {
	key   string
	fence idempotency.Fence
	// claimed: its claim created the record; added: its completion went
	// into a batch; stored: that batch's Commit reported it stored;
	// unsure: that Commit failed (it may have been stored); done: nothing
	// more is asked of it.
	claimed, added, stored, unsure, done bool
}

// watchBatches returns s, which must be a BatchStore, watched.
func watchBatches(s idempotency.Store) (idempotency.Store, *batchWatch) {
	w := &batchWatch{BatchStore: s.(idempotency.BatchStore)}
	if _, ok := s.(idempotency.TxStore); ok {
		return txBatchWatch{w}, w
	}
	return w, w
}

// Begin begins an execution's transaction on the store.
func (w txBatchWatch) Begin(ctx context.Context, f idempotency.Fence) (idempotency.Tx, error) {
	return w.BatchStore.(idempotency.TxStore).Begin(ctx, f)
}

// Claim counts a claim sent alone.
func (w *batchWatch) Claim(ctx context.Context, req idempotency.ClaimRequest) (idempotency.Claim, error) {
	w.singles.Add(1)
	return w.BatchStore.Claim(ctx, req)
}

// Complete counts a completion sent alone.
func (w *batchWatch) Complete(ctx context.Context, f idempotency.Fence, response []byte) error {
	w.singles.Add(1)
	return w.BatchStore.Complete(ctx, f, response)
}

// ClaimBatch claims reqs and a new companion, last.
func (w *batchWatch) ClaimBatch(ctx context.Context, reqs []idempotency.ClaimRequest) ([]idempotency.Claim, error) {
	w.mu.Lock()
	c := &companion{key: fmt.Sprintf("companion-%d", len(w.companions)+1)}
	w.companions = append(w.companions, c)
	w.mu.Unlock()
	cr := idempotency.ClaimRequest{Caller: faultCaller, Key: c.key, Fingerprint: "fp", Lease: lease, TTL: reqs[0].TTL}
	claims, err := w.BatchStore.ClaimBatch(ctx, append(slices.Clone(reqs), cr))
	if err != nil {
		return nil, err
	}
	if len(claims) != len(reqs)+1 {
		return nil, fmt.Errorf("storetest: ClaimBatch of %d requests returned %d claims", len(reqs)+1, len(claims))
	}
	if last := claims[len(reqs)]; last.Outcome == idempotency.ClaimCreated {
		w.mu.Lock()
		c.claimed, c.fence = true, last.Record.Fence()
		w.mu.Unlock()
	}
	return claims[:len(reqs)], nil
}

// BeginBatch begins a batch that completes the companions with the
// Runner's completions.
func (w *batchWatch) BeginBatch(ctx context.Context) (idempotency.BatchTx, error) {
	bt, err := w.BatchStore.BeginBatch(ctx)
	if err != nil {
		return nil, err
	}
	return &watchedBatch{BatchTx: bt, w: w}, nil
}

// watchedBatch is a batch of completions with the companions'.
type watchedBatch struct {
	idempotency.BatchTx
	w *batchWatch
}

// Commit adds the companions waiting for their completion, commits, and
// reports what the batch's commit reported, the companions' left out.
func (b *watchedBatch) Commit(ctx context.Context) ([]idempotency.BatchResult, error) {
	w := b.w
	w.commits.Add(1)
	w.mu.Lock()
	var waiting []*companion
	for _, c := range w.companions {
		if c.claimed && !c.added && !c.done {
			waiting = append(waiting, c)
		}
	}
	w.mu.Unlock()
	added := map[idempotency.Fence]*companion{}
	for _, c := range waiting {
		tx, err := b.BatchTx.Begin(ctx, c.fence)
		if err == nil {
			err = tx.Complete(ctx, []byte(c.key))
		}
		w.mu.Lock()
		if err == nil {
			c.added = true
			added[c.fence] = c
		} else {
			// Its lease ran out, or the batch's connection is gone:
			// the companion is given up, never completed.
			c.done = true
		}
		w.mu.Unlock()
	}
	results, err := b.BatchTx.Commit(ctx)
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range added {
		c.done = true
		c.unsure = err != nil
	}
	if err != nil {
		return results, err
	}
	var own []idempotency.BatchResult
	for _, r := range results {
		c, ok := added[r.Fence]
		if !ok {
			own = append(own, r)
			continue
		}
		c.stored = r.Err == nil
		c.unsure = r.Err != nil && !errors.Is(r.Err, idempotency.ErrLeaseLost)
		delete(added, r.Fence)
	}
	for _, c := range added {
		c.unsure = true // not reported: not known to be stored
	}
	return own, nil
}

// check asserts that the Runner sent nothing alone, that a batch of
// completions committed unless every completion committed its own
// transaction (writes), and that each companion's outcome is stored
// exactly when its batch's commit said so: stored once, with its
// response, or not at all; either, when the commit failed.
func (w *batchWatch) check(t *testing.T, h Harness, writes bool) {
	t.Helper()
	if n := w.singles.Load(); n != 0 {
		t.Errorf("the Runner sent %d claims or completions alone, want every one batched", n)
	}
	if n := w.commits.Load(); n == 0 && !writes {
		t.Errorf("no batch of completions was committed")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range w.companions {
		var rec idempotency.Record
		err := retried(func() (err error) {
			rec, err = h.Store.Get(context.Background(), faultCaller, c.key)
			return err
		})
		completed := err == nil && rec.State == idempotency.StateCompleted
		switch {
		case err != nil && !errors.Is(err, idempotency.ErrNotFound):
			t.Errorf("companion %s: %v", c.key, err)
		case completed && string(rec.Response) != c.key:
			t.Errorf("companion %s completed with %q, want %q", c.key, rec.Response, c.key)
		case c.stored && !completed:
			t.Errorf("companion %s: its batch's commit reported it stored, and it is %s", c.key, rec.State)
		case completed && !c.stored && !c.unsure:
			t.Errorf("companion %s is completed, and no commit reported it stored", c.key)
		}
	}
}
