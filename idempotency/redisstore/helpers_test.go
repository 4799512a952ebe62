package redisstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/redisstore"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// addrEnv names the environment variable holding the test server's address.
const addrEnv = "EXACTLYONCE_REDIS_ADDR"

func addr() string {
	if s := os.Getenv(addrEnv); s != "" {
		return s
	}
	return "127.0.0.1:6379"
}

// newClient opens a client on the test server, closed at cleanup.
func newClient(t testing.TB) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// newPrefix returns a fresh key prefix whose keys are deleted at cleanup.
func newPrefix(t testing.TB, rdb redis.UniversalClient) string {
	t.Helper()
	prefix := "redisstore_test_" + randomHex(12)
	t.Cleanup(func() { deletePrefix(t, rdb, prefix) })
	return prefix
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

// newStore builds a Store on a fresh prefix with a time shift of its own.
func newStore(t testing.TB, opts ...redisstore.Option) (*redisstore.Store, *redisstore.TimeShift) {
	t.Helper()
	rdb := newClient(t)
	shift := new(redisstore.TimeShift)
	s, err := redisstore.New(rdb, append([]redisstore.Option{redisstore.WithPrefix(newPrefix(t, rdb)), redisstore.WithTimeShift(shift)}, opts...)...)
	require.NoError(t, err)
	return s, shift
}

// randomHex returns n random hexadecimal digits.
func randomHex(n int) string {
	b := make([]byte, (n+1)/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)[:n]
}

func claimReq(key string) idempotency.ClaimRequest {
	return idempotency.ClaimRequest{Caller: "alice", Key: key, Fingerprint: "fp", Lease: 60e9, TTL: 3600e9}
}

func mustClaim(t testing.TB, s idempotency.Store, req idempotency.ClaimRequest, want idempotency.ClaimOutcome) idempotency.Record {
	t.Helper()
	c, err := s.Claim(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, want, c.Outcome)
	return c.Record
}
