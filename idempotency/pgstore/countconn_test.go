package pgstore_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"

	"github.com/exactlyonce/retry/idempotency/pgstore"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// roundTrips counts client-server round trips on the network connections of
// a pool: a round trip starts with the first write after a read (or the first
// write ever). Pipelined statements sent in one write count once.
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

// newCountingStore returns a store whose pool counts its round trips, on the
// schema of an existing store.
func newCountingStore(t testing.TB, schema string, maxConns int32) (*pgstore.Store, *roundTrips) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn())
	require.NoError(t, err)
	cfg.MaxConns = maxConns
	rt := new(roundTrips)
	dial := cfg.ConnConfig.DialFunc
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: c, rt: rt}, nil
	}
	pool := newPoolFrom(t, cfg)
	s, err := pgstore.New(pool, pgstore.WithSchema(schema))
	require.NoError(t, err)
	return s, rt
}
