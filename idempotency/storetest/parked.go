package storetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/exactlyonce/retry/idempotency"
)

// parkOne claims (caller, key), begins it, and parks it with reason.
func parkOne(t *testing.T, s idempotency.Store, caller, key, reason string) idempotency.Record {
	t.Helper()
	ctx := context.Background()
	r := claim(t, s, claimReq(caller, key, "fp"), idempotency.ClaimCreated)
	noErr(t, "SaveRecoveryPoint", s.SaveRecoveryPoint(ctx, fence(r), "begin:charge", nil, lease))
	noErr(t, "Park", s.Park(ctx, fence(r), reason))
	return r
}

// listParked returns every live parked record, page by page, as
// "caller/key" strings in the order the store gave them.
func listParked(t *testing.T, s idempotency.Store, page int) ([]string, map[string]idempotency.Record) {
	t.Helper()
	var (
		names  []string
		byName = map[string]idempotency.Record{}
		after  idempotency.Record
	)
	for range 100 {
		recs, err := s.ListParked(context.Background(), after.Caller, after.Key, page)
		noErr(t, "ListParked", err)
		if page > 0 && len(recs) > page {
			t.Fatalf("ListParked with limit %d returned %d records", page, len(recs))
		}
		for _, r := range recs {
			n := r.Caller + "/" + r.Key
			if _, dup := byName[n]; dup {
				t.Fatalf("ListParked returned %s twice", n)
			}
			names, byName[n] = append(names, n), r
		}
		if len(recs) == 0 || (page > 0 && len(recs) < page) {
			return names, byName
		}
		after = recs[len(recs)-1]
	}
	t.Fatal("ListParked never returned an empty or short page")
	return nil, nil
}

// ListParked returns exactly the live parked records, with their reason,
// ordered by caller then key byte-wise, page after page; a record a claim
// took over, a completed one, an expired one and an unparked one are not
// listed; and it changes nothing.
func testListParked(t *testing.T, h Harness) {
	ctx := context.Background()
	if names, _ := listParked(t, h.Store, 0); len(names) != 0 {
		t.Fatalf("an empty store lists parked records %v", names)
	}
	// Callers and keys that a naive concatenation would order wrongly,
	// and a NUL byte.
	want := []string{"/k", "a/\x00", "a/b", "a/b\x00", "ab/a", "b/a"}
	for _, ck := range []struct{ caller, key string }{
		{"b", "a"}, {"a", "b\x00"}, {"ab", "a"}, {"", "k"}, {"a", "b"}, {"a", "\x00"},
	} {
		parkOne(t, h.Store, ck.caller, ck.key, fmt.Sprintf("reason %q", ck.caller+ck.key))
	}
	// Not parked: in progress, begun, completed.
	claim(t, h.Store, claimReq("a", "running", "fp"), idempotency.ClaimCreated)
	done := claim(t, h.Store, claimReq("a", "done", "fp"), idempotency.ClaimCreated)
	noErr(t, "Complete", h.Store.Complete(ctx, fence(done), nil))

	for _, page := range []int{0, 1, 2, 4, 100} {
		names, byName := listParked(t, h.Store, page)
		if fmt.Sprintf("%q", names) != fmt.Sprintf("%q", want) {
			t.Fatalf("ListParked pages of %d listed %q, want %q", page, names, want)
		}
		if r := byName["a/b"]; r.Parked != `reason "ab"` || r.State != idempotency.StateInProgress ||
			r.Fingerprint != "fp" || r.RecoveryPoint != "begin:charge" || r.Attempt != 1 {
			t.Fatalf("listed parked record %+v", r)
		}
	}
	// Listing changed nothing: the records are still parked, their leases
	// over, so the next claim takes one over at once and it is parked no more.
	c := claim(t, h.Store, claimReq("a", "b", "fp"), idempotency.ClaimTakenOver)
	names, _ := listParked(t, h.Store, 0)
	if len(names) != len(want)-1 || contains(names, "a/b") {
		t.Fatalf("after a claim took a/b over, ListParked lists %q", names)
	}
	// Parked again by a reconciler, it is listed again; completed, never.
	noErr(t, "Park", h.Store.Park(ctx, fence(c), "again"))
	if _, byName := listParked(t, h.Store, 0); byName["a/b"].Parked != "again" {
		t.Fatalf("a record parked again is listed as %+v", byName["a/b"])
	}
	c = claim(t, h.Store, claimReq("a", "b", "fp"), idempotency.ClaimTakenOver)
	noErr(t, "Complete", h.Store.Complete(ctx, fence(c), []byte("ok")))
	if names, _ := listParked(t, h.Store, 0); contains(names, "a/b") {
		t.Fatalf("a completed record is listed as parked: %q", names)
	}
	// Expired records are never listed, swept or not.
	h.Advance(ttl + slack)
	if names, _ := listParked(t, h.Store, 0); len(names) != 0 {
		t.Fatalf("expired records listed as parked: %q", names)
	}
}

func contains(names []string, n string) bool {
	for _, m := range names {
		if m == n {
			return true
		}
	}
	return false
}
