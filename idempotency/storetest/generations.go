package storetest

import (
	"context"
	"testing"

	"github.com/exactlyonce/retry/idempotency"
)

// Cases for record generations: a record created after an earlier record of
// the same key was released or expired starts at Attempt 1 again, so only the
// Generation keeps a paused holder of the earlier record from writing to it.

// wantDeadFence checks that every fenced write with f fails with ErrLeaseLost
// and leaves the current record of f's key unchanged.
func wantDeadFence(t *testing.T, s idempotency.Store, what string, f idempotency.Fence) {
	t.Helper()
	ctx := context.Background()
	current := get(t, s, f.Caller, f.Key)
	wantErr(t, "SaveRecoveryPoint with "+what,
		s.SaveRecoveryPoint(ctx, f, "stale", []byte("stale"), lease), idempotency.ErrLeaseLost)
	wantUnchanged(t, s, current)
	wantErr(t, "Complete with "+what, s.Complete(ctx, f, []byte("stale")), idempotency.ErrLeaseLost)
	wantUnchanged(t, s, current)
	wantErr(t, "Release with "+what, s.Release(ctx, f), idempotency.ErrLeaseLost)
	wantUnchanged(t, s, current)
}

func testGenerationsDiffer(t *testing.T, h Harness) {
	ctx := context.Background()
	seen := map[int64]string{}
	see := func(r idempotency.Record, what string) {
		t.Helper()
		if r.Generation == 0 {
			t.Fatalf("%s: Generation 0", what)
		}
		if prev, ok := seen[r.Generation]; ok {
			t.Fatalf("%s: Generation %d already given to %s", what, r.Generation, prev)
		}
		seen[r.Generation] = what
	}

	first := claim(t, h.Store, claimReq("alice", "k1", "fp1"), idempotency.ClaimCreated)
	see(first, "the first record")
	if g := get(t, h.Store, "alice", "k1"); g.Generation != first.Generation {
		t.Fatalf("Get reports Generation %d, the claim %d", g.Generation, first.Generation)
	}
	// Reports of a live record carry its generation and change nothing.
	if r := claim(t, h.Store, claimReq("alice", "k1", "fp1"), idempotency.ClaimInProgress); r.Generation != first.Generation {
		t.Fatalf("in-progress claim reported Generation %d, want %d", r.Generation, first.Generation)
	}
	// A takeover keeps the generation and counts the attempt.
	h.Advance(lease + slack)
	took := claim(t, h.Store, claimReq("alice", "k1", "fp1"), idempotency.ClaimTakenOver)
	if took.Generation != first.Generation || took.Attempt != 2 {
		t.Fatalf("takeover: Generation %d Attempt %d, want %d and 2", took.Generation, took.Attempt, first.Generation)
	}
	// Released, then claimed again: a new record, a new generation.
	noErr(t, "Release", h.Store.Release(ctx, fence(took)))
	second := claim(t, h.Store, claimReq("alice", "k1", "fp2"), idempotency.ClaimCreated)
	if second.Attempt != 1 {
		t.Fatalf("record after Release: Attempt %d, want 1", second.Attempt)
	}
	see(second, "the record after a Release")
	// Completed, expired, then claimed again: a new generation once more.
	noErr(t, "Complete", h.Store.Complete(ctx, fence(second), []byte("done")))
	if r := claim(t, h.Store, claimReq("alice", "k1", "fp2"), idempotency.ClaimCompleted); r.Generation != second.Generation {
		t.Fatalf("completed claim reported Generation %d, want %d", r.Generation, second.Generation)
	}
	h.Advance(ttl + slack)
	third := claim(t, h.Store, claimReq("alice", "k1", "fp2"), idempotency.ClaimCreated)
	see(third, "the record after expiry")
	// Removing expired records does not make a generation reusable.
	h.Advance(ttl + slack)
	_, err := h.Store.DeleteExpired(ctx, 0)
	noErr(t, "DeleteExpired", err)
	see(claim(t, h.Store, claimReq("alice", "k1", "fp1"), idempotency.ClaimCreated), "the record after DeleteExpired")
}

func testReleasedRecordFenceIsDead(t *testing.T, h Harness) {
	ctx := context.Background()
	// A claims and pauses; its lease runs out and B takes over, then fails
	// before any step and releases the key.
	a := claim(t, h.Store, claimReq("alice", "k1", "fp1"), idempotency.ClaimCreated)
	h.Advance(lease + slack)
	b := claim(t, h.Store, claimReq("alice", "k1", "fp1"), idempotency.ClaimTakenOver)
	noErr(t, "Release by B", h.Store.Release(ctx, fence(b)))
	// C claims the free key afresh, with another request: Attempt 1, like A.
	c := claim(t, h.Store, claimReq("alice", "k1", "fp2"), idempotency.ClaimCreated)
	if c.Attempt != a.Attempt {
		t.Fatalf("new record Attempt %d, want %d", c.Attempt, a.Attempt)
	}
	// A wakes up: none of its writes may land on C's record.
	wantDeadFence(t, h.Store, "the fence of a released record", fence(a))
	wantDeadFence(t, h.Store, "the fence of a released takeover", fence(b))

	// Plain claim, Release, claim again, with no takeover in between.
	d := claim(t, h.Store, claimReq("alice", "k2", "fp1"), idempotency.ClaimCreated)
	noErr(t, "Release", h.Store.Release(ctx, fence(d)))
	claim(t, h.Store, claimReq("alice", "k2", "fp1"), idempotency.ClaimCreated)
	wantDeadFence(t, h.Store, "the fence of a released record", fence(d))

	// C's fence still holds, and its outcome is the one replayed.
	noErr(t, "Complete by C", h.Store.Complete(ctx, fence(c), []byte("C")))
	wantErr(t, "Complete with A's fence after C completed", h.Store.Complete(ctx, fence(a), []byte("A")), idempotency.ErrLeaseLost)
	if r := claim(t, h.Store, claimReq("alice", "k1", "fp2"), idempotency.ClaimCompleted); string(r.Response) != "C" {
		t.Fatalf("replayed %q, want C's outcome", r.Response)
	}
}

