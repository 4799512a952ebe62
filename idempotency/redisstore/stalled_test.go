package redisstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/redisstore"
	"github.com/stretchr/testify/require"
)

// The stalled sets do not know the caller of their members: TakeOverStalled
// for one caller reads on past the stalled executions of other callers,
// older than its own, round trip after round trip (here 3 members of a
// shard each), and takes over that caller's oldest first, never one of
// another caller's.
func TestTakeOverStalledForOneCallerReadsPastOthers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const lease = 30 * time.Second
	for _, shards := range []int{1, 4} {
		t.Run(fmt.Sprint(shards, " shards"), func(t *testing.T) {
			s, shift := newStore(t, redisstore.WithShards(shards))
			redisstore.SetStalledScan(s, 3)
			others := 0
			begin := func(caller, key string) {
				t.Helper()
				_, err := s.Claim(ctx, idempotency.ClaimRequest{Caller: caller, Key: key, Fingerprint: "fp",
					Lease: lease, TTL: time.Hour, Point: "started"})
				require.NoError(t, err)
				shift.Advance(time.Second) // each lease ends after the one before
			}
			other := func(n int) {
				for range n {
					begin("other", fmt.Sprint("o", others))
					others++
				}
			}
			begin("mine", "m0")
			other(20)
			begin("mine", "m1")
			other(20)
			begin("mine", "m2")
			begin("mine", "m3")
			other(10)
			begin("mine", "m4")
			shift.Advance(lease + time.Second)

			take := func(caller string, limit int) []string {
				t.Helper()
				recs, err := s.TakeOverStalled(ctx, caller, limit, lease)
				require.NoError(t, err)
				var keys []string
				for _, r := range recs {
					if caller != "" {
						require.Equal(t, caller, r.Caller, "took %s of another caller", r.Key)
					}
					require.Equal(t, int64(2), r.Attempt)
					keys = append(keys, r.Key)
				}
				return keys
			}
			require.Equal(t, []string{"m0"}, take("mine", 1))
			require.Equal(t, []string{"m1", "m2"}, take("mine", 2))
			require.Equal(t, []string{"m3", "m4"}, take("mine", 0))
			require.Empty(t, take("mine", 0))
			require.Empty(t, take("nobody", 0))
			for i := range others {
				r, err := s.Get(ctx, "other", fmt.Sprint("o", i))
				require.NoError(t, err)
				require.Equal(t, int64(1), r.Attempt, "another caller's record was taken over")
			}
			require.Len(t, take("", 0), others)
		})
	}
}

// Of two shards, the one that found its limit of the caller's records first
// does not end the search while the other may still hold an older one
// behind other callers' records: the oldest comes first.
func TestTakeOverStalledForOneCallerFindsTheOldestInEveryShard(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const lease = 30 * time.Second
	s, shift := newStore(t, redisstore.WithShards(2))
	redisstore.SetStalledScan(s, 3)
	// keyIn returns a key of caller, starting with prefix, in shard.
	keyIn := func(caller, prefix string, shard int) string {
		for i := 0; ; i++ {
			if k := fmt.Sprint(prefix, i); redisstore.ShardOf(s, caller, k) == shard {
				return k
			}
		}
	}
	begin := func(caller, key string) {
		t.Helper()
		_, err := s.Claim(ctx, idempotency.ClaimRequest{Caller: caller, Key: key, Fingerprint: "fp",
			Lease: lease, TTL: time.Hour, Point: "started"})
		require.NoError(t, err)
		shift.Advance(time.Second)
	}
	for i := range 4 { // shard 1: four of another caller's, the oldest
		begin("other", keyIn("other", fmt.Sprint("o", i, "-"), 1))
	}
	oldest := keyIn("mine", "old", 1) // then the caller's oldest, behind them
	begin("mine", oldest)
	begin("mine", keyIn("mine", "new", 0)) // shard 0: found in the first round trip
	shift.Advance(lease + time.Second)

	recs, err := s.TakeOverStalled(ctx, "mine", 1, lease)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, oldest, recs[0].Key)
}
