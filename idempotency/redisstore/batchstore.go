package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/idempotency"
)

var _ idempotency.BatchStore = (*Store)(nil)

// errBatchClosed is returned by the methods of a closed batch.
var errBatchClosed = errors.New("redisstore: the batch is closed")

// ClaimBatch claims every request as Claim does, in one script call (one
// per shard on a cluster or ring, pipelined) that runs the claim of each
// request in turn, each atomic for its key; a key twice in the batch is
// claimed in the order given, so the second finds the first's claim. On an
// error some may have been claimed.
func (s *Store) ClaimBatch(ctx context.Context, reqs []idempotency.ClaimRequest) ([]idempotency.Claim, error) {
	items := make([]batchItem, len(reqs))
	for i, req := range reqs {
		if req.Lease <= 0 || req.TTL <= 0 {
			return nil, retry.Permanent(fmt.Errorf("redisstore: claim: lease %v and ttl %v must be positive", req.Lease, req.TTL))
		}
		id, shard := recordID(req.Caller, req.Key, len(s.shards))
		k := s.shards[shard]
		hasResume := "0"
		if req.Resume != nil {
			hasResume = "1"
		}
		items[i] = batchItem{shard: shard, keys: []string{k.record(id), k.exp, k.stalled, k.parked, k.gen},
			args: []any{req.Caller, req.Key, id, req.Fingerprint, micros(req.Lease), micros(req.TTL),
				hasResume, req.Resume, req.Point}}
	}
	if len(items) == 0 {
		return []idempotency.Claim{}, nil
	}
	replies, errs := s.runBatch(ctx, claimBatchLua, items)
	claims := make([]idempotency.Claim, len(reqs))
	for i, reply := range replies {
		if errs[i] != nil {
			return nil, fmt.Errorf("redisstore: claim batch: %w", errs[i])
		}
		res, ok := reply.([]any)
		if !ok {
			return nil, fmt.Errorf("redisstore: claim batch: a reply of %T", reply)
		}
		var err error
		if claims[i], err = parseClaim(reqs[i], res, nil); err != nil {
			return nil, err
		}
	}
	return claims, nil
}

// BeginBatch opens a batch of completions: Commit runs the fenced
// completion of each in one script call (one per shard on a cluster or
// ring, pipelined).
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
	items := make([]batchItem, len(pending))
	for i, c := range pending {
		id, shard := recordID(c.f.Caller, c.f.Key, len(b.s.shards))
		k := b.s.shards[shard]
		items[i] = batchItem{shard: shard, keys: []string{k.record(id), k.exp, k.stalled, k.parked},
			args: []any{c.f.Caller, c.f.Key, id, strconv.FormatInt(c.f.Attempt, 10),
				strconv.FormatInt(c.f.Generation, 10), c.response}}
	}
	replies, errs := b.s.runBatch(ctx, completeBatchLua, items)
	for i, reply := range replies {
		results[i].Fence = pending[i].f
		n, ok := reply.(int64)
		switch {
		case errs[i] != nil:
			results[i].Err = fmt.Errorf("redisstore: batch commit: %w", errs[i])
		case !ok:
			results[i].Err = fmt.Errorf("redisstore: batch commit: a reply of %T", reply)
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
