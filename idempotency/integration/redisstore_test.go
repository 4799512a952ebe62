package integration_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/exactlyonce/retry/idempotency/redisstore"
	"github.com/exactlyonce/retry/idempotency/storetest"
	"github.com/exactlyonce/retry/idempotency/storetest/linearize"
)

// redisAddrEnv names the environment variable holding the Redis test
// server's address.
const redisAddrEnv = "EXACTLYONCE_REDIS_ADDR"

func redisAddr() string {
	if s := os.Getenv(redisAddrEnv); s != "" {
		return s
	}
	return "127.0.0.1:6379"
}

// Concurrent calls on one redisstore, with owners paused past their leases
// and the clock moved, make a linearizable history: with records spread
// over shards, and with one shard.
func TestRedisStoreLinearizable(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{redisstore.DefaultShards, 1} {
		linearize.Run(t, func(t *testing.T) storetest.Harness {
			s, shift := newRedisStore(t, redisstore.WithShards(shards))
			return storetest.Harness{Store: s, Advance: shift.Advance}
		})
	}
}

// newRedisStore builds a redisstore on a fresh key prefix, whose keys are
// deleted at cleanup, with a client and a time shift of its own.
func newRedisStore(t testing.TB, opts ...redisstore.Option) (*redisstore.Store, *redisstore.TimeShift) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr()})
	t.Cleanup(func() { _ = rdb.Close() })
	var b [6]byte
	_, _ = rand.Read(b[:])
	prefix := "redisstore_test_" + hex.EncodeToString(b[:])
	t.Cleanup(func() { deletePrefix(t, rdb, prefix) })
	shift := new(redisstore.TimeShift)
	s, err := redisstore.New(rdb, append([]redisstore.Option{redisstore.WithPrefix(prefix), redisstore.WithTimeShift(shift)}, opts...)...)
	require.NoError(t, err)
	return s, shift
}

// deletePrefix deletes every key of a store with prefix.
func deletePrefix(t testing.TB, rdb redis.UniversalClient, prefix string) {
	t.Helper()
	ctx := context.Background()
	iter := rdb.Scan(ctx, 0, "{"+prefix+":*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Errorf("scan %s: %v", prefix, err)
		return
	}
	for len(keys) > 0 {
		n := min(len(keys), 500)
		if err := rdb.Del(ctx, keys[:n]...).Err(); err != nil {
			t.Errorf("delete %s: %v", prefix, err)
			return
		}
		keys = keys[n:]
	}
}
