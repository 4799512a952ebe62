package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/exactlyonce/retry/idempotency"
)

func batchStore(t *testing.T, h Harness) idempotency.BatchStore {
	t.Helper()
	bs, ok := h.Store.(idempotency.BatchStore)
	if !ok {
		t.Skip("store does not implement idempotency.BatchStore")
	}
	return bs
}

// beginBatch opens a batch, closed at cleanup.
func beginBatch(t *testing.T, bs idempotency.BatchStore) idempotency.BatchTx {
	t.Helper()
	b, err := bs.BeginBatch(context.Background())
	noErr(t, "BeginBatch", err)
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	return b
}

// batchWrite makes a local write through tx when the store carries them.
func batchWrite(t *testing.T, h Harness, tx idempotency.Tx, name string) {
	t.Helper()
	if _, ok := h.Store.(idempotency.TxStore); ok {
		txWrite(t, h, tx.Context(context.Background()), name)
	}
}

// batchWritten checks a local write when the store carries them.
func batchWritten(t *testing.T, h Harness, name string, want bool) {
	t.Helper()
	if _, ok := h.Store.(idempotency.TxStore); ok {
		wantWritten(t, h, name, want)
	}
}

// commitResults commits b and returns the error of each fence's completion.
func commitResults(t *testing.T, b idempotency.BatchTx) map[idempotency.Fence]error {
	t.Helper()
	results, err := b.Commit(context.Background())
	noErr(t, "BatchTx.Commit", err)
	out := make(map[idempotency.Fence]error, len(results))
	for _, r := range results {
		out[r.Fence] = r.Err
	}
	return out
}

func testBatchClaim(t *testing.T, h Harness) {
	bs := batchStore(t, h)
	ctx := context.Background()
	done := claim(t, bs, claimReq("alice", "done", "fp"), idempotency.ClaimCreated)
	noErr(t, "Complete", bs.Complete(ctx, fence(done), []byte("outcome")))
	busy := claim(t, bs, claimReq("alice", "busy", "fp"), idempotency.ClaimCreated)
	started := claimReq("alice", "started", "fp")
	started.Point = startedPoint
	reqs := []idempotency.ClaimRequest{
		claimReq("alice", "new", "fp"),
		claimReq("alice", "done", "fp"),
		claimReq("alice", "busy", "fp"),
		claimReq("alice", "done", "other"),
		claimReq("bob", "new", "fp"),
		started,
		claimReq("alice", "new", "fp"), // twice in one batch: the second finds the first
	}
	claims, err := bs.ClaimBatch(ctx, reqs)
	noErr(t, "ClaimBatch", err)
	if len(claims) != len(reqs) {
		t.Fatalf("ClaimBatch returned %d claims for %d requests", len(claims), len(reqs))
	}
	want := []idempotency.ClaimOutcome{idempotency.ClaimCreated, idempotency.ClaimCompleted, idempotency.ClaimInProgress,
		idempotency.ClaimMismatch, idempotency.ClaimCreated, idempotency.ClaimCreated, idempotency.ClaimInProgress}
	for i, c := range claims {
		if c.Outcome != want[i] {
			t.Fatalf("ClaimBatch request %d (%s/%s) outcome = %s, want %s", i, reqs[i].Caller, reqs[i].Key, outcomeName(c.Outcome), outcomeName(want[i]))
		}
		if c.Record.Caller != reqs[i].Caller || c.Record.Key != reqs[i].Key {
			t.Fatalf("ClaimBatch request %d answered for %s/%s", i, c.Record.Caller, c.Record.Key)
		}
	}
	if string(claims[1].Record.Response) != "outcome" {
		t.Fatalf("ClaimBatch replay response = %q", claims[1].Record.Response)
	}
	if claims[2].Record.Attempt != busy.Attempt || claims[0].Record.Attempt != 1 || claims[0].Record.Generation == 0 {
		t.Fatalf("ClaimBatch records: %+v / %+v", claims[0].Record, claims[2].Record)
	}
	if claims[5].Record.RecoveryPoint != startedPoint {
		t.Fatalf("ClaimBatch with a point saved %q", claims[5].Record.RecoveryPoint)
	}
	// The claims are the store's: the batch's new record is in progress
	// with its lease, and another claim of it is refused.
	claim(t, bs, claimReq("alice", "new", "fp"), idempotency.ClaimInProgress)
	h.Advance(lease + slack)
	again, err := bs.ClaimBatch(ctx, []idempotency.ClaimRequest{claimReq("alice", "new", "fp")})
	noErr(t, "ClaimBatch after the lease", err)
	if again[0].Outcome != idempotency.ClaimTakenOver || again[0].Record.Attempt != 2 {
		t.Fatalf("ClaimBatch after the lease: %s attempt %d", outcomeName(again[0].Outcome), again[0].Record.Attempt)
	}
}

