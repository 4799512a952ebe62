package storetest

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/exactlyonce/retry/idempotency"
)

// Cases for values a store must take as they are: a store accepts every
// caller, key and recovery point that another store accepts, whatever its
// length or bytes, and never confuses two of them.

// longValue is longer than a database index entry may be (PostgreSQL's
// btree takes about 2.7 KB), and random, so that no compression makes it fit.
var longValue = randomString(3<<10, 1)

// randomString returns n pseudo-random bytes (any byte value), the same for
// the same seed.
func randomString(n int, seed uint64) string {
	rng := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return string(b)
}

func testLongCallerAndKey(t *testing.T, h Harness) {
	ctx := context.Background()
	huge := randomString(100<<10, 2)
	pairs := []struct{ caller, key string }{
		{longValue, "k"},
		{"alice", longValue},
		{longValue, longValue},
		{huge, huge},
		// Long values that differ only at their ends.
		{longValue + "a", "k"},
		{longValue + "b", "k"},
		{longValue, longValue + "a"},
		{longValue, longValue + "b"},
		// A split between caller and key is not a concatenation.
		{longValue, "ab"},
		{longValue + "a", "b"},
	}
	var recs []idempotency.Record
	for _, p := range pairs {
		r := claim(t, h.Store, claimReq(p.caller, p.key, "fp"), idempotency.ClaimCreated)
		if r.Caller != p.caller || r.Key != p.key {
			t.Fatalf("claim of a %d-byte caller and %d-byte key returned a %d-byte caller and %d-byte key",
				len(p.caller), len(p.key), len(r.Caller), len(r.Key))
		}
		recs = append(recs, r)
	}
	for i, r := range recs {
		noErr(t, "SaveRecoveryPoint", h.Store.SaveRecoveryPoint(ctx, fence(r), "p", []byte{byte(i)}, lease))
		noErr(t, "Complete", h.Store.Complete(ctx, fence(r), []byte{'r', byte(i)}))
	}
	for i, p := range pairs {
		g := claim(t, h.Store, claimReq(p.caller, p.key, "fp"), idempotency.ClaimCompleted)
		if string(g.Response) != string([]byte{'r', byte(i)}) || string(g.RecoveryData) != string([]byte{byte(i)}) {
			t.Fatalf("pair %d replays response %q data %q: records were confused", i, g.Response, g.RecoveryData)
		}
		if g := get(t, h.Store, p.caller, p.key); g.Caller != p.caller || g.Key != p.key {
			t.Fatalf("Get of pair %d returned another record", i)
		}
		claim(t, h.Store, claimReq(p.caller, p.key, "other"), idempotency.ClaimMismatch)
	}
	// Released and expired like any other.
	r := claim(t, h.Store, claimReq(huge, "released", "fp"), idempotency.ClaimCreated)
	noErr(t, "Release", h.Store.Release(ctx, fence(r)))
	wantNotFound(t, h.Store, huge, "released")
	h.Advance(ttl + slack)
	n, err := h.Store.DeleteExpired(ctx, 0)
	noErr(t, "DeleteExpired", err)
	if n != len(pairs) {
		t.Fatalf("DeleteExpired removed %d, want %d", n, len(pairs))
	}
	for _, p := range pairs {
		wantNotFound(t, h.Store, p.caller, p.key)
	}
}

func testOddRecoveryPoints(t *testing.T, h Harness) {
	ctx := context.Background()
	for i, point := range []string{"begin:a\x00b", "done:\xff\xfe", "begin:" + longValue, "done:é"} {
		key := string(rune('a' + i))
		r := claim(t, h.Store, claimReq("alice", key, "fp"), idempotency.ClaimCreated)
		noErr(t, "SaveRecoveryPoint", h.Store.SaveRecoveryPoint(ctx, fence(r), point, []byte("d"), lease))
		if g := get(t, h.Store, "alice", key); g.RecoveryPoint != point {
			t.Fatalf("saved point %q, read back %q", point, g.RecoveryPoint)
		}
		h.Advance(lease + slack)
		if n := claim(t, h.Store, claimReq("alice", key, "fp"), idempotency.ClaimTakenOver); n.RecoveryPoint != point {
			t.Fatalf("takeover found point %q, want %q", n.RecoveryPoint, point)
		}
	}
}
