package idempotency

import (
	"bytes"
	"context"
	"errors"
	"sync"

	"github.com/benbjohnson/clock"
)

var _ BatchStore = (*MemoryBatchStore)(nil)

// MemoryBatchStore is a MemoryStore that is also a BatchStore, for tests
// and examples of batched work (a consumer's). It is a type of its own so
// that a Store which embeds a MemoryStore (a TxStore made of one, say) does
// not claim batches whose members cannot carry its local writes.
type MemoryBatchStore struct {
	*MemoryStore
}

// NewMemoryBatchStore returns an empty MemoryBatchStore reading time from
// clk (nil: the system clock).
func NewMemoryBatchStore(clk clock.Clock) *MemoryBatchStore {
	return &MemoryBatchStore{MemoryStore: NewMemoryStore(clk)}
}

// errBatchClosed is returned by the methods of a closed batch.
var errBatchClosed = errors.New("idempotency: the batch is closed")

// ClaimBatch implements BatchStore: each request is claimed as Claim
// claims it.
func (s *MemoryBatchStore) ClaimBatch(ctx context.Context, reqs []ClaimRequest) ([]Claim, error) {
	claims := make([]Claim, len(reqs))
	for i, req := range reqs {
		c, err := s.Claim(ctx, req)
		if err != nil {
			return nil, err
		}
		claims[i] = c
	}
	return claims, nil
}

// BeginBatch implements BatchStore. The memory store has no local writes
// to carry: a batch holds the outcomes until Commit stores them.
func (s *MemoryBatchStore) BeginBatch(ctx context.Context) (BatchTx, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return &memBatch{s: s.MemoryStore}, nil
}

// memBatch is a MemoryStore's BatchTx.
type memBatch struct {
	s       *MemoryStore
	mu      sync.Mutex
	pending []memCompletion
	closed  bool
}

// memCompletion is an outcome waiting for the batch's Commit.
type memCompletion struct {
	f        Fence
	response []byte
}

func (b *memBatch) Begin(ctx context.Context, f Fence) (Tx, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, errBatchClosed
	}
	return &memBatchTx{b: b, f: f}, nil
}

func (b *memBatch) Commit(ctx context.Context) ([]BatchResult, error) {
	b.mu.Lock()
	pending := b.pending
	b.pending = nil
	closed := b.closed
	b.mu.Unlock()
	results := make([]BatchResult, len(pending))
	for i, p := range pending {
		err := errBatchClosed
		if !closed {
			err = b.s.Complete(ctx, p.f, p.response)
		}
		results[i] = BatchResult{Fence: p.f, Err: err}
	}
	return results, nil
}

func (b *memBatch) Close(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed, b.pending = true, nil
	return nil
}

// memBatchTx is the transaction of one execution in a memBatch.
type memBatchTx struct {
	b    *memBatch
	f    Fence
	done bool
}

func (t *memBatchTx) Context(ctx context.Context) context.Context { return ctx }

func (t *memBatchTx) Err() error { return nil }

// Complete checks the fence and adds the outcome to the batch.
func (t *memBatchTx) Complete(ctx context.Context, response []byte) error {
	if t.done {
		return errBatchClosed
	}
	t.done = true
	s := t.b.s
	s.mu.Lock()
	_, err := s.fenced(t.f, s.clock.Now())
	s.mu.Unlock()
	if err != nil {
		return err
	}
	t.b.mu.Lock()
	defer t.b.mu.Unlock()
	if t.b.closed {
		return errBatchClosed
	}
	t.b.pending = append(t.b.pending, memCompletion{f: t.f, response: bytes.Clone(response)})
	return nil
}

func (t *memBatchTx) Rollback(context.Context) error {
	t.done = true
	return nil
}
