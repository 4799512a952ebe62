package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/exactlyonce/retry/idempotency"
)

const (
	lease = 30 * time.Second
	ttl   = time.Hour
	// slack is how far past a deadline the suite moves time.
	slack = time.Second
)

func claimReq(caller, key, fp string) idempotency.ClaimRequest {
	return idempotency.ClaimRequest{Caller: caller, Key: key, Fingerprint: fp, Lease: lease, TTL: ttl}
}

func claim(t *testing.T, s idempotency.Store, req idempotency.ClaimRequest, want idempotency.ClaimOutcome) idempotency.Record {
	t.Helper()
	c, err := s.Claim(context.Background(), req)
	if err != nil {
		t.Fatalf("Claim(%s, %s): %v", short(req.Caller), short(req.Key), err)
	}
	if c.Outcome != want {
		t.Fatalf("Claim(%s, %s) outcome = %s, want %s", short(req.Caller), short(req.Key), outcomeName(c.Outcome), outcomeName(want))
	}
	return c.Record
}

func fence(r idempotency.Record) idempotency.Fence {
	return r.Fence()
}

func get(t *testing.T, s idempotency.Store, caller, key string) idempotency.Record {
	t.Helper()
	r, err := s.Get(context.Background(), caller, key)
	if err != nil {
		t.Fatalf("Get(%s, %s): %v", short(caller), short(key), err)
	}
	return r
}

func wantNotFound(t *testing.T, s idempotency.Store, caller, key string) {
	t.Helper()
	r, err := s.Get(context.Background(), caller, key)
	if !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("Get(%s, %s) = status %s attempt %d, %v; want ErrNotFound", short(caller), short(key), r.State, r.Attempt, err)
	}
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: error %v, want %v", what, err, want)
	}
}

