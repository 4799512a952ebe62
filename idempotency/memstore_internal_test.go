package idempotency

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestExpiryQueueOrders(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	var q expiryQueue
	var want []int64
	for range 500 {
		at := rng.Int64N(100)
		q.push(expiryEntry{at: at})
		want = append(want, at)
		if rng.IntN(3) == 0 {
			slices.Sort(want)
			if q[0].at != want[0] {
				t.Fatalf("head %d, want %d", q[0].at, want[0])
			}
			q.pop()
			want = want[1:]
		}
	}
	slices.Sort(want)
	for _, w := range want {
		if q[0].at != w {
			t.Fatalf("popped %d, want %d", q[0].at, w)
		}
		q.pop()
	}
	if len(q) != 0 {
		t.Fatalf("%d entries left", len(q))
	}
}
