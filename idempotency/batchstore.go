package idempotency

import "context"

// BatchStore is a Store that does the durable work of many executions at
// once: it claims the keys of many requests in one operation, and
// completes many executions, with their local writes, in one commit. A
// Runner uses it through Runner.StartBatch (a queue consumer, for the
// messages of one fetch); a Store without it keeps working one execution
// at a time.
//
// Every guarantee of a Store holds for each execution of a batch: a claim
// in a batch is the claim Store.Claim makes (one Claim per request, as if
// claimed alone), and a completion is fenced as Store.Complete is. Only
// when they become durable changes: at BatchTx.Commit.
type BatchStore interface {
	Store
	// ClaimBatch claims every request as Claim would, in one operation
	// where the store can (one round trip, one commit), and returns one
	// Claim per request, in their order. On an error the store may have
	// claimed some of them: their records hold a lease that nobody uses,
	// as after a Claim whose answer was lost.
	ClaimBatch(ctx context.Context, reqs []ClaimRequest) ([]Claim, error)
	// BeginBatch opens a batch of completions. End it with BatchTx.Close.
	BeginBatch(ctx context.Context) (BatchTx, error)
}

// BatchTx is an open batch of completions from BatchStore.BeginBatch. Its
// methods are safe for concurrent use; each Tx it begins is for the
// goroutine of its execution, like a Tx of a TxStore.
type BatchTx interface {
	// Begin starts the transaction of the execution fenced by f inside
	// the batch. Its local writes (Tx.Context, as for TxStore) are made in
	// a savepoint of their own, so that a failure rolls back only them.
	// Its Complete checks the fence and adds the outcome to the batch, and
	// returns nil when it will be committed with the batch (or an error
	// matching ErrLeaseLost or ErrTxFailed, with nothing of it kept); the
	// outcome and the local writes become durable together, at Commit (a
	// store may commit an execution that wrote locally on its own, at its
	// Complete, as mysqlstore does; Commit then reports it stored).
	Begin(ctx context.Context, f Fence) (Tx, error)
	// Commit makes durable, in one commit, the executions whose Complete
	// returned nil since the last Commit, and reports each: Err nil when
	// its outcome is stored, ErrLeaseLost when its fence no longer held
	// (nothing of it was kept), another error when the commit failed
	// (nothing of the batch was kept). The batch stays open for more.
	Commit(ctx context.Context) ([]BatchResult, error)
	// Close ends the batch, rolling back what was not committed. It is
	// safe to call more than once.
	Close(ctx context.Context) error
}

// BatchResult is what BatchTx.Commit did with one execution's completion.
type BatchResult struct {
	Fence Fence
	// Err is nil when the outcome is stored.
	Err error
}