func noErr(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// short quotes s for a message, abbreviated when long.
func short(s string) string {
	if len(s) <= 40 {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q... (%d bytes)", s[:32], len(s))
}

func near(got, want time.Time) bool {
	d := got.Sub(want)
	return d > -time.Millisecond && d < time.Millisecond
}

func outcomeName(o idempotency.ClaimOutcome) string {
	switch o {
	case idempotency.ClaimCreated:
		return "ClaimCreated"
	case idempotency.ClaimTakenOver:
		return "ClaimTakenOver"
	case idempotency.ClaimInProgress:
		return "ClaimInProgress"
	case idempotency.ClaimCompleted:
		return "ClaimCompleted"
	case idempotency.ClaimMismatch:
		return "ClaimMismatch"
	default:
		return fmt.Sprintf("ClaimOutcome(%d)", int(o))
	}
}

// sameState reports the first difference in the fields a write can change.
func sameState(a, b idempotency.Record) string {
	switch {
	case a.State != b.State:
		return fmt.Sprintf("Status %s != %s", a.State, b.State)
	case a.Attempt != b.Attempt:
		return fmt.Sprintf("Attempt %d != %d", a.Attempt, b.Attempt)
	case a.Generation != b.Generation:
		return fmt.Sprintf("Generation %d != %d", a.Generation, b.Generation)
	case a.Fingerprint != b.Fingerprint:
		return fmt.Sprintf("Fingerprint %q != %q", a.Fingerprint, b.Fingerprint)
	case a.RecoveryPoint != b.RecoveryPoint:
		return fmt.Sprintf("RecoveryPoint %q != %q", a.RecoveryPoint, b.RecoveryPoint)
	case !bytes.Equal(a.RecoveryData, b.RecoveryData):
		return fmt.Sprintf("RecoveryData %q != %q", a.RecoveryData, b.RecoveryData)
	case !bytes.Equal(a.Response, b.Response):
		return fmt.Sprintf("Response %q != %q", a.Response, b.Response)
	case !near(a.LockedUntil, b.LockedUntil):
		return fmt.Sprintf("LockedUntil %v != %v", a.LockedUntil, b.LockedUntil)
	case !near(a.ExpiresAt, b.ExpiresAt):
		return fmt.Sprintf("ExpiresAt %v != %v", a.ExpiresAt, b.ExpiresAt)
	}
	return ""
}

func wantUnchanged(t *testing.T, s idempotency.Store, before idempotency.Record) {
	t.Helper()
	after := get(t, s, before.Caller, before.Key)
	if d := sameState(after, before); d != "" {
		t.Fatalf("record changed: %s", d)
	}
}

func testClaimCreates(t *testing.T, h Harness) {
	r := claim(t, h.Store, claimReq("alice", "k1", "fp1"), idempotency.ClaimCreated)
	if r.Caller != "alice" || r.Key != "k1" || r.Fingerprint != "fp1" {
		t.Fatalf("record identity = (%q, %q, %q), want (alice, k1, fp1)", r.Caller, r.Key, r.Fingerprint)
	}
	if r.State != idempotency.StateInProgress || r.Attempt != 1 {
		t.Fatalf("new record: Status %s Attempt %d, want in_progress 1", r.State, r.Attempt)
	}
	if r.Generation == 0 {
		t.Fatal("new record has Generation 0")
	}
	if r.RecoveryPoint != "" || len(r.RecoveryData) != 0 || len(r.Response) != 0 {
		t.Fatalf("new record carries state: %+v", r)
	}
	if !near(r.LockedUntil, r.CreatedAt.Add(lease)) {
		t.Fatalf("LockedUntil %v, want CreatedAt+lease %v", r.LockedUntil, r.CreatedAt.Add(lease))
	}
	if !near(r.ExpiresAt, r.CreatedAt.Add(ttl)) {
		t.Fatalf("ExpiresAt %v, want CreatedAt+ttl %v", r.ExpiresAt, r.CreatedAt.Add(ttl))
	}
	if d := sameState(get(t, h.Store, "alice", "k1"), r); d != "" {
		t.Fatalf("Get differs from the claimed record: %s", d)
	}
}

func testClaimWhileInProgress(t *testing.T, h Harness) {
	first := claim(t, h.Store, claimReq("alice", "k1", "fp1"), idempotency.ClaimCreated)
	h.Advance(lease - slack)
	r := claim(t, h.Store, claimReq("alice", "k1", "fp1"), idempotency.ClaimInProgress)
	if r.Attempt != 1 {
		t.Fatalf("in-progress claim reported Attempt %d, want 1", r.Attempt)
	}
	wantUnchanged(t, h.Store, first)
}

func testClaimRace(t *testing.T, h Harness) {
	claimRace(t, h, "race", idempotency.ClaimCreated, "ClaimCreated")
	if r := get(t, h.Store, "alice", "race"); r.Attempt != 1 {
		t.Fatalf("after the race Attempt = %d, want 1", r.Attempt)
	}
}

// claimRace has 50 goroutines claim (alice, key) at once and checks that
// exactly one gets winner and all the others ClaimInProgress.
func claimRace(t *testing.T, h Harness, key string, winner idempotency.ClaimOutcome, winnerName string) {
	t.Helper()
	const n = 50
	var (
		wg       sync.WaitGroup
		start    = make(chan struct{})
		outcomes = make([]idempotency.ClaimOutcome, n)
		errs     = make([]error, n)
	)
	for i := range n {
		wg.Go(func() {
			<-start
			c, err := h.Store.Claim(context.Background(), claimReq("alice", key, "fp1"))
			outcomes[i], errs[i] = c.Outcome, err
		})
	}
	close(start)
	wg.Wait()
	won := 0
	for i := range n {
		noErr(t, "concurrent Claim", errs[i])
		switch outcomes[i] {
		case winner:
			won++
		case idempotency.ClaimInProgress:
		default:
			t.Fatalf("concurrent claim %d: outcome %s", i, outcomeName(outcomes[i]))
		}
	}
	if won != 1 {
		t.Fatalf("%d of %d concurrent claims got %s, want exactly 1", won, n, winnerName)
	}
}

func testCompleteThenReplay(t *testing.T, h Harness) {
	ctx := context.Background()
	r := claim(t, h.Store, claimReq("alice", "k1", "fp1"), idempotency.ClaimCreated)
	noErr(t, "Complete", h.Store.Complete(ctx, fence(r), []byte("outcome")))
	got := claim(t, h.Store, claimReq("alice", "k1", "fp1"), idempotency.ClaimCompleted)
	if got.State != idempotency.StateCompleted || string(got.Response) != "outcome" {
		t.Fatalf("completed claim: Status %s Response %q, want completed %q", got.State, got.Response, "outcome")
	}
	if !near(got.ExpiresAt, r.ExpiresAt) {
		t.Fatalf("Complete moved ExpiresAt from %v to %v", r.ExpiresAt, got.ExpiresAt)
	}
	g := get(t, h.Store, "alice", "k1")
	if g.State != idempotency.StateCompleted || string(g.Response) != "outcome" {
		t.Fatalf("Get after Complete: Status %s Response %q", g.State, g.Response)
	}
	// An empty outcome is still an outcome.
	r2 := claim(t, h.Store, claimReq("alice", "k2", "fp1"), idempotency.ClaimCreated)
	noErr(t, "Complete(empty)", h.Store.Complete(ctx, fence(r2), nil))
	if g := claim(t, h.Store, claimReq("alice", "k2", "fp1"), idempotency.ClaimCompleted); len(g.Response) != 0 {
		t.Fatalf("empty outcome replayed as %q", g.Response)
	}
}

func testFingerprintMismatch(t *testing.T, h Harness) {
	ctx := context.Background()
	r := claim(t, h.Store, claimReq("alice", "k1", "fp1"), idempotency.ClaimCreated)
	m := claim(t, h.Store, claimReq("alice", "k1", "fp2"), idempotency.ClaimMismatch)
	if m.Fingerprint != "fp1" {
		t.Fatalf("mismatch reported Fingerprint %q, want the stored fp1", m.Fingerprint)
	}
	wantUnchanged(t, h.Store, r)
	noErr(t, "Complete", h.Store.Complete(ctx, fence(r), []byte("outcome")))
	done := get(t, h.Store, "alice", "k1")
	// A completed record is never replayed to another fingerprint.
	claim(t, h.Store, claimReq("alice", "k1", "fp2"), idempotency.ClaimMismatch)
	wantUnchanged(t, h.Store, done)
}

func testMismatchNeverTakesOver(t *testing.T, h Harness) {
	ctx := context.Background()
	r := claim(t, h.Store, claimReq("alice", "k1", "fp1"), idempotency.ClaimCreated)
	noErr(t, "SaveRecoveryPoint", h.Store.SaveRecoveryPoint(ctx, fence(r), "p1", []byte("d1"), lease))
	before := get(t, h.Store, "alice", "k1")
	h.Advance(lease + slack)
	claim(t, h.Store, claimReq("alice", "k1", "fp2"), idempotency.ClaimMismatch)
	wantUnchanged(t, h.Store, before)
	// The owner of the stale lease may still finish: nobody took it over.
	noErr(t, "Complete by the stale but unchallenged owner", h.Store.Complete(ctx, fence(r), []byte("ok")))
}

func testTakeoverAfterLease(t *testing.T, h Harness) {
	ctx := context.Background()
	r := claim(t, h.Store, claimReq("alice", "k1", "fp1"), idempotency.ClaimCreated)
	noErr(t, "SaveRecoveryPoint", h.Store.SaveRecoveryPoint(ctx, fence(r), "charged", []byte("ch_123"), lease))
	h.Advance(lease + slack)
	n := claim(t, h.Store, claimReq("alice", "k1", "fp1"), idempotency.ClaimTakenOver)
	if n.Attempt != 2 || n.Generation != r.Generation {
		t.Fatalf("takeover Attempt %d Generation %d, want 2 and the record's %d", n.Attempt, n.Generation, r.Generation)
	}
	if n.State != idempotency.StateInProgress || n.RecoveryPoint != "charged" || string(n.RecoveryData) != "ch_123" {
		t.Fatalf("takeover lost state: Status %s point %q data %q", n.State, n.RecoveryPoint, n.RecoveryData)
	}
	if !near(n.ExpiresAt, r.ExpiresAt) {
		t.Fatalf("takeover moved ExpiresAt from %v to %v", r.ExpiresAt, n.ExpiresAt)
	}
	if !n.LockedUntil.After(r.LockedUntil) {
		t.Fatalf("takeover did not renew the lease: LockedUntil %v, was %v", n.LockedUntil, r.LockedUntil)
	}
	// The new lease holds against the next claim.
	claim(t, h.Store, claimReq("alice", "k1", "fp1"), idempotency.ClaimInProgress)
	// And expires in turn.
	h.Advance(lease + slack)
	if n3 := claim(t, h.Store, claimReq("alice", "k1", "fp1"), idempotency.ClaimTakenOver); n3.Attempt != 3 {
		t.Fatalf("second takeover Attempt = %d, want 3", n3.Attempt)
	}
}

func testTakeoverRace(t *testing.T, h Harness) {
	claim(t, h.Store, claimReq("alice", "k1", "fp1"), idempotency.ClaimCreated)
	h.Advance(lease + slack)
	claimRace(t, h, "k1", idempotency.ClaimTakenOver, "ClaimTakenOver")
	if r := get(t, h.Store, "alice", "k1"); r.Attempt != 2 {
		t.Fatalf("after the takeover race Attempt = %d, want 2", r.Attempt)
	}
}

func testRecoveryPointExtendsLease(t *testing.T, h Harness) {
	ctx := context.Background()
	r := claim(t, h.Store, claimReq("alice", "k1", "fp1"), idempotency.ClaimCreated)
	h.Advance(lease - slack)
	noErr(t, "SaveRecoveryPoint", h.Store.SaveRecoveryPoint(ctx, fence(r), "p1", []byte("d1"), lease))
	h.Advance(lease - slack) // past the first lease, within the extended one
	claim(t, h.Store, claimReq("alice", "k1", "fp1"), idempotency.ClaimInProgress)
	g := get(t, h.Store, "alice", "k1")
	if g.RecoveryPoint != "p1" || string(g.RecoveryData) != "d1" {
		t.Fatalf("saved point %q data %q, want p1 d1", g.RecoveryPoint, g.RecoveryData)
	}
	// A later point replaces the earlier one, data included.
	noErr(t, "SaveRecoveryPoint", h.Store.SaveRecoveryPoint(ctx, fence(r), "p2", nil, lease))
	if g := get(t, h.Store, "alice", "k1"); g.RecoveryPoint != "p2" || len(g.RecoveryData) != 0 {
		t.Fatalf("second point %q data %q, want p2 and no data", g.RecoveryPoint, g.RecoveryData)
	}
	h.Advance(lease + slack)
	claim(t, h.Store, claimReq("alice", "k1", "fp1"), idempotency.ClaimTakenOver)
}

func testCompletedIsNeverTakenOver(t *testing.T, h Harness) {
	ctx := context.Background()
	r := claim(t, h.Store, claimReq("alice", "k1", "fp1"), idempotency.ClaimCreated)
	noErr(t, "Complete", h.Store.Complete(ctx, fence(r), []byte("done")))
	h.Advance(3 * lease)
	g := claim(t, h.Store, claimReq("alice", "k1", "fp1"), idempotency.ClaimCompleted)
	if g.Attempt != 1 || string(g.Response) != "done" {
		t.Fatalf("completed record after the lease: Attempt %d Response %q", g.Attempt, g.Response)
	}
}

func testStaleFenceWritesNothing(t *testing.T, h Harness) {
	ctx := context.Background()
	old := claim(t, h.Store, claimReq("alice", "k1", "fp1"), idempotency.ClaimCreated)
	noErr(t, "SaveRecoveryPoint", h.Store.SaveRecoveryPoint(ctx, fence(old), "p1", []byte("d1"), lease))
	h.Advance(lease + slack)
	claim(t, h.Store, claimReq("alice", "k1", "fp1"), idempotency.ClaimTakenOver)
	current := get(t, h.Store, "alice", "k1")

	stale := fence(old)
	wantErr(t, "SaveRecoveryPoint with a stale fence",
		h.Store.SaveRecoveryPoint(ctx, stale, "p2", []byte("d2"), lease), idempotency.ErrLeaseLost)
	wantUnchanged(t, h.Store, current)
	wantErr(t, "Complete with a stale fence", h.Store.Complete(ctx, stale, []byte("late")), idempotency.ErrLeaseLost)
	wantUnchanged(t, h.Store, current)
	wantErr(t, "Release with a stale fence", h.Store.Release(ctx, stale), idempotency.ErrLeaseLost)
	wantUnchanged(t, h.Store, current)

	// A fence from the future, or for a key that does not exist, holds nothing either.
	future := fence(current)
	future.Attempt++
	wantErr(t, "Complete with a future fence", h.Store.Complete(ctx, future, []byte("x")), idempotency.ErrLeaseLost)
	wantUnchanged(t, h.Store, current)
	// The current attempt of another generation, or without one.
	for _, g := range []int64{current.Generation + 1, current.Generation - 1, 0} {
		other := fence(current)
		other.Generation = g
		wantErr(t, fmt.Sprintf("Complete with Generation %d instead of %d", g, current.Generation),
			h.Store.Complete(ctx, other, []byte("x")), idempotency.ErrLeaseLost)
		wantUnchanged(t, h.Store, current)
	}
	ghost := idempotency.Fence{Caller: "alice", Key: "nope", Attempt: 1, Generation: current.Generation}
	wantErr(t, "SaveRecoveryPoint on a missing key", h.Store.SaveRecoveryPoint(ctx, ghost, "p", nil, lease), idempotency.ErrLeaseLost)
	wantErr(t, "Complete on a missing key", h.Store.Complete(ctx, ghost, []byte("x")), idempotency.ErrLeaseLost)
	wantErr(t, "Release on a missing key", h.Store.Release(ctx, ghost), idempotency.ErrLeaseLost)
	wantNotFound(t, h.Store, "alice", "nope")

	// The current holder's writes still work.
	noErr(t, "Complete by the current holder", h.Store.Complete(ctx, fence(current), []byte("new")))
	if g := get(t, h.Store, "alice", "k1"); string(g.Response) != "new" || g.Attempt != 2 {
		t.Fatalf("after the current holder completed: Response %q Attempt %d", g.Response, g.Attempt)
	}
	wantErr(t, "Complete with the stale fence after completion", h.Store.Complete(ctx, stale, []byte("late")), idempotency.ErrLeaseLost)
	if g := get(t, h.Store, "alice", "k1"); string(g.Response) != "new" {
		t.Fatalf("stale completion overwrote the outcome: %q", g.Response)
	}
}

func testWritesAfterCompleteFail(t *testing.T, h Harness) {
	ctx := context.Background()
	r := claim(t, h.Store, claimReq("alice", "k1", "fp1"), idempotency.ClaimCreated)
	f := fence(r)
	noErr(t, "Complete", h.Store.Complete(ctx, f, []byte("first")))
	done := get(t, h.Store, "alice", "k1")
	// Fenced writes apply to an in-progress record only: an outcome is final.
	wantErr(t, "second Complete", h.Store.Complete(ctx, f, []byte("second")), idempotency.ErrLeaseLost)
	wantErr(t, "SaveRecoveryPoint after Complete", h.Store.SaveRecoveryPoint(ctx, f, "p", nil, lease), idempotency.ErrLeaseLost)
	wantErr(t, "Release after Complete", h.Store.Release(ctx, f), idempotency.ErrLeaseLost)
	wantUnchanged(t, h.Store, done)
}

func testReleaseFreesKey(t *testing.T, h Harness) {
	ctx := context.Background()
	r := claim(t, h.Store, claimReq("alice", "k1", "fp1"), idempotency.ClaimCreated)
	noErr(t, "SaveRecoveryPoint", h.Store.SaveRecoveryPoint(ctx, fence(r), "p1", []byte("d1"), lease))
	noErr(t, "Release", h.Store.Release(ctx, fence(r)))
	wantNotFound(t, h.Store, "alice", "k1")
	wantErr(t, "Complete after Release", h.Store.Complete(ctx, fence(r), []byte("x")), idempotency.ErrLeaseLost)
	// The key is free for any fingerprint, and starts afresh.
	n := claim(t, h.Store, claimReq("alice", "k1", "fp2"), idempotency.ClaimCreated)
	if n.Attempt != 1 || n.RecoveryPoint != "" || len(n.RecoveryData) != 0 || n.Fingerprint != "fp2" {
		t.Fatalf("claim after Release: %+v", n)
	}
}

func testGetNotFound(t *testing.T, h Harness) {
	wantNotFound(t, h.Store, "alice", "never")
	wantNotFound(t, h.Store, "", "")
}

func testExpiry(t *testing.T, h Harness) {
	ctx := context.Background()
	r := claim(t, h.Store, claimReq("alice", "done", "fp1"), idempotency.ClaimCreated)
	noErr(t, "Complete", h.Store.Complete(ctx, fence(r), []byte("outcome")))
	claim(t, h.Store, claimReq("alice", "open", "fp1"), idempotency.ClaimCreated)

	h.Advance(ttl - slack)
	claim(t, h.Store, claimReq("alice", "done", "fp1"), idempotency.ClaimCompleted)
	get(t, h.Store, "alice", "open")

	h.Advance(2 * slack)
	// Expired records behave as absent before any DeleteExpired.
	wantNotFound(t, h.Store, "alice", "done")
	wantNotFound(t, h.Store, "alice", "open")
	for _, key := range []string{"done", "open"} {
		n := claim(t, h.Store, claimReq("alice", key, "other"), idempotency.ClaimCreated)
		if n.Attempt != 1 || n.State != idempotency.StateInProgress || len(n.Response) != 0 || n.RecoveryPoint != "" {
			t.Fatalf("claim of expired key %q: %+v", key, n)
		}
	}
}

func testDeleteExpired(t *testing.T, h Harness) {
	ctx := context.Background()
	for i := range 3 {
		r := claim(t, h.Store, claimReq("alice", fmt.Sprint("short", i), "fp"), idempotency.ClaimCreated)
		if i == 0 {
			noErr(t, "Complete", h.Store.Complete(ctx, fence(r), []byte("x")))
		}
	}
	long := claimReq("alice", "long", "fp")
	long.TTL = 3 * ttl
	claim(t, h.Store, long, idempotency.ClaimCreated)

	n, err := h.Store.DeleteExpired(ctx, 0)
	noErr(t, "DeleteExpired", err)
	if n != 0 {
		t.Fatalf("DeleteExpired removed %d live records", n)
	}
	h.Advance(2 * ttl)
	n, err = h.Store.DeleteExpired(ctx, 0)
	noErr(t, "DeleteExpired", err)
	if n != 3 {
		t.Fatalf("DeleteExpired removed %d, want 3", n)
	}
	n, err = h.Store.DeleteExpired(ctx, 0)
	noErr(t, "DeleteExpired", err)
	if n != 0 {
		t.Fatalf("second DeleteExpired removed %d, want 0", n)
	}
	get(t, h.Store, "alice", "long")
	for i := range 3 {
		wantNotFound(t, h.Store, "alice", fmt.Sprint("short", i))
	}
}

func testDeleteExpiredLimit(t *testing.T, h Harness) {
	ctx := context.Background()
	for i := range 5 {
		claim(t, h.Store, claimReq(fmt.Sprint("caller", i), "k", "fp"), idempotency.ClaimCreated)
	}
	h.Advance(ttl + slack)
	total := 0
	for _, limit := range []int{2, 2, 2} {
		n, err := h.Store.DeleteExpired(ctx, limit)
		noErr(t, "DeleteExpired", err)
		if n > limit {
			t.Fatalf("DeleteExpired(%d) removed %d", limit, n)
		}
		total += n
	}
	if total != 5 {
		t.Fatalf("DeleteExpired in batches of 2 removed %d in all, want 5", total)
	}
}

func testTenantIsolation(t *testing.T, h Harness) {
	ctx := context.Background()
	a := claim(t, h.Store, claimReq("alice", "shared", "fpA"), idempotency.ClaimCreated)
	// Another caller, same key, another fingerprint: independent, no mismatch.
	b := claim(t, h.Store, claimReq("bob", "shared", "fpB"), idempotency.ClaimCreated)
	if b.Attempt != 1 {
		t.Fatalf("bob's claim Attempt %d, want 1", b.Attempt)
	}
	// Callers and keys are not concatenated into one string.
	claim(t, h.Store, claimReq("a|b", "c", "fp"), idempotency.ClaimCreated)
	claim(t, h.Store, claimReq("a", "b|c", "fp"), idempotency.ClaimCreated)
	claim(t, h.Store, claimReq("a\x00b", "c", "fp"), idempotency.ClaimCreated)
	claim(t, h.Store, claimReq("a", "b\x00c", "fp"), idempotency.ClaimCreated)

	noErr(t, "Complete alice", h.Store.Complete(ctx, fence(a), []byte("for alice")))
	if g := get(t, h.Store, "bob", "shared"); g.State != idempotency.StateInProgress || len(g.Response) != 0 {
		t.Fatalf("alice's completion leaked into bob's record: %+v", g)
	}
	noErr(t, "Complete bob", h.Store.Complete(ctx, fence(b), []byte("for bob")))
	if g := claim(t, h.Store, claimReq("alice", "shared", "fpA"), idempotency.ClaimCompleted); string(g.Response) != "for alice" {
		t.Fatalf("alice replays %q", g.Response)
	}
	if g := claim(t, h.Store, claimReq("bob", "shared", "fpB"), idempotency.ClaimCompleted); string(g.Response) != "for bob" {
		t.Fatalf("bob replays %q", g.Response)
	}
	// Releasing one caller's key leaves the other's alone.
	c := claim(t, h.Store, claimReq("carol", "shared", "fpC"), idempotency.ClaimCreated)
	noErr(t, "Release carol", h.Store.Release(ctx, fence(c)))
	get(t, h.Store, "alice", "shared")
	get(t, h.Store, "bob", "shared")
}

func testRecordsAreCopies(t *testing.T, h Harness) {
	ctx := context.Background()
	r := claim(t, h.Store, claimReq("alice", "k1", "fp1"), idempotency.ClaimCreated)
	data := []byte("data")
	noErr(t, "SaveRecoveryPoint", h.Store.SaveRecoveryPoint(ctx, fence(r), "p", data, lease))
	data[0] = 'X'
	g := get(t, h.Store, "alice", "k1")
	if string(g.RecoveryData) != "data" {
		t.Fatalf("store kept the caller's slice: %q", g.RecoveryData)
	}
	g.RecoveryData[0] = 'Y'
	resp := []byte("resp")
	noErr(t, "Complete", h.Store.Complete(ctx, fence(r), resp))
	resp[0] = 'X'
	g = get(t, h.Store, "alice", "k1")
	if string(g.Response) != "resp" || string(g.RecoveryData) != "data" {
		t.Fatalf("stored bytes changed through a caller's slice: response %q data %q", g.Response, g.RecoveryData)
	}
	g.Response[0] = 'Y'
	if g := get(t, h.Store, "alice", "k1"); string(g.Response) != "resp" {
		t.Fatalf("stored response changed through a returned slice: %q", g.Response)
	}
}
