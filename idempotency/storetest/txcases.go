package storetest

import (
	"context"
	"testing"

	"github.com/exactlyonce/retry/idempotency"
)

func txStore(t *testing.T, h Harness) idempotency.TxStore {
	t.Helper()
	ts, ok := h.Store.(idempotency.TxStore)
	if !ok {
		t.Skip("store does not implement idempotency.TxStore")
	}
	return ts
}

// begin opens a Tx for f and rolls it back at cleanup, which runs before the
// Harness's own cleanup: a check that fails with the Tx open must not leave a
// transaction that blocks the store's teardown.
func begin(t *testing.T, ts idempotency.TxStore, f idempotency.Fence) (idempotency.Tx, error) {
	t.Helper()
	tx, err := ts.Begin(context.Background(), f)
	if err == nil {
		t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	}
	return tx, err
}

func txWrite(t *testing.T, h Harness, ctx context.Context, name string) {
	t.Helper()
	if h.TxWrite != nil {
		noErr(t, "TxWrite", h.TxWrite(ctx, name))
	}
}

func wantWritten(t *testing.T, h Harness, name string, want bool) {
	t.Helper()
	if h.TxWritten != nil && h.TxWritten(t, name) != want {
		t.Fatalf("local write %q committed = %v, want %v", name, !want, want)
	}
}

func testTxCompleteCommits(t *testing.T, h Harness) {
	ts := txStore(t, h)
	ctx := context.Background()
	r := claim(t, ts, claimReq("alice", "k1", "fp1"), idempotency.ClaimCreated)
	tx, err := begin(t, ts, fence(r))
	noErr(t, "Begin", err)
	txWrite(t, h, tx.Context(ctx), "w1")
	// Recovery points are saved outside the transaction while it is open.
	noErr(t, "SaveRecoveryPoint while a Tx is open", ts.SaveRecoveryPoint(ctx, fence(r), "p1", []byte("d1"), lease))
	noErr(t, "Tx.Complete", tx.Complete(ctx, []byte("outcome")))
	noErr(t, "Rollback after Complete", tx.Rollback(ctx))
	g := claim(t, ts, claimReq("alice", "k1", "fp1"), idempotency.ClaimCompleted)
	if string(g.Response) != "outcome" {
		t.Fatalf("Tx.Complete stored %q", g.Response)
	}
	wantWritten(t, h, "w1", true)
}

func testTxLostLeaseRollsBack(t *testing.T, h Harness) {
	ts := txStore(t, h)
	ctx := context.Background()
	old := claim(t, ts, claimReq("alice", "k1", "fp1"), idempotency.ClaimCreated)
	tx, err := begin(t, ts, fence(old))
	noErr(t, "Begin", err)
	txWrite(t, h, tx.Context(ctx), "stale")
	h.Advance(lease + slack)
	claim(t, ts, claimReq("alice", "k1", "fp1"), idempotency.ClaimTakenOver)
	current := get(t, ts, "alice", "k1")
	wantErr(t, "Tx.Complete with a stale fence", tx.Complete(ctx, []byte("late")), idempotency.ErrLeaseLost)
	noErr(t, "Rollback after a failed Complete", tx.Rollback(ctx))
	wantUnchanged(t, ts, current)
	wantWritten(t, h, "stale", false)

	// Begin with a fence that is already stale: it fails at once or at Complete.
	if tx, err := begin(t, ts, fence(old)); err != nil {
		wantErr(t, "Begin with a stale fence", err, idempotency.ErrLeaseLost)
	} else {
		txWrite(t, h, tx.Context(ctx), "stale2")
		wantErr(t, "Tx.Complete with a stale fence", tx.Complete(ctx, []byte("late")), idempotency.ErrLeaseLost)
		wantWritten(t, h, "stale2", false)
	}
	wantUnchanged(t, ts, current)
}

func testTxRollback(t *testing.T, h Harness) {
	ts := txStore(t, h)
	ctx := context.Background()
	r := claim(t, ts, claimReq("alice", "k1", "fp1"), idempotency.ClaimCreated)
	tx, err := begin(t, ts, fence(r))
	noErr(t, "Begin", err)
	txWrite(t, h, tx.Context(ctx), "w1")
	noErr(t, "Rollback", tx.Rollback(ctx))
	wantWritten(t, h, "w1", false)
	// The record is untouched and still owned: a plain Complete works.
	if g := get(t, ts, "alice", "k1"); g.State != idempotency.StateInProgress || g.Attempt != 1 {
		t.Fatalf("after Rollback: %+v", g)
	}
	noErr(t, "Complete after Rollback", ts.Complete(ctx, fence(r), []byte("ok")))
}

func testTxFailedStatementRollsBack(t *testing.T, h Harness) {
	ts := txStore(t, h)
	ctx := context.Background()
	r := claim(t, ts, claimReq("alice", "k1", "fp1"), idempotency.ClaimCreated)
	tx, err := begin(t, ts, fence(r))
	noErr(t, "Begin", err)
	if err := tx.Err(); err != nil {
		t.Fatalf("Err of a new transaction: %v", err)
	}
	txCtx := tx.Context(ctx)
	txWrite(t, h, txCtx, "before")
	if err := tx.Err(); err != nil {
		t.Fatalf("Err after a write that worked: %v", err)
	}
	if h.TxFail == nil {
		noErr(t, "Tx.Complete", tx.Complete(ctx, []byte("ok")))
		return
	}
	if err := h.TxFail(txCtx); err == nil {
		t.Fatal("TxFail reported no error")
	}
	if tx.Err() == nil {
		t.Fatal("Err is nil after a statement failed")
	}
	// The server may have ended the transaction with the failure (a
	// deadlock's victim, a lost connection), and a statement sent then would
	// commit on its own: every later statement fails.
	if h.TxWrite != nil && h.TxWrite(txCtx, "after") == nil {
		t.Fatal("a statement after a failed one succeeded")
	}
	wantErr(t, "Tx.Complete after a failed statement", tx.Complete(ctx, []byte("half")), idempotency.ErrTxFailed)
	noErr(t, "Rollback after a failed Complete", tx.Rollback(ctx))
	wantWritten(t, h, "before", false)
	wantWritten(t, h, "after", false)
	// Nothing was stored, and the record is still owned: the execution may
	// still give up the key (or, here, complete without the transaction).
	g := get(t, ts, "alice", "k1")
	if g.State != idempotency.StateInProgress || g.Attempt != r.Attempt || len(g.Response) != 0 {
		t.Fatalf("after a refused Complete: status %s attempt %d response %q", g.State, g.Attempt, g.Response)
	}
	noErr(t, "Release after a refused Complete", ts.Release(ctx, fence(r)))
}