func testExpiredRecordFenceIsDead(t *testing.T, h Harness) {
	ctx := context.Background()
	// A claims and pauses; B takes over the stale lease and pauses too.
	a := claim(t, h.Store, claimReq("alice", "k1", "fp1"), idempotency.ClaimCreated)
	h.Advance(lease + slack)
	b := claim(t, h.Store, claimReq("alice", "k1", "fp1"), idempotency.ClaimTakenOver)
	// The record expires; C claims the key afresh (Attempt 1, like A).
	h.Advance(ttl + slack)
	c := claim(t, h.Store, claimReq("alice", "k1", "fp1"), idempotency.ClaimCreated)
	if c.Attempt != a.Attempt {
		t.Fatalf("new record Attempt %d, want %d", c.Attempt, a.Attempt)
	}
	wantDeadFence(t, h.Store, "the fence of an expired record", fence(a))
	wantDeadFence(t, h.Store, "the fence of an expired takeover", fence(b))
	// C stalls and D takes over (Attempt 2, like B).
	noErr(t, "SaveRecoveryPoint by C", h.Store.SaveRecoveryPoint(ctx, fence(c), "p1", []byte("d1"), lease))
	h.Advance(lease + slack)
	d := claim(t, h.Store, claimReq("alice", "k1", "fp1"), idempotency.ClaimTakenOver)
	if d.Attempt != b.Attempt {
		t.Fatalf("takeover Attempt %d, want %d", d.Attempt, b.Attempt)
	}
	wantDeadFence(t, h.Store, "the fence of an expired takeover", fence(b))
	wantDeadFence(t, h.Store, "the fence of an expired record", fence(a))
	wantDeadFence(t, h.Store, "the fence of a taken-over attempt", fence(c))

	// Expired but not yet swept, and then swept: the same.
	noErr(t, "Complete by D", h.Store.Complete(ctx, fence(d), []byte("D")))
	if r := claim(t, h.Store, claimReq("alice", "k1", "fp1"), idempotency.ClaimCompleted); string(r.Response) != "D" {
		t.Fatalf("replayed %q, want D's outcome", r.Response)
	}
	h.Advance(ttl + slack)
	_, err := h.Store.DeleteExpired(ctx, 0)
	noErr(t, "DeleteExpired", err)
	e := claim(t, h.Store, claimReq("alice", "k1", "fp1"), idempotency.ClaimCreated)
	for _, old := range []idempotency.Record{a, b, c, d} {
		wantDeadFence(t, h.Store, "the fence of a swept record", fence(old))
	}
	noErr(t, "Complete by E", h.Store.Complete(ctx, fence(e), []byte("E")))
}

func testTxEarlierGenerationRollsBack(t *testing.T, h Harness) {
	ts := txStore(t, h)
	ctx := context.Background()
	old := claim(t, ts, claimReq("alice", "k1", "fp1"), idempotency.ClaimCreated)
	tx, err := begin(t, ts, fence(old))
	noErr(t, "Begin", err)
	txWrite(t, h, tx.Context(ctx), "stale")
	// Its lease runs out, a takeover releases the key, a new record takes it.
	h.Advance(lease + slack)
	took := claim(t, ts, claimReq("alice", "k1", "fp1"), idempotency.ClaimTakenOver)
	noErr(t, "Release", ts.Release(ctx, fence(took)))
	claim(t, ts, claimReq("alice", "k1", "fp2"), idempotency.ClaimCreated)
	current := get(t, ts, "alice", "k1")
	wantErr(t, "Tx.Complete with the fence of a released record", tx.Complete(ctx, []byte("late")), idempotency.ErrLeaseLost)
	noErr(t, "Rollback after a failed Complete", tx.Rollback(ctx))
	wantUnchanged(t, ts, current)
	wantWritten(t, h, "stale", false)

	// The same after expiry.
	h.Advance(ttl + slack)
	fresh := claim(t, ts, claimReq("alice", "k1", "fp1"), idempotency.ClaimCreated)
	for _, f := range []idempotency.Fence{fence(old), fence(current)} {
		tx, err := begin(t, ts, f)
		if err != nil {
			wantErr(t, "Begin with the fence of an expired record", err, idempotency.ErrLeaseLost)
			continue
		}
		txWrite(t, h, tx.Context(ctx), "expired")
		wantErr(t, "Tx.Complete with the fence of an expired record", tx.Complete(ctx, []byte("late")), idempotency.ErrLeaseLost)
		noErr(t, "Rollback after a failed Complete", tx.Rollback(ctx))
		wantWritten(t, h, "expired", false)
	}
	wantUnchanged(t, ts, fresh)
}
