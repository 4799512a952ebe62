package idempotency

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
)

func TestExpiryQueueOrders(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	var q expiryQueue
	var want []int64
	check := func() {
		t.Helper()
		for i, r := range q {
			if r.index != i {
				t.Fatalf("entry %d says it is at %d", i, r.index)
			}
		}
	}
	for range 2000 {
		at := rng.Int64N(100)
		q.push(&memRecord{at: at})
		want = append(want, at)
		switch rng.IntN(4) {
		case 0: // the earliest goes
			slices.Sort(want)
			if q[0].at != want[0] {
				t.Fatalf("head %d, want %d", q[0].at, want[0])
			}
			q.remove(q[0])
			want = want[1:]
		case 1: // any one goes, as a released record does
			r := q[rng.IntN(len(q))]
			i := slices.Index(want, r.at)
			want = slices.Delete(want, i, i+1)
			q.remove(r)
			if r.index != -1 {
				t.Fatalf("removed entry still says it is at %d", r.index)
			}
		}
		check()
	}
	slices.Sort(want)
	for _, w := range want {
		if q[0].at != w {
			t.Fatalf("popped %d, want %d", q[0].at, w)
		}
		q.remove(q[0])
		check()
	}
	if len(q) != 0 {
		t.Fatalf("%d entries left", len(q))
	}
}

// Released and replaced records leave the expiry queue at once: many
// rejections on one key (claim, release) hold no memory, though each record
// would otherwise wait in the queue for its whole TTL.
func TestReleasedRecordsLeaveExpiryQueue(t *testing.T) {
	t.Parallel()
	mock := clock.NewMock()
	s := NewMemoryStore(mock)
	ctx := context.Background()
	req := ClaimRequest{Caller: "c", Key: "k", Fingerprint: "fp", Lease: time.Minute, TTL: defaultTTL}
	for range 10000 {
		c, err := s.Claim(ctx, req)
		if err != nil || c.Outcome != ClaimCreated {
			t.Fatalf("claim: %v %v", c.Outcome, err)
		}
		if err := s.Release(ctx, c.Record.Fence()); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.queued(); n != 0 {
		t.Fatalf("%d released records still queued for expiry, want 0", n)
	}
	// A record replaced after it expired leaves the queue when replaced, not
	// when a sweep happens to reach it.
	short := req
	short.TTL = time.Second
	for range 1000 {
		c, err := s.Claim(ctx, short)
		if err != nil || c.Outcome != ClaimCreated {
			t.Fatalf("claim: %v %v", c.Outcome, err)
		}
		mock.Add(2 * time.Second)
		if _, err := s.Get(ctx, "c", "k"); err != ErrNotFound {
			t.Fatalf("Get after expiry: %v", err)
		}
	}
	if n, live := s.queued(), s.Len(); n != live || n > 1 {
		t.Fatalf("%d records queued for %d held, want at most 1", n, live)
	}
}

// queued returns the length of the expiry queue.
func (s *MemoryStore) queued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.expiry)
}
