package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/exactlyonce/retry/idempotency"
)

// batchComplete completes the execution fenced by f in b with response,
// writing nothing locally, and reports whether Complete refused it with
// ErrLeaseLost (then rolled back).
func batchComplete(t *testing.T, b idempotency.BatchTx, f idempotency.Fence, response string) (refused bool) {
	t.Helper()
	ctx := context.Background()
	tx, err := b.Begin(ctx, f)
	noErr(t, "BatchTx.Begin", err)
	switch err := tx.Complete(ctx, []byte(response)); {
	case err == nil:
		return false
	case errors.Is(err, idempotency.ErrLeaseLost):
		noErr(t, "Rollback after a failed Complete", tx.Rollback(ctx))
		return true
	default:
		t.Fatalf("Tx.Complete (%s, %d/%d): %v", f.Key, f.Attempt, f.Generation, err)
		return false
	}
}

// wantBatchLost checks that the completion fenced by f lost its fence:
// refused by its Complete, or reported so by Commit.
func wantBatchLost(t *testing.T, results map[idempotency.Fence]error, refused bool, f idempotency.Fence) {
	t.Helper()
	err, reported := results[f]
	switch {
	case refused && reported:
		t.Fatalf("Commit reported the completion of %s that Complete refused: %v", f.Key, err)
	case !refused && !reported:
		t.Fatalf("the completion of %s was neither refused nor reported", f.Key)
	case reported:
		wantErr(t, "Commit of a completion whose fence does not hold", err, idempotency.ErrLeaseLost)
	}
}

// A batch that completes one record twice, for an execution that outlived
// its lease and for the one that took over (in either order), stores the
// live one's outcome and reports only it stored.
func testBatchOneRecordTwice(t *testing.T, h Harness) {
	bs := batchStore(t, h)
	stale1 := claim(t, bs, claimReq("alice", "k1", "fp"), idempotency.ClaimCreated)
	stale2 := claim(t, bs, claimReq("alice", "k2", "fp"), idempotency.ClaimCreated)
	h.Advance(lease + slack)
	live1 := claim(t, bs, claimReq("alice", "k1", "fp"), idempotency.ClaimTakenOver)
	live2 := claim(t, bs, claimReq("alice", "k2", "fp"), idempotency.ClaimTakenOver)
	b := beginBatch(t, bs)
	refused1 := batchComplete(t, b, fence(stale1), "stale-1")
	if batchComplete(t, b, fence(live1), "live-1") {
		t.Fatal("Complete refused the live execution of k1")
	}
	if batchComplete(t, b, fence(live2), "live-2") {
		t.Fatal("Complete refused the live execution of k2")
	}
	refused2 := batchComplete(t, b, fence(stale2), "stale-2")
	results := commitResults(t, b)
	for _, r := range []idempotency.Record{live1, live2} {
		if err, reported := results[fence(r)]; err != nil || !reported {
			t.Fatalf("the live execution of %s: %v (reported: %v)", r.Key, err, reported)
		}
	}
	wantBatchLost(t, results, refused1, fence(stale1))
	wantBatchLost(t, results, refused2, fence(stale2))
	for k, want := range map[string]string{"k1": "live-1", "k2": "live-2"} {
		c := claim(t, bs, claimReq("alice", k, "fp"), idempotency.ClaimCompleted)
		if string(c.Response) != want {
			t.Fatalf("%s stored %q, want %q", k, c.Response, want)
		}
	}
}

// A completion in a batch of an execution already completed finds its
// fence lost, also when other members of the batch lose theirs and others
// are stored.
func testBatchCompletedAgain(t *testing.T, h Harness) {
	bs := batchStore(t, h)
	done := claim(t, bs, claimReq("alice", "done", "fp"), idempotency.ClaimCreated)
	other := claim(t, bs, claimReq("alice", "other", "fp"), idempotency.ClaimCreated)
	live := claim(t, bs, claimReq("alice", "live", "fp"), idempotency.ClaimCreated)
	first := beginBatch(t, bs)
	if batchComplete(t, first, fence(done), "first") {
		t.Fatal("Complete refused a live execution")
	}
	if results := commitResults(t, first); results[fence(done)] != nil {
		t.Fatalf("first Commit: %v", results)
	}
	forged := fence(other)
	forged.Attempt++
	b := beginBatch(t, bs)
	refusedDone := batchComplete(t, b, fence(done), "second")
	refusedForged := batchComplete(t, b, forged, "forged")
	if batchComplete(t, b, fence(live), "live") {
		t.Fatal("Complete refused a live execution")
	}
	results := commitResults(t, b)
	if err, reported := results[fence(live)]; err != nil || !reported {
		t.Fatalf("the live execution: %v (reported: %v)", err, reported)
	}
	wantBatchLost(t, results, refusedDone, fence(done))
	wantBatchLost(t, results, refusedForged, forged)
	if c := claim(t, bs, claimReq("alice", "done", "fp"), idempotency.ClaimCompleted); string(c.Response) != "first" {
		t.Fatalf("done stored %q, want %q", c.Response, "first")
	}
	claim(t, bs, claimReq("alice", "other", "fp"), idempotency.ClaimInProgress)
	claim(t, bs, claimReq("alice", "live", "fp"), idempotency.ClaimCompleted)
}
