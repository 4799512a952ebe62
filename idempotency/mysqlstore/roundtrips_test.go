package mysqlstore_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/mysqlstore"
	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// roundTrips counts client-server round trips on a pool's connections: a
// round trip starts with the first write after a read (or the first write
// ever).
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

// newCountingStore opens a store on prefix whose connections count round trips.
func newCountingStore(t *testing.T, prefix string) (*mysqlstore.Store, *roundTrips) {
	t.Helper()
	rt := new(roundTrips)
	cfg := testConfig(t)
	name := "counting" + randomHex(8)
	addr := cfg.Addr
	mysql.RegisterDialContext(name, func(ctx context.Context, _ string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: c, rt: rt}, nil
	})
	cfg.Net = name
	s, err := mysqlstore.Open(cfg, mysqlstore.WithTablePrefix(prefix))
	require.NoError(t, err)
	s.DB().SetMaxOpenConns(1)
	t.Cleanup(func() { _ = s.Close() })
	return s, rt
}

// TestRoundTrips pins the round trips of each path, once the connection is
// open and a block of generations taken.
func TestRoundTrips(t *testing.T) {
	t.Parallel()
	_, prefix, _ := newStore(t)
	s, rt := newCountingStore(t, prefix)
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
		got["recovery point"] = measure(func() { require.NoError(t, s.SaveRecoveryPoint(ctx, r.Fence(), "p", []byte("d"), time.Minute)) })
		var tx idempotency.Tx
		got["begin"] = measure(func() {
			var err error
			tx, err = s.Begin(ctx, r.Fence())
			require.NoError(t, err)
		})
		got["local insert"] = measure(func() { require.NoError(t, localWrite(tx.Context(ctx), prefix, key)) })
		got["tx complete+commit"] = measure(func() { require.NoError(t, tx.Complete(ctx, []byte("ok"))) })
		got["replay"] = measure(func() { mustClaim(t, s, claimReq(key), idempotency.ClaimCompleted) })
		r2 := mustClaim(t, s, claimReq(key+"-plain"), idempotency.ClaimCreated)
		got["complete"] = measure(func() { require.NoError(t, s.Complete(ctx, r2.Fence(), []byte("ok"))) })
		r3 := mustClaim(t, s, claimReq(key+"-unused"), idempotency.ClaimCreated)
		got["unused tx begin+complete"] = measure(func() {
			tx, err := s.Begin(ctx, r3.Fence())
			require.NoError(t, err)
			require.NoError(t, tx.Complete(ctx, []byte("ok")))
		})
		return got
	}
	run("warm") // open the connection, take generations
	got := run("k")
	t.Logf("round trips: %v", got)
	assert.Equal(t, map[string]int64{
		"claim": 2, "recovery point": 1, "begin": 0, "local insert": 2, "tx complete+commit": 2,
		"replay": 1, "complete": 1, "unused tx begin+complete": 1,
	}, got)
}

// Record times come from the database clock plus the test shift, never
// from the process clock.
func TestTimesComeFromTheDatabaseClock(t *testing.T) {
	t.Parallel()
	s, _, shift := newStore(t)
	shift.Advance(90 * time.Minute)
	dbNow := func() time.Time {
		var us int64
		require.NoError(t, s.DB().QueryRow("SELECT CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) AS SIGNED)").Scan(&us))
		return time.UnixMicro(us)
	}
	before := dbNow()
	r := mustClaim(t, s, claimReq("k"), idempotency.ClaimCreated)
	after := dbNow()
	created := r.CreatedAt.Add(-90 * time.Minute)
	assert.False(t, created.Before(before), "created %v before %v", created, before)
	assert.False(t, created.After(after), "created %v after %v", created, after)
	assert.Equal(t, time.Minute, r.LockedUntil.Sub(r.CreatedAt))
	assert.Equal(t, time.Hour, r.ExpiresAt.Sub(r.CreatedAt))
}
