package storetest

import (
	"context"
	"testing"

	"github.com/exactlyonce/retry/idempotency"
)

// startedPoint is the point the suite asks claims to start records with.
const startedPoint = "started"

// withPoint is a claim of key with Resume, starting a new record with
// point ("" for none).
func withPoint(key, point string) idempotency.ClaimRequest {
	req := claimReq("alice", key, "fp")
	req.Resume = []byte("resume " + key)
	req.Point = point
	return req
}

// checkPoint fails t unless rec, got from what, has the recovery point want.
func checkPoint(t *testing.T, what string, rec idempotency.Record, want string) {
	t.Helper()
	if rec.RecoveryPoint != want {
		t.Fatalf("%s: recovery point %q, want %q", what, rec.RecoveryPoint, want)
	}
}

// A claim with ClaimRequest.Point creates its record with that recovery
// point, in the claim itself: the execution counts as begun, so
// TakeOverStalled takes it over once its lease runs out, though nothing
// else was written. A takeover keeps a record's own point and gives Point
// only to a record without one; a claim without Point behaves as before:
// its record is never stalled.
func testClaimWithPoint(t *testing.T, h Harness) {
	ctx := context.Background()
	r := claim(t, h.Store, withPoint("point", startedPoint), idempotency.ClaimCreated)
	checkPoint(t, "the created record", r, startedPoint)
	checkPoint(t, "the created record read back", get(t, h.Store, "alice", "point"), startedPoint)
	checkPoint(t, "a record created without Point", claim(t, h.Store, withPoint("plain", ""), idempotency.ClaimCreated), "")
	claim(t, h.Store, withPoint("plain2", ""), idempotency.ClaimCreated)
	claim(t, h.Store, withPoint("late", ""), idempotency.ClaimCreated)
	begun := claim(t, h.Store, withPoint("begun", ""), idempotency.ClaimCreated)
	noErr(t, "SaveRecoveryPoint", h.Store.SaveRecoveryPoint(ctx, fence(begun), "begin:charge", []byte("data"), lease))
	done := claim(t, h.Store, withPoint("done", startedPoint), idempotency.ClaimCreated)
	noErr(t, "Complete", h.Store.Complete(ctx, fence(done), []byte("ok")))

	if got := takeOverStalled(t, h.Store, 0); len(got) != 0 {
		t.Fatalf("TakeOverStalled within the leases took %v", keys(got))
	}
	if c := claim(t, h.Store, withPoint("done", startedPoint), idempotency.ClaimCompleted); c.State != idempotency.StateCompleted ||
		string(c.Response) != "ok" {
		t.Fatalf("a claim with Point changed a completed record: %+v", c)
	}

	h.Advance(lease + slack)
	checkPoint(t, "a takeover without Point", claim(t, h.Store, withPoint("plain2", ""), idempotency.ClaimTakenOver), "")
	checkPoint(t, "a takeover with Point of a record without one", claim(t, h.Store, withPoint("late", startedPoint), idempotency.ClaimTakenOver), startedPoint)
	b := claim(t, h.Store, withPoint("begun", startedPoint), idempotency.ClaimTakenOver)
	if b.RecoveryPoint != "begin:charge" || string(b.RecoveryData) != "data" {
		t.Fatalf("a takeover with Point of a begun record left it at %q %q, want its own point and data", b.RecoveryPoint, b.RecoveryData)
	}
	got := takeOverStalled(t, h.Store, 0)
	s, ok := got["point"]
	if len(got) != 1 || !ok {
		t.Fatalf("TakeOverStalled took %v, want only the record claimed with Point", keys(got))
	}
	if s.Attempt != 2 || s.Generation != r.Generation || s.RecoveryPoint != startedPoint || string(s.Resume) != "resume point" ||
		s.State != idempotency.StateInProgress {
		t.Fatalf("the record claimed with Point taken over as %+v", s)
	}

	// Once the takeovers' leases ran out too, the records that have a
	// point are stalled, and those that never had one are not.
	h.Advance(lease + slack)
	got = takeOverStalled(t, h.Store, 0)
	for _, k := range []string{"point", "late", "begun"} {
		if _, ok := got[k]; !ok || len(got) != 3 {
			t.Fatalf("TakeOverStalled took %v, want point, late and begun", keys(got))
		}
	}

	// A claim that replaces an expired record starts it with its own
	// Point, whatever the old record had.
	h.Advance(ttl)
	checkPoint(t, "a record replacing an expired one, with Point", claim(t, h.Store, withPoint("plain", startedPoint), idempotency.ClaimCreated), startedPoint)
	checkPoint(t, "a record replacing an expired one, without Point", claim(t, h.Store, withPoint("point", ""), idempotency.ClaimCreated), "")
	h.Advance(lease + slack)
	if got := takeOverStalled(t, h.Store, 0); len(got) != 1 || got["plain"].Key != "plain" {
		t.Fatalf("TakeOverStalled after the replacements took %v, want plain", keys(got))
	}
}
