package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/exactlyonce/retry/idempotency"
)

// takeOverStalled calls TakeOverStalled for every caller and returns the
// records by key.
func takeOverStalled(t *testing.T, s idempotency.Store, limit int) map[string]idempotency.Record {
	t.Helper()
	return takeOverStalledOf(t, s, "", limit)
}

// takeOverStalledOf calls TakeOverStalled for caller and returns the
// records by key, checking that each is caller's.
func takeOverStalledOf(t *testing.T, s idempotency.Store, caller string, limit int) map[string]idempotency.Record {
	t.Helper()
	recs, err := s.TakeOverStalled(context.Background(), caller, limit, lease)
	noErr(t, "TakeOverStalled", err)
	byKey := make(map[string]idempotency.Record, len(recs))
	for _, r := range recs {
		if _, dup := byKey[r.Key]; dup {
			t.Fatalf("TakeOverStalled returned %s twice", short(r.Key))
		}
		if caller != "" && r.Caller != caller {
			t.Fatalf("TakeOverStalled(%s) took %s of caller %s", short(caller), short(r.Key), short(r.Caller))
		}
		byKey[r.Key] = r
	}
	return byKey
}

// Only executions that began (saved a recovery point), whose lease ran
// out, that are live, in progress and not parked are stalled; each comes
// back taken over, with its Resume and recovery point.
func testTakeOverStalled(t *testing.T, h Harness) {
	ctx := context.Background()
	withResume := func(key string) idempotency.ClaimRequest {
		req := claimReq("alice", key, "fp")
		req.Resume = []byte("resume " + key)
		return req
	}
	started := claim(t, h.Store, withResume("started"), idempotency.ClaimCreated)
	noErr(t, "SaveRecoveryPoint", h.Store.SaveRecoveryPoint(ctx, fence(started), "begin:charge", []byte("data"), lease))
	claim(t, h.Store, withResume("never-started"), idempotency.ClaimCreated)
	done := claim(t, h.Store, withResume("completed"), idempotency.ClaimCreated)
	noErr(t, "SaveRecoveryPoint", h.Store.SaveRecoveryPoint(ctx, fence(done), "begin:charge", nil, lease))
	noErr(t, "Complete", h.Store.Complete(ctx, fence(done), []byte("ok")))
	parked := claim(t, h.Store, withResume("parked"), idempotency.ClaimCreated)
	noErr(t, "SaveRecoveryPoint", h.Store.SaveRecoveryPoint(ctx, fence(parked), "begin:charge", nil, lease))
	noErr(t, "Park", h.Store.Park(ctx, fence(parked), "no work"))

	if got := takeOverStalled(t, h.Store, 0); len(got) != 0 {
		t.Fatalf("TakeOverStalled before any lease ran out took %d executions", len(got))
	}
	h.Advance(lease + slack)
	got := takeOverStalled(t, h.Store, 0)
	r, ok := got["started"]
	if len(got) != 1 || !ok {
		t.Fatalf("TakeOverStalled took %v, want only the started execution", keys(got))
	}
	if r.Attempt != 2 || r.Generation != started.Generation || r.State != idempotency.StateInProgress ||
		r.RecoveryPoint != "begin:charge" || string(r.RecoveryData) != "data" || string(r.Resume) != "resume started" ||
		r.Caller != "alice" || r.Fingerprint != "fp" || r.Parked != "" || !r.LockedUntil.After(started.LockedUntil) {
		t.Fatalf("stalled execution taken over as %+v", r)
	}
	// It is taken over: the old fence is out, the new lease holds against
	// claims and against the next TakeOverStalled.
	wantErr(t, "Complete with the stalled fence", h.Store.Complete(ctx, fence(started), nil), idempotency.ErrLeaseLost)
	claim(t, h.Store, claimReq("alice", "started", "fp"), idempotency.ClaimInProgress)
	if again := takeOverStalled(t, h.Store, 0); len(again) != 0 {
		t.Fatalf("TakeOverStalled took %v within the lease of its own takeover", keys(again))
	}
	noErr(t, "Complete with the takeover's fence", h.Store.Complete(ctx, fence(r), []byte("done")))
	if c := get(t, h.Store, "alice", "started"); c.State != idempotency.StateCompleted || string(c.Response) != "done" {
		t.Fatalf("after completion: %+v", c)
	}
	// A completed record keeps its outcome, not the work that made it.
	if c := get(t, h.Store, "alice", "started"); len(c.Resume) != 0 {
		t.Fatalf("a completed record keeps Resume %q", c.Resume)
	}
	// An expired execution is never stalled: it is gone.
	h.Advance(ttl)
	if got := takeOverStalled(t, h.Store, 0); len(got) != 0 {
		t.Fatalf("TakeOverStalled took expired executions %v", keys(got))
	}
}

