package idempotency

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

var _ Lister = (*MemoryStore)(nil)

// List implements Lister. The memory store pages by caller, then key; its
// cursor is the last (caller, key) of the page.
func (s *MemoryStore) List(ctx context.Context, q ListQuery) (ListPage, error) {
	if err := q.Validate(); err != nil {
		return ListPage{}, err
	}
	if err := ctx.Err(); err != nil {
		return ListPage{}, err
	}
	after, err := decodeMemCursor(q.Cursor)
	if err != nil {
		return ListPage{}, err
	}
	limit := q.PageSize()
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	var found []*memRecord
	for k, r := range s.records {
		if (q.Cursor == "" || compareMemKeys(k, after) > 0) && r.rec.ExpiresAt.After(now) && q.Matches(r.rec, now) {
			found = append(found, r)
		}
	}
	slices.SortFunc(found, func(a, b *memRecord) int { return compareMemKeys(keyOf(a), keyOf(b)) })
	page := ListPage{Now: now}
	for _, r := range found[:min(len(found), limit)] {
		page.Records = append(page.Records, copyRecord(r.rec))
	}
	if len(found) > limit {
		last := page.Records[len(page.Records)-1]
		page.Next = encodeMemCursor(memKey{last.Caller, last.Key})
	}
	return page, nil
}

func encodeMemCursor(k memKey) string {
	b, _ := json.Marshal([2][]byte{[]byte(k.caller), []byte(k.key)})
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeMemCursor(c string) (memKey, error) {
	if c == "" {
		return memKey{}, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	var k [2][]byte
	if err == nil {
		err = json.Unmarshal(b, &k)
	}
	if err != nil {
		return memKey{}, fmt.Errorf("%w: malformed cursor", ErrInvalidList)
	}
	return memKey{string(k[0]), string(k[1])}, nil
}

// Now implements Lister: the store's clock.
func (s *MemoryStore) Now(ctx context.Context) (time.Time, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, err
	}
	return s.clock.Now(), nil
}
