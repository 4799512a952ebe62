package idempotency

import (
	"cmp"
	"context"
	"slices"
)

// ListParked implements Store. It looks only at the parked records, never
// at the whole store.
func (s *MemoryStore) ListParked(ctx context.Context, afterCaller, afterKey string, limit int) ([]Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = defaultParkedPage
	}
	now := s.clock.Now()
	after := memKey{afterCaller, afterKey}
	s.mu.Lock()
	defer s.mu.Unlock()
	var page []*memRecord
	for r := range s.parked {
		if r.rec.ExpiresAt.After(now) && compareMemKeys(keyOf(r), after) > 0 {
			page = append(page, r)
		}
	}
	slices.SortFunc(page, func(a, b *memRecord) int { return compareMemKeys(keyOf(a), keyOf(b)) })
	out := make([]Record, 0, min(len(page), limit))
	for _, r := range page[:min(len(page), limit)] {
		out = append(out, copyRecord(r.rec))
	}
	return out, nil
}

func keyOf(r *memRecord) memKey { return memKey{r.rec.Caller, r.rec.Key} }

// compareMemKeys orders keys by caller, then key.
func compareMemKeys(a, b memKey) int {
	if c := cmp.Compare(a.caller, b.caller); c != 0 {
		return c
	}
	return cmp.Compare(a.key, b.key)
}