func testBatchCommit(t *testing.T, h Harness) {
	bs := batchStore(t, h)
	ctx := context.Background()
	r1 := claim(t, bs, claimReq("alice", "k1", "fp"), idempotency.ClaimCreated)
	r2 := claim(t, bs, claimReq("alice", "k2", "fp"), idempotency.ClaimCreated)
	r3 := claim(t, bs, claimReq("alice", "k3", "fp"), idempotency.ClaimCreated)
	b := beginBatch(t, bs)
	tx1, err := b.Begin(ctx, fence(r1))
	noErr(t, "BatchTx.Begin", err)
	batchWrite(t, h, tx1, "w1")
	noErr(t, "Tx.Complete in a batch", tx1.Complete(ctx, []byte("one")))
	tx2, err := b.Begin(ctx, fence(r2))
	noErr(t, "BatchTx.Begin", err)
	noErr(t, "Tx.Complete in a batch", tx2.Complete(ctx, []byte("two")))
	// A member that rolls back takes only its own writes with it.
	tx3, err := b.Begin(ctx, fence(r3))
	noErr(t, "BatchTx.Begin", err)
	batchWrite(t, h, tx3, "w3")
	noErr(t, "Tx.Rollback in a batch", tx3.Rollback(ctx))
	// An outcome without local writes is not durable before the commit;
	// one with local writes is durable with them, or not at all.
	if g := get(t, bs, "alice", "k2"); g.State != idempotency.StateInProgress {
		t.Fatalf("k2 before the batch's commit: %s", g.State)
	}
	together(t, h, bs, "k1", "w1")
	results := commitResults(t, b)
	if len(results) != 2 || results[fence(r1)] != nil || results[fence(r2)] != nil {
		t.Fatalf("Commit results = %v, want k1 and k2 stored", results)
	}
	if _, ok := results[fence(r3)]; ok {
		t.Fatal("Commit reported the member that rolled back")
	}
	for k, want := range map[string]string{"k1": "one", "k2": "two"} {
		c := claim(t, bs, claimReq("alice", k, "fp"), idempotency.ClaimCompleted)
		if string(c.Response) != want {
			t.Fatalf("%s stored %q, want %q", k, c.Response, want)
		}
	}
	batchWritten(t, h, "w1", true)
	batchWritten(t, h, "w3", false)
	if g := get(t, bs, "alice", "k3"); g.State != idempotency.StateInProgress || g.Attempt != 1 {
		t.Fatalf("k3 after its member rolled back: %+v", g)
	}
	// The batch goes on: a later member commits at the next Commit.
	tx3, err = b.Begin(ctx, fence(r3))
	noErr(t, "BatchTx.Begin after a Commit", err)
	batchWrite(t, h, tx3, "w3b")
	noErr(t, "Tx.Complete after a Commit", tx3.Complete(ctx, []byte("three")))
	if results := commitResults(t, b); len(results) != 1 || results[fence(r3)] != nil {
		t.Fatalf("second Commit results = %v", results)
	}
	claim(t, bs, claimReq("alice", "k3", "fp"), idempotency.ClaimCompleted)
	batchWritten(t, h, "w3b", true)
}

