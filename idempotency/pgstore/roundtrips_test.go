package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRoundTrips pins the number of round trips of each path, once the
// connection's statement cache is warm.
func TestRoundTrips(t *testing.T) {
	t.Parallel()
	_, schema, _ := newStore(t)
	s, rt := newCountingStore(t, schema, 1)
	ctx := context.Background()

	measure := func(f func()) int64 {
		before := rt.count()
		f()
		return rt.count() - before
	}
	run := func(i int) map[string]int64 {
		got := map[string]int64{}
		key := fmt.Sprint("k", i)
		var r idempotency.Record
		got["claim"] = measure(func() { r = mustClaim(t, s, claimReq(key), idempotency.ClaimCreated) })
		got["recovery point"] = measure(func() {
			require.NoError(t, s.SaveRecoveryPoint(ctx, fenceOf(r), "p", []byte("d"), 60e9))
		})
		var tx idempotency.Tx
		got["begin"] = measure(func() {
			var err error
			tx, err = s.Begin(ctx, fenceOf(r))
			require.NoError(t, err)
		})
		got["local insert"] = measure(func() { require.NoError(t, localWrite(tx.Context(ctx), schema, key)) })
		got["tx complete+commit"] = measure(func() { require.NoError(t, tx.Complete(ctx, []byte("ok"))) })
		got["replay"] = measure(func() { mustClaim(t, s, claimReq(key), idempotency.ClaimCompleted) })

		r2 := mustClaim(t, s, claimReq(key+"-plain"), idempotency.ClaimCreated)
		got["complete"] = measure(func() { require.NoError(t, s.Complete(ctx, fenceOf(r2), []byte("ok"))) })

		// A transaction never used costs nothing; completing it is one update.
		r3 := mustClaim(t, s, claimReq(key+"-unused"), idempotency.ClaimCreated)
		got["unused tx begin+complete"] = measure(func() {
			tx, err := s.Begin(ctx, fenceOf(r3))
			require.NoError(t, err)
			require.NoError(t, tx.Complete(ctx, []byte("ok")))
		})
		r4 := mustClaim(t, s, claimReq(key+"-rejected"), idempotency.ClaimCreated)
		got["unused tx rollback+release"] = measure(func() {
			tx, err := s.Begin(ctx, fenceOf(r4))
			require.NoError(t, err)
			require.NoError(t, tx.Rollback(ctx))
			require.NoError(t, s.Release(ctx, fenceOf(r4)))
		})
		return got
	}
	run(0) // warm the statement cache
	got := run(1)
	t.Logf("round trips: %v", got)
	want := map[string]int64{
		"claim": 1, "recovery point": 1, "begin": 0, "local insert": 1,
		"tx complete+commit": 1, "replay": 1, "complete": 1,
		"unused tx begin+complete": 1, "unused tx rollback+release": 1,
	}
	assert.Equal(t, want, got)
}

// A replay and an in-progress answer read the row without locking it: they do
// not wait for a transaction holding the row lock.
func TestReplayTakesNoRowLock(t *testing.T) {
	t.Parallel()
	s, schema, _ := newStore(t)
	ctx := context.Background()
	done := mustClaim(t, s, claimReq("done"), idempotency.ClaimCreated)
	require.NoError(t, s.Complete(ctx, fenceOf(done), []byte("ok")))
	mustClaim(t, s, claimReq("busy"), idempotency.ClaimCreated)

	locker, err := s.Pool().Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = locker.Rollback(ctx) }()
	_, err = locker.Exec(ctx, "SELECT 1 FROM "+table(schema, "idempotency_keys")+" FOR UPDATE")
	require.NoError(t, err)

	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := s.Claim(short, claimReq("done"))
	require.NoError(t, err)
	assert.Equal(t, idempotency.ClaimCompleted, c.Outcome)
	c, err = s.Claim(short, claimReq("busy"))
	require.NoError(t, err)
	assert.Equal(t, idempotency.ClaimInProgress, c.Outcome)
}

// A replay and an in-progress answer draw no generation from the sequence
// (nextval would be a write on the read path).
func TestReplayDrawsNoGeneration(t *testing.T) {
	t.Parallel()
	s, schema, _ := newStore(t)
	ctx := context.Background()
	done := mustClaim(t, s, claimReq("done"), idempotency.ClaimCreated)
	require.NoError(t, s.Complete(ctx, fenceOf(done), []byte("ok")))
	busy := mustClaim(t, s, claimReq("busy"), idempotency.ClaimCreated)
	require.NotEqual(t, done.Generation, busy.Generation)

	lastValue := func() int64 {
		var v int64
		require.NoError(t, s.Pool().QueryRow(ctx, "SELECT last_value FROM "+table(schema, "idempotency_generation_seq")).Scan(&v))
		return v
	}
	before := lastValue()
	for range 3 {
		mustClaim(t, s, claimReq("done"), idempotency.ClaimCompleted)
		mustClaim(t, s, claimReq("busy"), idempotency.ClaimInProgress)
	}
	assert.Equal(t, before, lastValue())
}
