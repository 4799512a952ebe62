package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/exactlyonce/retry/idempotency"
)

// A claim for a broker's last delivery (Request.StartedAtClaim) that finds
// the message's record held, without the started mark, by another
// execution's live lease saves the mark and the message on the record
// without taking the execution over: the holder keeps its fence, extends
// its lease without wiping the mark, and completes as before; and when the
// holder fails instead, its record is not freed but left to the
// Reconciler (TakeOverStalled), since nothing would deliver the message
// again.
func testLastClaimKeepsMessage(t *testing.T, h Harness) {
	ctx := context.Background()
	runner := idempotency.NewRunner(h.Store)
	runner.Register("message", func(context.Context, *idempotency.Execution) ([]byte, error) {
		return []byte("done"), nil
	})
	request := func(key string, last bool) idempotency.Request {
		return idempotency.Request{Caller: "alice", Key: key, Fingerprint: "fp", Work: "message",
			Input: []byte("body of " + key), StartedAtClaim: last}
	}
	// holder runs key's first delivery; its work claims the last delivery
	// while it holds the lease, extends its lease, and ends with err.
	holder := func(key string, err error) error {
		_, derr := runner.Do(ctx, request(key, false), func(ctx context.Context, e *idempotency.Execution) ([]byte, error) {
			var busy *idempotency.InProgressError
			if _, lerr := runner.Do(ctx, request(key, true), nil); !errors.As(lerr, &busy) {
				t.Errorf("the last delivery's claim of %s: %v, want an *InProgressError", key, lerr)
			}
			checkPoint(t, "the record after the last delivery's claim", get(t, h.Store, "alice", key), startedPoint)
			noErr(t, "Extend", e.Extend(ctx))
			checkPoint(t, "the record after the holder extended its lease", get(t, h.Store, "alice", key), startedPoint)
			return []byte("done"), err
		})
		return derr
	}

	noErr(t, "the holder that completes", holder("completes", nil))
	if rec := get(t, h.Store, "alice", "completes"); rec.State != idempotency.StateCompleted || rec.Attempt != 1 {
		t.Fatalf("the holder's execution did not complete on its own fence: %+v", rec)
	}

	wantErr(t, "the holder that fails", holder("fails", errCrash), errCrash)
	rec, err := h.Store.Get(ctx, "alice", "fails")
	if err != nil {
		t.Fatalf("the failed holder's record: %v: the last delivery's message was lost", err)
	}
	checkPoint(t, "the failed holder's record", rec, startedPoint)
	h.Advance(runner.Lease() + slack)
	if got := takeOverStalled(t, h.Store, 0); len(got) != 1 || got["fails"].Key == "" {
		t.Fatalf("TakeOverStalled took %v, want the failed holder's record", keys(got))
	}
}

// A batch's claim with a recovery point saves it, as Claim does, on a
// record held without one, leaving the execution to its holder; the
// batch's other requests are claimed as ever.
func testBatchLastClaimMarks(t *testing.T, h Harness) {
	bs := batchStore(t, h)
	held := claim(t, h.Store, withPoint("held", ""), idempotency.ClaimCreated)
	cs, err := bs.ClaimBatch(context.Background(), []idempotency.ClaimRequest{
		withPoint("fresh", startedPoint), withPoint("held", startedPoint)})
	noErr(t, "ClaimBatch", err)
	if len(cs) != 2 || cs[0].Outcome != idempotency.ClaimCreated || cs[1].Outcome != idempotency.ClaimInProgress {
		t.Fatalf("ClaimBatch of a new key and a held one: %d claims %v", len(cs), outcomes(cs))
	}
	checkPoint(t, "the held record, in the batch's answer", cs[1].Record, startedPoint)
	rec := get(t, h.Store, "alice", "held")
	checkPoint(t, "the held record", rec, startedPoint)
	if rec.Attempt != held.Attempt || rec.Generation != held.Generation || string(rec.Resume) != "resume held" {
		t.Fatalf("the held record after the batch's claim: %+v, want its holder's attempt and generation, and the resume", rec)
	}
}

// outcomes names the outcomes of cs.
func outcomes(cs []idempotency.Claim) []string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = outcomeName(c.Outcome)
	}
	return names
}
