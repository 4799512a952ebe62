package idempotency

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/exactlyonce/retry"
)

// MemoryStore is a Store that keeps records in process memory, for a single
// instance, tests and examples. It is safe for concurrent use. The zero value
// is not usable; call NewMemoryStore.
//
// Generations come from one counter per store, so they are unique across all
// keys of the store and never reused while it lives.
//
// Time comes from the clock given to NewMemoryStore. A record is expired once
// its ExpiresAt is not after now, and a lease is stale once its LockedUntil is
// not after now.
//
// Expired records are invisible at once. Their memory is reclaimed by
// DeleteExpired (see StartSweeper) and also, a few at a time, by every Claim,
// so a MemoryStore that is never swept still holds only about as many records
// as were created within one TTL. A released record (a rejection) is removed
// at once, and so is an expired one that a claim replaces or a read finds.
type MemoryStore struct {
	clock clock.Clock

	mu      sync.Mutex
	records map[memKey]*memRecord
	expiry  expiryQueue
	// lastGen is the Generation of the last record created (store-wide).
	lastGen int64
	// started holds the in-progress records that began executing (saved a
	// recovery point) and are not parked: those TakeOverStalled looks at.
	started map[*memRecord]struct{}
	// parked holds the in-progress records a Reconciler parked: those
	// ListParked looks at.
	parked map[*memRecord]struct{}
}

var _ Store = (*MemoryStore)(nil)

type memKey struct{ caller, key string }

type memRecord struct {
	rec Record
	// at is rec.ExpiresAt in Unix nanoseconds, and index the record's place
	// in the expiry queue.
	at    int64
	index int
}

// claimCollect is how many expired records each Claim reclaims at most.
const claimCollect = 2

// errInvalidClaim is returned by MemoryStore.Claim for a request without a
// positive Lease and TTL: the same request always fails.
var errInvalidClaim = retry.Permanent(errors.New("idempotency: claim needs a positive Lease and TTL"))

// NewMemoryStore returns an empty MemoryStore reading time from clk
// (nil: the system clock).
func NewMemoryStore(clk clock.Clock) *MemoryStore {
	if clk == nil {
		clk = clock.New()
	}
	return &MemoryStore{clock: clk, records: make(map[memKey]*memRecord), started: make(map[*memRecord]struct{}),
		parked: make(map[*memRecord]struct{})}
}

// Claim implements Store.
func (s *MemoryStore) Claim(ctx context.Context, req ClaimRequest) (Claim, error) {
	if err := ctx.Err(); err != nil {
		return Claim{}, err
	}
	if req.Lease <= 0 || req.TTL <= 0 {
		return Claim{}, errInvalidClaim
	}
	now := s.clock.Now()
	k := memKey{req.Caller, req.Key}

	s.mu.Lock()
	defer s.mu.Unlock()
	s.collect(now, claimCollect)

	r := s.live(k, now)
	if r == nil {
		s.lastGen++
		r = &memRecord{rec: Record{
			Caller:        req.Caller,
			Key:           req.Key,
			Fingerprint:   req.Fingerprint,
			State:         StateInProgress,
			Attempt:       1,
			Generation:    s.lastGen,
			LockedUntil:   now.Add(req.Lease),
			RecoveryPoint: req.Point,
			Resume:        bytes.Clone(req.Resume),
			CreatedAt:     now,
			ExpiresAt:     now.Add(req.TTL),
		}}
		r.at = r.rec.ExpiresAt.UnixNano()
		s.add(k, r)
		s.track(r)
		return Claim{Outcome: ClaimCreated, Record: copyRecord(r.rec)}, nil
	}
	switch {
	case r.rec.Fingerprint != req.Fingerprint:
		return Claim{Outcome: ClaimMismatch, Record: copyRecord(r.rec)}, nil
	case r.rec.State == StateCompleted:
		return Claim{Outcome: ClaimCompleted, Record: copyRecord(r.rec)}, nil
	case r.rec.LockedUntil.After(now):
		if r.rec.RecoveryPoint == "" && req.Point != "" {
			// The holder keeps its lease; the record now owns the message.
			r.rec.RecoveryPoint = req.Point
			if len(r.rec.Resume) == 0 && req.Resume != nil {
				r.rec.Resume = bytes.Clone(req.Resume)
			}
			s.track(r)
		}
		return Claim{Outcome: ClaimInProgress, Record: copyRecord(r.rec)}, nil
	}
	s.takeOver(r, now, req.Lease)
	if req.Resume != nil {
		r.rec.Resume = bytes.Clone(req.Resume)
	}
	if r.rec.RecoveryPoint == "" && req.Point != "" {
		r.rec.RecoveryPoint = req.Point
		s.track(r)
	}
	return Claim{Outcome: ClaimTakenOver, Record: copyRecord(r.rec)}, nil
}

