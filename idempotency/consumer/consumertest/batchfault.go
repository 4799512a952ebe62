package consumertest

import (
	"context"
	"sync"

	"github.com/exactlyonce/retry/idempotency"
)

// newStore returns the shared store of a test: one that batches its
// durable work when batched.
func newStore(batched bool) idempotency.Store {
	if batched {
		return idempotency.NewMemoryBatchStore(nil)
	}
	return idempotency.NewMemoryStore(nil)
}

// stricken returns the stricken consumer's view of shared, batching when
// shared does.
func stricken(shared idempotency.Store, g *gate) idempotency.Store {
	s := &store{Store: shared, g: g}
	if bs, ok := shared.(idempotency.BatchStore); ok {
		return &batchStore{store: s, bs: bs}
	}
	return s
}

// batchStore is the stricken consumer's view of a shared BatchStore: the
// fault strikes the batch's claim (before or after it reaches the store)
// and its commit (a member's outcome failing to be stored, or the process
// dying once the batch is committed, before the acks).
type batchStore struct {
	*store
	bs idempotency.BatchStore
}

func (s *batchStore) ClaimBatch(ctx context.Context, reqs []idempotency.ClaimRequest) ([]idempotency.Claim, error) {
	if err := s.g.enter(); err != nil {
		return nil, err
	}
	for _, req := range reqs {
		if s.g.strikes(BeforeClaim, req.Key) {
			if err := s.g.strike(); err != nil {
				return nil, err
			}
		}
	}
	claims, err := s.bs.ClaimBatch(ctx, reqs)
	if err != nil {
		return nil, err
	}
	for _, req := range reqs {
		if s.g.strikes(AfterClaim, req.Key) {
			if err := s.g.strike(); err != nil {
				return nil, err
			}
		}
	}
	return claims, nil
}

func (s *batchStore) BeginBatch(ctx context.Context) (idempotency.BatchTx, error) {
	if err := s.g.enter(); err != nil {
		return nil, err
	}
	tx, err := s.bs.BeginBatch(ctx)
	if err != nil {
		return nil, err
	}
	return &batchTx{BatchTx: tx, g: s.g}, nil
}

// batchTx is a stricken batch.
type batchTx struct {
	idempotency.BatchTx
	g *gate

	mu      sync.Mutex
	members []idempotency.Fence // completed, not yet committed
}

func (b *batchTx) Begin(ctx context.Context, f idempotency.Fence) (idempotency.Tx, error) {
	if err := b.g.enter(); err != nil {
		return nil, err
	}
	tx, err := b.BatchTx.Begin(ctx, f)
	if err != nil {
		return nil, err
	}
	return &memberTx{Tx: tx, b: b, f: f}, nil
}

func (b *batchTx) Commit(ctx context.Context) ([]idempotency.BatchResult, error) {
	b.mu.Lock()
	members := b.members
	b.members = nil
	b.mu.Unlock()
	if err := b.g.enter(); err != nil {
		// A dead process commits nothing more.
		_ = b.BatchTx.Close(ctx)
		results := make([]idempotency.BatchResult, len(members))
		for i, f := range members {
			results[i] = idempotency.BatchResult{Fence: f, Err: err}
		}
		return results, err
	}
	results, err := b.BatchTx.Commit(ctx)
	if err != nil {
		return results, err
	}
	for _, r := range results {
		if r.Err == nil && b.g.strikes(AfterOutcome, r.Fence.Key) {
			if serr := b.g.strike(); serr != nil {
				for i := range results {
					results[i].Err = serr
				}
				return results, serr
			}
		}
	}
	return results, nil
}

// memberTx is a member of a stricken batch: its outcome fails to be
// stored when the fault says so.
type memberTx struct {
	idempotency.Tx
	b *batchTx
	f idempotency.Fence
}

func (m *memberTx) Complete(ctx context.Context, response []byte) error {
	if err := m.b.g.enter(); err != nil {
		_ = m.Tx.Rollback(ctx)
		return err
	}
	if m.f.Key == m.b.g.key && m.b.g.failComplete.CompareAndSwap(true, false) {
		_ = m.Tx.Rollback(ctx)
		return errStore
	}
	if err := m.Tx.Complete(ctx, response); err != nil {
		return err
	}
	m.b.mu.Lock()
	m.b.members = append(m.b.members, m.f)
	m.b.mu.Unlock()
	return nil
}