// TakeOverStalled honours its limit, oldest lease first, and the rest come
// with the next call.
func testTakeOverStalledLimit(t *testing.T, h Harness) {
	ctx := context.Background()
	for i := range 5 {
		r := claim(t, h.Store, claimReq("alice", fmt.Sprint("k", i), "fp"), idempotency.ClaimCreated)
		noErr(t, "SaveRecoveryPoint", h.Store.SaveRecoveryPoint(ctx, fence(r), "started", nil, lease))
		h.Advance(slack)
	}
	h.Advance(lease + slack)
	first := takeOverStalled(t, h.Store, 2)
	if _, ok0 := first["k0"]; !ok0 || len(first) != 2 {
		t.Fatalf("TakeOverStalled(2) took %v, want k0 and k1", keys(first))
	}
	if _, ok1 := first["k1"]; !ok1 {
		t.Fatalf("TakeOverStalled(2) took %v, want k0 and k1", keys(first))
	}
	rest := takeOverStalled(t, h.Store, 10)
	if len(rest) != 3 {
		t.Fatalf("the next TakeOverStalled took %v, want the 3 left", keys(rest))
	}
}

// TakeOverStalled for one caller takes over only that caller's stalled
// executions, oldest lease first, and counts only them against its limit;
// another caller's, even older, keeps its Attempt and lease and stays
// stalled, for a call with its caller or with "" (every caller).
func testTakeOverStalledCaller(t *testing.T, h Harness) {
	ctx := context.Background()
	started := func(caller, key string) idempotency.Record {
		r := claim(t, h.Store, claimReq(caller, key, "fp"), idempotency.ClaimCreated)
		noErr(t, "SaveRecoveryPoint", h.Store.SaveRecoveryPoint(ctx, fence(r), "started", nil, lease))
		h.Advance(slack)
		return get(t, h.Store, caller, key)
	}
	bob := started("bob", "b0") // the oldest lease
	started("alice", "a0")
	started("alice", "a1")
	h.Advance(lease + slack)

	unchanged := func(when string) {
		t.Helper()
		if r := get(t, h.Store, "bob", "b0"); r.Attempt != bob.Attempt || !r.LockedUntil.Equal(bob.LockedUntil) || r.Parked != "" {
			t.Fatalf("%s, bob's record is at Attempt %d, locked until %v (was %d, %v), parked %q",
				when, r.Attempt, r.LockedUntil, bob.Attempt, bob.LockedUntil, r.Parked)
		}
	}
	first := takeOverStalledOf(t, h.Store, "alice", 1)
	if r, ok := first["a0"]; len(first) != 1 || !ok || r.Attempt != 2 {
		t.Fatalf("TakeOverStalled(alice, 1) took %v, want a0 at Attempt 2", keys(first))
	}
	unchanged("after TakeOverStalled(alice, 1)")
	rest := takeOverStalledOf(t, h.Store, "alice", 0)
	if _, ok := rest["a1"]; len(rest) != 1 || !ok {
		t.Fatalf("the next TakeOverStalled(alice) took %v, want a1", keys(rest))
	}
	if got := takeOverStalledOf(t, h.Store, "alice", 0); len(got) != 0 {
		t.Fatalf("TakeOverStalled(alice) took %v within the leases of its takeovers", keys(got))
	}
	if got := takeOverStalledOf(t, h.Store, "carol", 0); len(got) != 0 {
		t.Fatalf("TakeOverStalled(carol) took %v", keys(got))
	}
	unchanged("after every TakeOverStalled(alice)")

	// Bob's is still stalled: "" takes it, with everyone's stalled since.
	h.Advance(lease + slack)
	all := takeOverStalled(t, h.Store, 0)
	if len(all) != 3 || all["b0"].Attempt != 2 || all["a0"].Attempt != 3 || all["a1"].Attempt != 3 {
		t.Fatalf("TakeOverStalled(\"\") took %v, want b0 at Attempt 2, a0 and a1 at 3", keys(all))
	}
}

