package pgstore_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/exactlyonce/retry/idempotency"
	"github.com/exactlyonce/retry/idempotency/pgstore"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// errCutRows is what a cutConn's reads fail with once it cut the
// connection.
var errCutRows = errors.New("test: connection cut before the first row")

// cutConn is a connection to the server that, once armed between two
// statements, passes the server's messages up to the first row (a
// DataRow) and then closes the connection: the client fails while it
// reads the rows of a statement that the server has run.
type cutConn struct {
	net.Conn
	armed atomic.Bool

	mu   sync.Mutex
	cut  bool
	head []byte // the part of a message header read so far
	rest int    // bytes of the current message's body still to come
}

func (c *cutConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut {
		return 0, errCutRows
	}
	n, err := c.Conn.Read(p)
	if !c.armed.Load() {
		return n, err
	}
	// Server messages: a type byte, a big-endian int32 length that counts
	// itself, the body.
	for i := 0; i < n; {
		if c.rest > 0 {
			k := min(c.rest, n-i)
			i, c.rest = i+k, c.rest-k
			continue
		}
		if len(c.head) == 0 && p[i] == 'D' {
			c.cut = true
			_ = c.Conn.Close()
			if i == 0 {
				return 0, errCutRows
			}
			return i, nil
		}
		c.head = append(c.head, p[i])
		i++
		if len(c.head) == 5 {
			c.rest = int(binary.BigEndian.Uint32(c.head[1:])) - 4
			c.head = c.head[:0]
		}
	}
	return n, err
}

// newCuttingStore returns a store on schema whose pool has one connection,
// which cut cuts (see cutConn) while it reads the rows of the next
// statement.
func newCuttingStore(t *testing.T, schema string, shift *pgstore.TimeShift) (s *pgstore.Store, cut func()) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn())
	require.NoError(t, err)
	cfg.MaxConns = 1
	// The cut reads the server's messages as they are: no TLS.
	cfg.ConnConfig.TLSConfig, cfg.ConnConfig.Fallbacks = nil, nil
	var conn *cutConn
	dial := cfg.ConnConfig.DialFunc
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		conn = &cutConn{Conn: c}
		return conn, nil
	}
	pool := newPoolFrom(t, cfg)
	require.NoError(t, pool.Ping(context.Background())) // connected, and idle
	s, err = pgstore.New(pool, pgstore.WithSchema(schema), pgstore.WithTimeShift(shift))
	require.NoError(t, err)
	return s, func() { conn.armed.Store(true) }
}

// If reading the rows TakeOverStalled returns fails after the server ran
// its UPDATE, none of the executions is taken over: each keeps its attempt
// and its run-out lease, and the next TakeOverStalled takes every one of
// them over with one attempt more. (The UPDATE used to commit on its own:
// those records sat on a fresh lease that nobody held and lost one of
// their attempts.)
func TestTakeOverStalledTakesNothingWhenItsRowsCannotBeRead(t *testing.T) {
	t.Parallel()
	s, schema, shift := newStore(t)
	ctx := context.Background()
	const stalled = 3
	for i := range stalled {
		r := mustClaim(t, s, claimReq(fmt.Sprint("order-", i)), idempotency.ClaimCreated)
		require.NoError(t, s.SaveRecoveryPoint(ctx, fenceOf(r), "begin:charge", nil, time.Minute))
	}
	shift.Advance(2 * time.Minute)

	cutting, cut := newCuttingStore(t, schema, shift)
	cut()
	recs, err := cutting.TakeOverStalled(ctx, "", 0, time.Minute)
	require.Error(t, err)
	assert.Empty(t, recs)

	attempts := func() map[string]int64 {
		rows, err := s.Pool().Query(ctx, "SELECT convert_from(key, 'UTF8'), attempt FROM "+table(schema, "idempotency_keys"))
		require.NoError(t, err)
		got := map[string]int64{}
		for rows.Next() {
			var key string
			var attempt int64
			require.NoError(t, rows.Scan(&key, &attempt))
			got[key] = attempt
		}
		require.NoError(t, rows.Err())
		return got
	}
	for key, attempt := range attempts() {
		assert.Equal(t, int64(1), attempt, "%s was taken over by a takeover nobody read", key)
	}
	// The cut connection's server process ends, and its locks go with it:
	// wait for them (a lock that waits, not a sleep).
	tx, err := s.Pool().Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "SELECT 1 FROM "+table(schema, "idempotency_keys")+" FOR UPDATE")
	require.NoError(t, err)
	require.NoError(t, tx.Rollback(ctx))

	recs, err = s.TakeOverStalled(ctx, "", 0, time.Minute)
	require.NoError(t, err)
	assert.Len(t, recs, stalled, "every one is still stalled")
	for _, r := range recs {
		assert.Equal(t, int64(2), r.Attempt)
	}
}
