package idempotency

import (
	"context"
	"errors"
)

// errBatchUnreported is the error of a completion a batch's commit did
// not report on.
var errBatchUnreported = errors.New("idempotency: the batch's commit did not report the completion")

// groupCommit groups the claims and the completions of a Runner's
// executions on a BatchStore.
type groupCommit struct {
	claims      group[ClaimRequest, Claim]
	completions group[completion, error]
}

// completion is an execution's outcome to store.
type completion struct {
	f        Fence
	response []byte
}

// newGroupCommit returns the group commit of store.
func newGroupCommit(store BatchStore) *groupCommit {
	g := &groupCommit{}
	g.claims.one = store.Claim
	g.claims.many = store.ClaimBatch
	g.claims.abandon = func(ctx context.Context, c Claim) {
		if c.Outcome == ClaimCreated || c.Outcome == ClaimTakenOver {
			// Freed, or left to a Reconciler if it has a recovery point.
			_ = store.ReleaseUnstarted(ctx, c.Record.Fence())
		}
	}
	g.completions.one = func(ctx context.Context, c completion) (error, error) {
		return store.Complete(ctx, c.f, c.response), nil
	}
	g.completions.many = func(ctx context.Context, cs []completion) ([]error, error) {
		return completeBatch(ctx, store, cs)
	}
	return g
}

// complete stores the outcome of the execution fenced by f, with those of
// other executions when some are on their way.
func (g *groupCommit) complete(ctx context.Context, f Fence, response []byte) error {
	own, err := g.completions.do(ctx, completion{f: f, response: response})
	if err != nil {
		return err
	}
	return own
}

// completeBatch stores the outcomes cs in one batch of store, and returns
// what became of each: nil when it is stored, ErrLeaseLost when its fence
// no longer held; an error for them all when the batch failed, and
// nothing of it was kept.
func completeBatch(ctx context.Context, store BatchStore, cs []completion) ([]error, error) {
	bt, err := store.BeginBatch(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = bt.Close(ctx) }()
	errs := make([]error, len(cs))
	index := make(map[Fence]int, len(cs))
	for i, c := range cs {
		tx, err := bt.Begin(ctx, c.f)
		if err == nil {
			err = tx.Complete(ctx, c.response)
		}
		if err != nil {
			errs[i] = err
			continue
		}
		index[c.f] = i
	}
	results, err := bt.Commit(ctx)
	if err != nil {
		return nil, err
	}
	for _, r := range results {
		if i, ok := index[r.Fence]; ok {
			errs[i] = r.Err
			delete(index, r.Fence)
		}
	}
	for _, i := range index {
		// Added, and not reported by the commit: not known to be stored.
		errs[i] = errBatchUnreported
	}
	return errs, nil
}