func testBatchLostLease(t *testing.T, h Harness) {
	bs := batchStore(t, h)
	ctx := context.Background()
	stale := claim(t, bs, claimReq("alice", "k1", "fp"), idempotency.ClaimCreated)
	staleLocal := claim(t, bs, claimReq("alice", "k2", "fp"), idempotency.ClaimCreated)
	h.Advance(lease + slack)
	took := claim(t, bs, claimReq("alice", "k1", "fp"), idempotency.ClaimTakenOver)
	tookLocal := claim(t, bs, claimReq("alice", "k2", "fp"), idempotency.ClaimTakenOver)
	good := claim(t, bs, claimReq("alice", "k3", "fp"), idempotency.ClaimCreated)
	// Completed with nothing written, in the same set-based update as the
	// stale member's: stored all the same.
	goodUntouched := claim(t, bs, claimReq("alice", "k4", "fp"), idempotency.ClaimCreated)
	b := beginBatch(t, bs)
	var lost []idempotency.Fence
	complete := func(f idempotency.Fence, write string, response string) {
		tx, err := b.Begin(ctx, f)
		noErr(t, "BatchTx.Begin", err)
		if write != "" {
			batchWrite(t, h, tx, write)
		}
		switch err := tx.Complete(ctx, []byte(response)); {
		case err == nil:
		case f != fence(good) && f != fence(goodUntouched):
			wantErr(t, "Tx.Complete with a stale fence", err, idempotency.ErrLeaseLost)
			lost = append(lost, f)
			noErr(t, "Rollback after a failed Complete", tx.Rollback(ctx))
		default:
			t.Fatalf("Tx.Complete: %v", err)
		}
	}
	complete(fence(stale), "", "late")
	complete(fence(staleLocal), "stale", "late")
	complete(fence(good), "good", "good")
	complete(fence(goodUntouched), "", "good")
	results := commitResults(t, b)
	for _, f := range []idempotency.Fence{fence(good), fence(goodUntouched)} {
		if err, reported := results[f]; err != nil || (!reported && f == fence(goodUntouched)) {
			t.Fatalf("the live member's completion (%s): %v (reported: %v)", f.Key, err, reported)
		}
	}
	for _, f := range []idempotency.Fence{fence(stale), fence(staleLocal)} {
		err, reported := results[f]
		if !reported && !containsFence(lost, f) {
			t.Fatalf("a stale member (%s) was neither refused nor reported", f.Key)
		}
		if reported {
			wantErr(t, "Commit of a stale member", err, idempotency.ErrLeaseLost)
		}
	}
	wantUnchanged(t, bs, get(t, bs, "alice", "k1"))
	for k, rec := range map[string]idempotency.Record{"k1": took, "k2": tookLocal} {
		g := get(t, bs, "alice", k)
		if g.State != idempotency.StateInProgress || g.Attempt != rec.Attempt {
			t.Fatalf("%s after a stale member's batch: %s attempt %d, want in progress attempt %d", k, g.State, g.Attempt, rec.Attempt)
		}
	}
	batchWritten(t, h, "stale", false)
	batchWritten(t, h, "good", true)
	claim(t, bs, claimReq("alice", "k3", "fp"), idempotency.ClaimCompleted)
	claim(t, bs, claimReq("alice", "k4", "fp"), idempotency.ClaimCompleted)
}

func testBatchClose(t *testing.T, h Harness) {
	bs := batchStore(t, h)
	ctx := context.Background()
	r1 := claim(t, bs, claimReq("alice", "k1", "fp"), idempotency.ClaimCreated)
	r2 := claim(t, bs, claimReq("alice", "k2", "fp"), idempotency.ClaimCreated)
	b, err := bs.BeginBatch(ctx)
	noErr(t, "BeginBatch", err)
	for i, r := range []idempotency.Record{r1, r2} {
		tx, err := b.Begin(ctx, fence(r))
		noErr(t, "BatchTx.Begin", err)
		if i == 0 {
			batchWrite(t, h, tx, "w1")
		}
		noErr(t, "Tx.Complete in a batch", tx.Complete(ctx, []byte("x")))
	}
	noErr(t, "BatchTx.Close", b.Close(ctx))
	noErr(t, "BatchTx.Close again", b.Close(ctx))
	together(t, h, bs, "k1", "w1")
	if g := get(t, bs, r2.Caller, r2.Key); g.State != idempotency.StateInProgress || g.Attempt != r2.Attempt {
		t.Fatalf("%s after a batch closed without Commit: %+v", r2.Key, g)
	}
	// Still owned: the execution completes alone.
	noErr(t, "Complete after the batch closed", bs.Complete(ctx, fence(r2), []byte("alone")))
}

// together checks that the outcome of key and its local write named
// write are both durable or neither (a store may commit a member that
// wrote locally at its Complete, or only with the batch).
func together(t *testing.T, h Harness, bs idempotency.BatchStore, key, write string) {
	t.Helper()
	g := get(t, bs, "alice", key)
	batchWritten(t, h, write, g.State == idempotency.StateCompleted)
}

func containsFence(fs []idempotency.Fence, f idempotency.Fence) bool {
	for _, x := range fs {
		if x == f {
			return true
		}
	}
	return false
}

