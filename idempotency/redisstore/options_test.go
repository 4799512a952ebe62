package redisstore_test

import (
	"net"
	"testing"

	"github.com/exactlyonce/retry"
	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/redisstore"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewRefusesBadSettings(t *testing.T) {
	t.Parallel()
	rdb := newClient(t)
	_, err := redisstore.New(nil)
	assert.Error(t, err)
	for _, opts := range [][]redisstore.Option{
		{redisstore.WithPrefix("")},
		{redisstore.WithPrefix("a{b")},
		{redisstore.WithPrefix("a}b")},
		{redisstore.WithShards(0)},
		{redisstore.WithShards(redisstore.MaxShards + 1)},
	} {
		_, err := redisstore.New(rdb, opts...)
		assert.Error(t, err)
	}
	s, err := redisstore.New(rdb, nil, redisstore.WithShards(redisstore.MaxShards))
	require.NoError(t, err)
	assert.Equal(t, redisstore.DefaultPrefix, s.Prefix())
}

// A claim without a lease or TTL is refused as permanent; a server that is
// not there is a transient failure (the Middleware answers 503).
func TestErrorsAreClassified(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	_, err := s.Claim(t.Context(), idempotency.ClaimRequest{Key: "k"})
	assert.True(t, retry.IsPermanent(err))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := ln.Addr().String()
	require.NoError(t, ln.Close())
	rdb := redis.NewClient(&redis.Options{Addr: dead, MaxRetries: -1})
	defer rdb.Close()
	down, err := redisstore.New(rdb)
	require.NoError(t, err)
	_, err = down.Claim(t.Context(), claimReq("k"))
	require.Error(t, err)
	assert.False(t, retry.IsPermanent(err), "%v", err)
}
