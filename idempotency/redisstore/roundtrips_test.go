package redisstore_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/redisstore"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// roundTrips counts client-server round trips on a client's connections: a
// round trip starts with the first write after a read (or the first write
// ever). Pipelined commands sent in one write count once.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) count() int64 { return r.n.Load() }

type countingConn struct {
	net.Conn
	rt      *roundTrips
	writing atomic.Bool
}

func (c *countingConn) Write(p []byte) (int, error) {
	if !c.writing.Swap(true) {
		c.rt.n.Add(1)
	}
	return c.Conn.Write(p)
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.writing.Store(false)
	}
	return n, err
}

// TestRoundTrips pins the round trips of each operation once the scripts
// are loaded: one for every operation on a record, one pipelined round trip
// per phase of the batch operations.
func TestRoundTrips(t *testing.T) {
	t.Parallel()
	rt := new(roundTrips)
	rdb := redis.NewClient(&redis.Options{Addr: addr(), PoolSize: 1, Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: c, rt: rt}, nil
	}})
	t.Cleanup(func() { _ = rdb.Close() })
	s, err := redisstore.New(rdb, redisstore.WithPrefix(newPrefix(t, rdb)))
	require.NoError(t, err)
	ctx := context.Background()
	measure := func(f func()) int64 {
		before := rt.count()
		f()
		return rt.count() - before
	}
	run := func(key string) map[string]int64 {
		got := map[string]int64{}
		var r idempotency.Record
		got["claim"] = measure(func() { r = mustClaim(t, s, claimReq(key), idempotency.ClaimCreated) })
		got["recovery point"] = measure(func() { require.NoError(t, s.SaveRecoveryPoint(ctx, r.Fence(), "p", nil, time.Minute)) })
		got["complete"] = measure(func() { require.NoError(t, s.Complete(ctx, r.Fence(), []byte("ok"))) })
		got["replay"] = measure(func() { mustClaim(t, s, claimReq(key), idempotency.ClaimCompleted) })
		got["get"] = measure(func() { _, err := s.Get(ctx, "alice", key); require.NoError(t, err) })
		r2 := mustClaim(t, s, claimReq(key+"-rejected"), idempotency.ClaimCreated)
		got["release"] = measure(func() { require.NoError(t, s.Release(ctx, r2.Fence())) })
		got["take over stalled, none stalled"] = measure(func() { _, err := s.TakeOverStalled(ctx, "", 0, time.Minute); require.NoError(t, err) })
		got["list parked, none parked"] = measure(func() { _, err := s.ListParked(ctx, "", "", 0); require.NoError(t, err) })
		return got
	}
	run("warm") // load the scripts
	got := run("k")
	t.Logf("round trips: %v", got)
	assert.Equal(t, map[string]int64{"claim": 1, "recovery point": 1, "complete": 1, "replay": 1, "get": 1, "release": 1,
		"take over stalled, none stalled": 1, "list parked, none parked": 1}, got)
}

// Record times come from the Redis clock plus the test shift, never from
// the process clock.
func TestTimesComeFromTheRedisClock(t *testing.T) {
	t.Parallel()
	s, shift := newStore(t)
	shift.Advance(90 * time.Minute)
	redisNow := func() time.Time {
		now, err := s.Client().Time(context.Background()).Result()
		require.NoError(t, err)
		return now
	}
	before := redisNow()
	r := mustClaim(t, s, claimReq("k"), idempotency.ClaimCreated)
	after := redisNow()
	created := r.CreatedAt.Add(-90 * time.Minute)
	assert.False(t, created.Before(before), "created %v before %v", created, before)
	assert.False(t, created.After(after), "created %v after %v", created, after)
	assert.Equal(t, time.Minute, r.LockedUntil.Sub(r.CreatedAt))
	assert.Equal(t, time.Hour, r.ExpiresAt.Sub(r.CreatedAt))
}