func testBatchFailedStatement(t *testing.T, h Harness) {
	bs := batchStore(t, h)
	ts, ok := bs.(idempotency.TxStore)
	if !ok || h.TxFail == nil || h.TxWrite == nil {
		t.Skip("store carries no local writes, or the Harness has no TxFail")
	}
	ctx := context.Background()
	ra := claim(t, ts, claimReq("alice", "a", "fp"), idempotency.ClaimCreated)
	rb := claim(t, ts, claimReq("alice", "b", "fp"), idempotency.ClaimCreated)
	b := beginBatch(t, bs)
	before, err := b.Begin(ctx, fence(rb))
	noErr(t, "BatchTx.Begin", err)
	batchWrite(t, h, before, "b-before")
	noErr(t, "Tx.Complete in a batch", before.Complete(ctx, []byte("b")))

	txa, err := b.Begin(ctx, fence(ra))
	noErr(t, "BatchTx.Begin", err)
	actx := txa.Context(ctx)
	txWrite(t, h, actx, "a1")
	if err := h.TxFail(actx); err == nil {
		t.Fatal("TxFail reported no error")
	}
	if txa.Err() == nil {
		t.Fatal("Err is nil after a statement failed in a batch")
	}
	if h.TxWrite(actx, "a2") == nil {
		t.Fatal("a statement after a failed one succeeded in a batch")
	}
	wantErr(t, "Tx.Complete after a failed statement in a batch", txa.Complete(ctx, []byte("half")), idempotency.ErrTxFailed)
	noErr(t, "Rollback after a failed Complete", txa.Rollback(ctx))

	// The batch goes on: a member after the failed one commits with the
	// one before it.
	rc := claim(t, ts, claimReq("alice", "c", "fp"), idempotency.ClaimCreated)
	after, err := b.Begin(ctx, fence(rc))
	noErr(t, "BatchTx.Begin", err)
	batchWrite(t, h, after, "c-after")
	noErr(t, "Tx.Complete in a batch", after.Complete(ctx, []byte("c")))
	results := commitResults(t, b)
	if len(results) != 2 || results[fence(rb)] != nil || results[fence(rc)] != nil {
		t.Fatalf("Commit results = %v, want b and c stored", results)
	}
	batchWritten(t, h, "b-before", true)
	batchWritten(t, h, "c-after", true)
	batchWritten(t, h, "a1", false)
	batchWritten(t, h, "a2", false)
	if g := get(t, ts, "alice", "a"); g.State != idempotency.StateInProgress || g.Attempt != ra.Attempt {
		t.Fatalf("the failed member's record: %+v", g)
	}
}

func testBatchClaimRace(t *testing.T, h Harness) {
	bs := batchStore(t, h)
	const (
		racers = 4
		keys   = 20
	)
	created := make([][keys]int, racers)
	errs := make(chan error, racers)
	var wg sync.WaitGroup
	for r := range racers {
		wg.Go(func() {
			reqs := make([]idempotency.ClaimRequest, keys)
			for i := range reqs {
				// Each racer in another order.
				k := (i*(2*r+1) + r) % keys
				reqs[i] = claimReq("alice", fmt.Sprintf("k%02d", k), "fp")
			}
			claims, err := bs.ClaimBatch(context.Background(), reqs)
			if err != nil {
				errs <- err
				return
			}
			for i, c := range claims {
				var k int
				_, _ = fmt.Sscanf(reqs[i].Key, "k%02d", &k)
				switch c.Outcome {
				case idempotency.ClaimCreated:
					created[r][k]++
				case idempotency.ClaimInProgress:
				default:
					errs <- fmt.Errorf("racer %d: %s: outcome %s", r, reqs[i].Key, outcomeName(c.Outcome))
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	failed := 0
	for err := range errs {
		// A batch may fail as a whole (a deadlock between two batches'
		// inserts): its keys are then claimed by the others, or by no one.
		t.Logf("ClaimBatch: %v", err)
		failed++
	}
	if failed == racers {
		t.Fatal("every racing ClaimBatch failed")
	}
	for k := range keys {
		n := 0
		for r := range racers {
			n += created[r][k]
		}
		if n > 1 {
			t.Fatalf("k%02d created %d times by racing batches", k, n)
		}
		if n == 0 && failed == 0 {
			t.Fatalf("k%02d created by no batch", k)
		}
	}
}

// testBatchRunnerCommitsUntouched: through a Runner's Batch, an execution
// whose work wrote nothing locally has its outcome stored by the batch's
// Commit, which reports it: a consumer waits for that report, and runs the
// message again when the Commit does not name it.
func testBatchRunnerCommitsUntouched(t *testing.T, h Harness) {
	batchStore(t, h)
	ctx := context.Background()
	runner := idempotency.NewRunner(h.Store)
	reqs := []idempotency.Request{
		{Caller: "tenant", Key: "untouched-1", Fingerprint: "fp"},
		{Caller: "tenant", Key: "untouched-2", Fingerprint: "fp"},
	}
	b, err := runner.StartBatch(ctx, reqs)
	noErr(t, "StartBatch", err)
	defer func() { _ = b.Close(ctx) }()
	for i := range reqs {
		res, err := b.Do(ctx, i, func(context.Context, *idempotency.Execution) ([]byte, error) {
			return []byte("done"), nil
		})
		noErr(t, "Batch.Do", err)
		if res.Replayed {
			t.Fatalf("request %d replayed on its first run", i)
		}
	}
	results := b.Commit(ctx)
	for i, req := range reqs {
		err, ok := results[i]
		if !ok {
			t.Errorf("Commit did not report request %d: its caller would run it again", i)
			continue
		}
		noErr(t, "the committed outcome", err)
		rec, err := h.Store.Get(ctx, req.Caller, req.Key)
		noErr(t, "Get", err)
		if rec.State != idempotency.StateCompleted || string(rec.Response) != "done" {
			t.Errorf("request %d: %v with %q after the Commit, want completed with %q", i, rec.State, rec.Response, "done")
		}
	}
}