// takeOver gives r's execution to a new attempt holding a lease of lease.
// A parked record taken over is parked no more. s.mu is held.
func (s *MemoryStore) takeOver(r *memRecord, now time.Time, lease time.Duration) {
	r.rec.Attempt++
	r.rec.LockedUntil = now.Add(lease)
	if r.rec.Parked != "" {
		r.rec.Parked = ""
		s.track(r)
	}
}

// track keeps s.started and s.parked up to date with r. s.mu is held.
func (s *MemoryStore) track(r *memRecord) {
	live := r.rec.State == StateInProgress && r.index >= 0
	if live && r.rec.RecoveryPoint != "" && r.rec.Parked == "" {
		s.started[r] = struct{}{}
	} else {
		delete(s.started, r)
	}
	if live && r.rec.Parked != "" {
		s.parked[r] = struct{}{}
	} else {
		delete(s.parked, r)
	}
}

// TakeOverStalled implements Store. It looks only at the records that
// began executing, never at the whole store.
func (s *MemoryStore) TakeOverStalled(ctx context.Context, caller string, limit int, lease time.Duration) ([]Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if lease <= 0 {
		return nil, errInvalidClaim
	}
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	var stalled []*memRecord
	for r := range s.started {
		if r.rec.LockedUntil.After(now) || !r.rec.ExpiresAt.After(now) || (caller != "" && r.rec.Caller != caller) {
			continue
		}
		stalled = append(stalled, r)
	}
	// Leases that ran out at the same instant come in the order of their
	// keys, so that a run replays the same (a deterministic simulation).
	slices.SortFunc(stalled, func(a, b *memRecord) int {
		return cmp.Or(a.rec.LockedUntil.Compare(b.rec.LockedUntil),
			cmp.Compare(a.rec.Caller, b.rec.Caller), cmp.Compare(a.rec.Key, b.rec.Key))
	})
	if limit > 0 && len(stalled) > limit {
		stalled = stalled[:limit]
	}
	taken := make([]Record, len(stalled))
	for i, r := range stalled {
		s.takeOver(r, now, lease)
		taken[i] = copyRecord(r.rec)
	}
	return taken, nil
}

// Park implements Store.
func (s *MemoryStore) Park(ctx context.Context, f Fence, reason string) error {
	if reason == "" {
		reason = "parked"
	}
	return s.write(ctx, f, func(r *memRecord, now time.Time) {
		r.rec.Parked = reason
		r.rec.LockedUntil = now
		s.track(r)
	})
}

// SaveRecoveryPoint implements Store.
func (s *MemoryStore) SaveRecoveryPoint(ctx context.Context, f Fence, point string, data []byte, lease time.Duration) error {
	return s.write(ctx, f, func(r *memRecord, now time.Time) {
		if point != "" || r.rec.RecoveryPoint == "" {
			r.rec.RecoveryPoint = point
			r.rec.RecoveryData = bytes.Clone(data)
		}
		r.rec.LockedUntil = now.Add(lease)
		s.track(r)
	})
}

// Complete implements Store.
func (s *MemoryStore) Complete(ctx context.Context, f Fence, response []byte) error {
	return s.write(ctx, f, func(r *memRecord, _ time.Time) {
		r.rec.State = StateCompleted
		r.rec.Response = bytes.Clone(response)
		if r.rec.Response == nil {
			r.rec.Response = []byte{}
		}
		r.rec.Resume = nil // what ran is no longer needed
		s.track(r)
	})
}

// Release implements Store.
func (s *MemoryStore) Release(ctx context.Context, f Fence) error {
	return s.write(ctx, f, func(r *memRecord, _ time.Time) {
		s.remove(memKey{f.Caller, f.Key}, r)
	})
}

// ReleaseUnstarted implements Store.
func (s *MemoryStore) ReleaseUnstarted(ctx context.Context, f Fence) error {
	return s.write(ctx, f, func(r *memRecord, now time.Time) {
		if r.rec.RecoveryPoint == "" {
			s.remove(memKey{f.Caller, f.Key}, r)
			return
		}
		r.rec.LockedUntil = now
		s.track(r)
	})
}

