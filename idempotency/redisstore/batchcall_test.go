package redisstore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/redisstore"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// commandCounter counts the commands a client sends, pipelined or not.
type commandCounter struct{ n atomic.Int64 }

func (c *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// On one server a batch's claims are one script call, and so are its
// outcomes, whatever the shards of its keys; the claims and outcomes are
// those of Claim and Complete.
func TestBatchIsOneCommand(t *testing.T) {
	t.Parallel()
	rdb := newClient(t)
	counter := new(commandCounter)
	rdb.AddHook(counter)
	s, err := redisstore.New(rdb, redisstore.WithPrefix(newPrefix(t, rdb)))
	require.NoError(t, err)
	ctx := context.Background()
	reqs := make([]idempotency.ClaimRequest, 40)
	for i := range reqs {
		reqs[i] = claimReq(fmt.Sprint("k", i))
	}
	_, err = s.ClaimBatch(ctx, []idempotency.ClaimRequest{claimReq("warm")}) // load the script
	require.NoError(t, err)

	before := counter.n.Load()
	claims, err := s.ClaimBatch(ctx, reqs)
	require.NoError(t, err)
	assert.Equal(t, int64(1), counter.n.Load()-before, "commands for a batch of %d claims", len(reqs))
	for i, c := range claims {
		require.Equal(t, idempotency.ClaimCreated, c.Outcome, "claim %d", i)
	}

	commit := func() []idempotency.BatchResult {
		t.Helper()
		tx, err := s.BeginBatch(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Close(ctx) }()
		for _, c := range claims {
			m, err := tx.Begin(ctx, c.Record.Fence())
			require.NoError(t, err)
			require.NoError(t, m.Complete(ctx, []byte("done "+c.Record.Key)))
		}
		results, err := tx.Commit(ctx)
		require.NoError(t, err)
		return results
	}
	commit() // load the script (its outcomes are checked below, on a replay)
	for _, c := range claims {
		r, err := s.Get(ctx, "alice", c.Record.Key)
		require.NoError(t, err)
		require.Equal(t, idempotency.StateCompleted, r.State)
		require.Equal(t, "done "+c.Record.Key, string(r.Response))
	}
	before = counter.n.Load()
	for _, r := range commit() {
		assert.ErrorIs(t, r.Err, idempotency.ErrLeaseLost, "a second commit of %s", r.Fence.Key)
	}
	assert.Equal(t, int64(1), counter.n.Load()-before, "commands for a commit of %d outcomes", len(claims))
}

// An item the batch script cannot run (a record whose stored caller is not
// the one its name was made of) fails alone, with a permanent error; the
// other outcomes of the batch are stored.
func TestBatchItemFailsAlone(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, redisstore.WithShards(1))
	ctx := context.Background()
	claims, err := s.ClaimBatch(ctx, []idempotency.ClaimRequest{claimReq("good"), claimReq("forged")})
	require.NoError(t, err)
	forged := claims[1].Record
	var name string
	iter := s.Client().Scan(ctx, 0, "{"+s.Prefix()+":0}:r:*", 100).Iterator()
	for iter.Next(ctx) {
		if c, _ := s.Client().HGet(ctx, iter.Val(), "k").Result(); c == "forged" {
			name = iter.Val()
		}
	}
	require.NoError(t, iter.Err())
	require.NotEmpty(t, name, "the record of the key forged")
	require.NoError(t, s.Client().HSet(ctx, name, "c", "mallory").Err())

	tx, err := s.BeginBatch(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Close(ctx) }()
	for _, c := range claims {
		m, err := tx.Begin(ctx, c.Record.Fence())
		require.NoError(t, err)
		require.NoError(t, m.Complete(ctx, []byte("ok")))
	}
	results, err := tx.Commit(ctx)
	require.NoError(t, err)
	require.Len(t, results, 2)
	assert.NoError(t, results[0].Err)
	require.Error(t, results[1].Err)
	assert.Contains(t, results[1].Err.Error(), "two records share a key name")
	assert.True(t, retry.IsPermanent(results[1].Err))
	assert.Equal(t, forged.Fence(), results[1].Fence)
	r, err := s.Get(ctx, "alice", "good")
	require.NoError(t, err)
	assert.Equal(t, idempotency.StateCompleted, r.State)

	_, err = s.ClaimBatch(ctx, []idempotency.ClaimRequest{claimReq("good"), claimReq("forged")})
	assert.ErrorContains(t, err, "two records share a key name")
}
