package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/exactlyonce/retry/idempotency"
)

var _ idempotency.BatchStore = (*Store)(nil)

// errBatchClosed is returned by the methods of a closed batch.
var errBatchClosed = errors.New("redisstore: the batch is closed")

// ClaimBatch claims every request as Claim does: the claim script once per
// request, all in one pipeline (one round trip per node), each atomic for
// its key; a key twice in the batch is claimed in the order given, so the
// second finds the first's claim. On an error some may have been claimed.
func (s *Store) ClaimBatch(ctx context.Context, reqs []idempotency.ClaimRequest) ([]idempotency.Claim, error) {
	calls := make([]*call, len(reqs))
	for i, req := range reqs {
		if req.Lease <= 0 || req.TTL <= 0 {
			return nil, idempotency.Permanent(fmt.Errorf("redisstore: claim: lease %v and ttl %v must be positive", req.Lease, req.TTL))
		}
		id, k := s.at(req.Caller, req.Key)
		hasResume := "0"
		if req.Resume != nil {
			hasResume = "1"
		}
		calls[i] = &call{script: claimLua, keys: []string{k.record(id), k.exp, k.stalled, k.parked, k.gen},
			args: []any{s.shiftArg(), req.Caller, req.Key, id, req.Fingerprint, micros(req.Lease), micros(req.TTL),
				hasResume, req.Resume, req.Point}}
	}
	if err := s.runAll(ctx, calls); err != nil {
		return nil, fmt.Errorf("redisstore: claim batch: %w", err)
	}
	claims := make([]idempotency.Claim, len(reqs))
	for i, c := range calls {
		res, err := c.cmd.Slice()
		if claims[i], err = parseClaim(res, err); err != nil {
			return nil, err
		}
	}
	return claims, nil
}

// BeginBatch opens a batch of completions: Commit runs the fenced
// completion script of each in one pipeline.
func (s *Store) BeginBatch(ctx context.Context) (idempotency.BatchTx, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return &redisBatch{s: s}, nil
}

// redisBatch is the Store's idempotency.BatchTx.
type redisBatch struct {
	s       *Store
	mu      sync.Mutex
	pending []completion
	closed  bool
}

// completion is an outcome waiting for the batch's Commit.
type completion struct {
	f        idempotency.Fence
	response []byte
}

// Begin starts the transaction of the execution fenced by f in the batch:
// the store has no local writes, so it only carries the outcome.
func (b *redisBatch) Begin(ctx context.Context, f idempotency.Fence) (idempotency.Tx, error) {
	return &batchMember{b: b, f: f}, nil
}

// Commit stores the pending outcomes, each conditional on its fence.
func (b *redisBatch) Commit(ctx context.Context) ([]idempotency.BatchResult, error) {
	b.mu.Lock()
	pending := b.pending
	b.pending = nil
	b.mu.Unlock()
	results := make([]idempotency.BatchResult, len(pending))
	if len(pending) == 0 {
		return results, nil
	}
	calls := make([]*call, len(pending))
	for i, c := range pending {
		id, k := b.s.at(c.f.Caller, c.f.Key)
		calls[i] = &call{script: completeLua, keys: []string{k.record(id), k.exp, k.stalled, k.parked},
			args: []any{b.s.shiftArg(), c.f.Caller, c.f.Key, id, strconv.FormatInt(c.f.Attempt, 10),
				strconv.FormatInt(c.f.Generation, 10), c.response}}
	}
	_ = b.s.runAll(ctx, calls)
	for i, c := range calls {
		results[i].Fence = pending[i].f
		n, err := c.cmd.Int()
		switch {
		case err != nil:
			results[i].Err = fmt.Errorf("redisstore: batch commit: %w", classify(err))
		case n == 0:
			results[i].Err = idempotency.ErrLeaseLost
		}
	}
	return results, nil
}

// Close ends the batch; outcomes not committed are not stored.
func (b *redisBatch) Close(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed, b.pending = true, nil
	return nil
}

// batchMember is one execution's place in a redisBatch.
type batchMember struct {
	b    *redisBatch
	f    idempotency.Fence
	done bool
}

// Context returns ctx: the store has no local writes.
func (m *batchMember) Context(ctx context.Context) context.Context { return ctx }

// Err returns nil: no statement runs through the member.
func (m *batchMember) Err() error { return nil }

// Complete adds the outcome to the batch.
func (m *batchMember) Complete(ctx context.Context, response []byte) error {
	if m.done {
		return errBatchClosed
	}
	m.done = true
	m.b.mu.Lock()
	defer m.b.mu.Unlock()
	if m.b.closed {
		return errBatchClosed
	}
	m.b.pending = append(m.b.pending, completion{f: m.f, response: append([]byte(nil), response...)})
	return nil
}

// Rollback gives up the member's place.
func (m *batchMember) Rollback(context.Context) error {
	m.done = true
	return nil
}