// write applies change, under the lock, to the record f still owns, or
// returns ErrLeaseLost (or, when the fence holds but ctx ended, ctx's error)
// and changes nothing.
func (s *MemoryStore) write(ctx context.Context, f Fence, change func(r *memRecord, now time.Time)) error {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.fenced(f, now)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	change(r, now)
	return nil
}

// Get implements Store.
func (s *MemoryStore) Get(ctx context.Context, caller, key string) (Record, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, err
	}
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.live(memKey{caller, key}, now)
	if r == nil {
		return Record{}, ErrNotFound
	}
	return copyRecord(r.rec), nil
}

// DeleteExpired implements Store.
func (s *MemoryStore) DeleteExpired(ctx context.Context, limit int) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.collect(now, limit), nil
}

// Len reports how many records the store holds, expired ones not yet removed
// included.
func (s *MemoryStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.records)
}

// live returns the unexpired record for k, removing an expired one. s.mu is held.
func (s *MemoryStore) live(k memKey, now time.Time) *memRecord {
	r, ok := s.records[k]
	if !ok {
		return nil
	}
	if !r.rec.ExpiresAt.After(now) {
		s.remove(k, r)
		return nil
	}
	return r
}

// fenced returns the in-progress record f owns (same attempt of the same
// generation), or ErrLeaseLost. s.mu is held.
func (s *MemoryStore) fenced(f Fence, now time.Time) (*memRecord, error) {
	r := s.live(memKey{f.Caller, f.Key}, now)
	if r == nil || r.rec.Generation != f.Generation || r.rec.Attempt != f.Attempt || r.rec.State != StateInProgress {
		return nil, ErrLeaseLost
	}
	return r, nil
}

// collect removes up to limit (<= 0: all) expired records. s.mu is held.
func (s *MemoryStore) collect(now time.Time, limit int) int {
	removed := 0
	until := now.UnixNano()
	for len(s.expiry) > 0 && (limit <= 0 || removed < limit) {
		r := s.expiry[0]
		if r.at > until {
			break
		}
		s.remove(memKey{r.rec.Caller, r.rec.Key}, r)
		removed++
	}
	return removed
}

// add stores r under k, which holds no record. s.mu is held.
func (s *MemoryStore) add(k memKey, r *memRecord) {
	s.records[k] = r
	s.expiry.push(r)
}

// remove deletes r, the record under k, from the map and the expiry queue.
// s.mu is held.
func (s *MemoryStore) remove(k memKey, r *memRecord) {
	delete(s.records, k)
	delete(s.started, r)
	delete(s.parked, r)
	s.expiry.remove(r)
}

func copyRecord(r Record) Record {
	r.RecoveryData = bytes.Clone(r.RecoveryData)
	r.Response = bytes.Clone(r.Response)
	r.Resume = bytes.Clone(r.Resume)
	return r
}

// expiryQueue is a min-heap of the store's records by expiry. It holds
// exactly the records of the map: a record leaves it when it is removed for
// any reason (released, replaced, expired), so a released record holds no
// memory until its TTL would have run out.
type expiryQueue []*memRecord

func (q expiryQueue) less(i, j int) bool { return q[i].at < q[j].at }

func (q expiryQueue) swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index = i
	q[j].index = j
}

// push adds r.
func (q *expiryQueue) push(r *memRecord) {
	r.index = len(*q)
	*q = append(*q, r)
	q.up(r.index)
}

// remove takes r, which must be queued, out of the queue.
func (q *expiryQueue) remove(r *memRecord) {
	h := *q
	i, last := r.index, len(h)-1
	if i != last {
		h.swap(i, last)
	}
	h[last] = nil
	h = h[:last]
	*q = h
	if i != last {
		if !h.down(i) {
			h.up(i)
		}
	}
	r.index = -1
}

func (q expiryQueue) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !q.less(i, parent) {
			return
		}
		q.swap(i, parent)
		i = parent
	}
}

// down moves the entry at i down to its place and reports whether it moved.
func (q expiryQueue) down(i int) bool {
	start := i
	for {
		least, l, r := i, 2*i+1, 2*i+2
		if l < len(q) && q.less(l, least) {
			least = l
		}
		if r < len(q) && q.less(r, least) {
			least = r
		}
		if least == i {
			return i > start
		}
		q.swap(i, least)
		i = least
	}
}