// Of many reconcilers taking over the same stalled executions at once, each
// execution goes to exactly one.
func testTakeOverStalledRace(t *testing.T, h Harness) {
	ctx := context.Background()
	const n = 20
	for i := range n {
		r := claim(t, h.Store, claimReq("alice", fmt.Sprint("k", i), "fp"), idempotency.ClaimCreated)
		noErr(t, "SaveRecoveryPoint", h.Store.SaveRecoveryPoint(ctx, fence(r), "started", nil, lease))
	}
	h.Advance(lease + slack)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		taken = map[string]int{}
		errs  []error
	)
	for range 8 {
		wg.Go(func() {
			for {
				recs, err := h.Store.TakeOverStalled(ctx, "", 3, lease)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				}
				for _, r := range recs {
					taken[r.Key]++
				}
				mu.Unlock()
				if err != nil || len(recs) == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("TakeOverStalled: %v", err)
	}
	if len(taken) != n {
		t.Fatalf("%d of %d stalled executions taken over", len(taken), n)
	}
	for k, c := range taken {
		if c != 1 {
			t.Fatalf("%s taken over %d times in one lease", k, c)
		}
		if r := get(t, h.Store, "alice", k); r.Attempt != 2 {
			t.Fatalf("%s at Attempt %d after one takeover", k, r.Attempt)
		}
	}
}

// Park is fenced; a parked execution keeps its reason and is never taken
// over by TakeOverStalled, but a claim takes it over at once and clears it.
func testPark(t *testing.T, h Harness) {
	ctx := context.Background()
	r := claim(t, h.Store, claimReq("alice", "k1", "fp"), idempotency.ClaimCreated)
	noErr(t, "SaveRecoveryPoint", h.Store.SaveRecoveryPoint(ctx, fence(r), "begin:charge", nil, lease))
	h.Advance(lease + slack)
	taken := takeOverStalled(t, h.Store, 0)["k1"]
	wantErr(t, "Park with the stalled fence", h.Store.Park(ctx, fence(r), "too late"), idempotency.ErrLeaseLost)
	noErr(t, "Park", h.Store.Park(ctx, fence(taken), "no work registered"))
	p := get(t, h.Store, "alice", "k1")
	if p.Parked != "no work registered" || p.State != idempotency.StateInProgress || p.Attempt != taken.Attempt {
		t.Fatalf("parked record %+v", p)
	}
	h.Advance(lease + slack)
	if got := takeOverStalled(t, h.Store, 0); len(got) != 0 {
		t.Fatalf("TakeOverStalled took parked executions %v", keys(got))
	}
	// Its client's retry needs no wait.
	c := claim(t, h.Store, claimReq("alice", "k1", "fp"), idempotency.ClaimTakenOver)
	if c.Parked != "" || c.Attempt != taken.Attempt+1 {
		t.Fatalf("claim of a parked record: %+v", c)
	}
	// Should that execution stall too, a reconciler sees it again.
	h.Advance(lease + slack)
	if got := takeOverStalled(t, h.Store, 0); len(got) != 1 {
		t.Fatalf("after a client's takeover stalled, TakeOverStalled took %v", keys(got))
	}
	other := claim(t, h.Store, claimReq("bob", "k2", "fp"), idempotency.ClaimCreated)
	noErr(t, "Complete", h.Store.Complete(ctx, fence(other), nil))
	wantErr(t, "Park a completed record", h.Store.Park(ctx, fence(other), "x"), idempotency.ErrLeaseLost)
}

func keys(m map[string]idempotency.Record) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}
